"""Where the redactor cuts a text: secrets across its window edges are hidden whole; a secret split across two
tool results is judged piece by piece (a documented limit, docs/data.md "Redaction")."""

from __future__ import annotations

import base64
import json
import random
import string

import pytest

from alight_server.redaction import Redactor
from alight_server.redaction.redactor import OVERLAP, WINDOW
from tests.server.redaction.planted import SECRETS

LINE = "The build log line number {} reports that every step passed without warnings.\n"
FILLER = "".join(LINE.format(i) for i in range(400))  # about 32 KB: four windows
EDGES = (WINDOW - OVERLAP, WINDOW, 2 * WINDOW - OVERLAP)


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(cached_texts=0)


def _long_jwt(payload_chars: int) -> str:
    rng = random.Random(30)

    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    claims = {"data": "".join(rng.choice(string.ascii_letters) for _ in range(payload_chars))}
    # Letters only: a signature no other detector finds alone, as a window that sees only the tail reads it.
    signature = "".join(rng.choice(string.ascii_letters) for _ in range(43))
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.{signature}"


def _pieces_shown(secret: str, text: str, size: int = 16) -> list[str]:
    return [secret[i : i + size] for i in range(0, len(secret) - size, size // 2) if secret[i : i + size] in text]


@pytest.mark.parametrize("name", [n for n in SECRETS if n != "employee_id"])  # that one is the config's pattern
def test_a_secret_across_each_window_edge_is_hidden(redactor: Redactor, name: str) -> None:
    secret = SECRETS[name]
    for edge in EDGES:
        for back in (0, 1, len(secret) // 2, len(secret) - 1):
            at = edge - back
            shown = redactor.redact(f"{FILLER[:at]} {secret} {FILLER[at:]}")
            assert secret not in shown, (name, edge, back)


# Starting before the second window and ending past the first: each window sees only a piece of it.
@pytest.mark.parametrize("offset", [WINDOW - 4000, WINDOW - 3000, WINDOW - OVERLAP - 100])
def test_a_jwt_longer_than_the_windows_overlap_across_an_edge_is_hidden_whole(redactor: Redactor, offset: int) -> None:
    # A 4 KB token straddling an edge: no window holds it whole. Before the fix its signature was shown.
    jwt = _long_jwt(3000)
    assert len(jwt) > OVERLAP
    shown = redactor.redact(f"{FILLER[:offset]} {jwt} {FILLER[offset:]}")
    assert _pieces_shown(jwt, shown) == [] and "[REDACTED:json_web_token]" in shown
    assert FILLER[:offset].rstrip() in shown  # the text around it is kept


def test_the_widening_stops_at_the_tokens_end(redactor: Redactor) -> None:
    jwt = _long_jwt(3000)
    offset = WINDOW - 3000
    shown = redactor.redact(f"{FILLER[:offset]} {jwt} {FILLER[offset:]}")
    assert FILLER[offset : offset + 200] in shown


def test_a_key_split_across_two_tool_results_is_judged_piece_by_piece(redactor: Redactor) -> None:
    # Documented limit: each text is redacted alone, so a key a model splits in two is found only where a
    # piece is a finding by itself (here the AWS key's halves are not; the OpenAI key's are, by entropy).
    aws, openai = SECRETS["aws_access_key_id"], SECRETS["openai_key"]
    results = [{"result": aws[:10]}, {"result": aws[10:]}, {"result": openai[:30]}, {"result": openai[30:]}]
    shown = json.dumps(redactor.redact_json(results))
    assert aws[:10] in shown and aws[10:] in shown
    assert openai[:30] not in shown and openai[30:] not in shown
    assert aws not in shown and openai not in shown  # the whole key is never in any one copy
