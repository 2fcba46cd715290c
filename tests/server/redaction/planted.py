"""Secrets and personal data of every detector class, random-looking but made here (none is real).

`BLOCK` holds them all, one a line, as an agent's prompt, a tool's result or a log line would carry
them; `SECRETS` lists each value a redacted copy must not contain. `PATTERN` is the operator's own
pattern (the server config's `redaction.patterns`) and `EMPLOYEE` a value only it finds.
"""

from __future__ import annotations

import base64
import json
import random
import string

_rng = random.Random(30)


def _pick(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits


def _jwt() -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': 'u-4417', 'iat': 1764745200})}.{_pick(ALNUM, 43)}"


def _card() -> str:
    """A Visa-range number with its Luhn check digit, printed in groups of four."""
    digits = [4, *(_rng.randrange(10) for _ in range(14))]
    total = sum(d if i % 2 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(reversed(digits)))
    number = "".join(map(str, digits)) + str((10 - total % 10) % 10)
    return " ".join(number[i : i + 4] for i in range(0, 16, 4))


PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + "\n".join(_pick(ALNUM + "+/", 64) for _ in range(4))
    + "\n-----END RSA PRIVATE KEY-----"
)
PEM_BODY_LINE = PEM.splitlines()[2]
PATTERN = {"name": "employee_id", "regex": r"EMP-\d{6}"}
EMPLOYEE = "EMP-" + _pick(string.digits, 6)

SECRETS: dict[str, str] = {
    "aws_access_key_id": "AKIA" + _pick(UPPER, 16),
    "aws_secret_access_key": _pick(ALNUM + "+/", 40),
    "github_token": "ghp_" + _pick(ALNUM, 36),
    "openai_key": "sk-proj-" + _pick(ALNUM, 20) + "T3BlbkFJ" + _pick(ALNUM, 20),
    "slack_token": f"xoxb-{_pick(string.digits, 12)}-{_pick(string.digits, 13)}-{_pick(ALNUM, 24)}",
    "stripe_key": "sk_live_" + _pick(ALNUM, 24),
    "private_key_body": PEM_BODY_LINE,
    "jwt": _jwt(),
    "high_entropy_token": _pick(ALNUM, 32),
    "email": "dana.whitfield@example.org",
    "phone": "+1 415-555-0132",
    "card": _card(),
    "employee_id": EMPLOYEE,
}

BLOCK = "\n".join(
    [
        f"export AWS_ACCESS_KEY_ID={SECRETS['aws_access_key_id']}",
        f"export AWS_SECRET_ACCESS_KEY={SECRETS['aws_secret_access_key']}",
        f"git remote set-url origin https://x:{SECRETS['github_token']}@github.com/acme/app.git",
        f"OPENAI_API_KEY={SECRETS['openai_key']}",
        f"slack bot token: {SECRETS['slack_token']}",
        f"stripe.api_key = '{SECRETS['stripe_key']}'",
        PEM,
        f"Authorization: Bearer {SECRETS['jwt']}",
        f"session cookie {SECRETS['high_entropy_token']}",
        f"Contact {SECRETS['email']} or call {SECRETS['phone']}; card on file {SECRETS['card']}.",
        f"badge {EMPLOYEE}",
    ]
)


def leaked(text: str) -> list[str]:
    """The planted values `text` still shows (none, in a redacted copy)."""
    return [name for name, value in SECRETS.items() if value in text]
