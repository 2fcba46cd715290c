"""The detectors on their own: each class of secret and personal data is found, ordinary text is left alone."""

from __future__ import annotations

import base64
import json

import pytest
from pydantic import ValidationError

from alight_server.config import ServerConfig
from alight_server.redaction import PatternRule, RedactionConfig, Redactor
from alight_server.redaction.views import redact_tokens
from tests.server.redaction.planted import BLOCK, EMPLOYEE, PATTERN, PEM, SECRETS, leaked


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionConfig(patterns=[PatternRule(**PATTERN)]))


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_each_planted_secret_is_replaced_by_a_mark(redactor: Redactor, name: str) -> None:
    value = PEM if name == "private_key_body" else SECRETS[name]
    text, spans = redactor.redact_text(f"before {value} after")
    assert leaked(text) == []
    assert text.startswith("before [REDACTED:") and text.endswith("] after")
    assert len(spans) == 1 and (spans[0].start, spans[0].end) == (7, 7 + len(value))


def test_the_block_of_every_class_keeps_its_lines_and_loses_every_value(redactor: Redactor) -> None:
    text, spans = redactor.redact_text(BLOCK)
    assert leaked(text) == [] and len(spans) == len(SECRETS)
    kinds = {s.kind for s in spans}
    assert {"aws_access_key", "openai_token", "slack_token", "private_key", "json_web_token"} <= kinds
    assert {"high_entropy", "email", "phone", "card", "employee_id"} <= kinds
    assert text.count("\n") == BLOCK.count("\n") - (PEM.count("\n"))  # the PEM block is one mark


def test_spans_are_positions_in_the_original_text(redactor: Redactor) -> None:
    for span in redactor.spans(BLOCK):
        assert BLOCK[span.start : span.end].strip() != ""
        assert any(value in BLOCK[span.start : span.end] or BLOCK[span.start : span.end] in value
                   for value in [*SECRETS.values(), PEM])  # fmt: skip


def test_a_private_key_cut_short_is_hidden_over_its_body_lines(redactor: Redactor) -> None:
    cut = PEM.rsplit("\n", 2)[0]  # no END line: a log that truncated it
    assert redactor.redact(f"key:\n{cut}\nnext line") == "key:\n[REDACTED:private_key]\nnext line"


def test_a_private_key_inside_a_json_string_is_hidden_whole(redactor: Redactor) -> None:
    encoded = json.dumps({"file": "id_rsa", "content": PEM})  # newlines escaped, as in a tool's JSON argument
    text = redactor.redact(encoded)
    assert "PRIVATE KEY" not in text and leaked(text) == [] and text.endswith('"content": "[REDACTED:private_key]"}')


# Variants no detector names: other providers, other prefix lengths, other formats.
VARIANTS = {
    "github fine-grained token": "github_pat_11ABCDE7Q0" + "x9Kp2LmQ7rT4vW8yZ1bN3cF6hJ0kS5dG" * 2 + "aB3dE5gH7jK9mN",
    "legacy OpenAI key": "sk-Zr8J0LnmsFOWZ6Tcy69zfQ8BBKvJYitgmCXY96L6w16HAwrl",
    "Anthropic key": "sk-ant-api03-" + "Qx7Lm2Rt9Vb4Nc8Kd3Fg6Hj1Sp5Wz0Ya" * 2 + "-AbCdEfGh12",
    "Hugging Face token": "hf_aB3cD4eF5gH6iJ7kL8mN9oP0qR1sT2uV3wX",
    "Google API key": "AIzaSyD4-f8Kq2LmZ7xR1vT9bN3cW6yH0jP5sQe",
    "temporary AWS key id": "ASIA4RTX2LQ9ZP7MVK3D",
    "phone in parentheses": "(415) 555-2671",
    "phone with dots": "415.555.2671",
    "UK phone": "+44 20 7946 0958",
    "German phone": "+49 30 901820",
    "Mastercard with hyphens": "5555-5555-5555-4444",
    "Amex, 15 digits": "3782 822463 10005",
}


# What a hostile model could do to a secret to get it past a reviewer's eyes.
DISGUISED = {
    "base64 of a line with a key": base64.b64encode(f"KEY={SECRETS['aws_secret_access_key']}".encode()).decode(),
    "hex of a key": SECRETS["stripe_key"].encode().hex(),
    "a key reversed": SECRETS["aws_access_key_id"][::-1],
}


@pytest.mark.parametrize("name", sorted(DISGUISED))
def test_a_secret_a_model_encoded_is_still_hidden(redactor: Redactor, name: str) -> None:
    value = DISGUISED[name]
    assert value not in redactor.redact(f"the model wrote: {value}")


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_variant_no_detector_names_is_still_hidden(redactor: Redactor, name: str) -> None:
    value = VARIANTS[name]
    assert value not in redactor.redact(f"here: {value} (end)")


READABLE = '''def tokenize(text: str, max_length: int = 4096) -> list[int]:
    """Encode `text` for the policy; see trainer/step/samples/build.py."""
    ids = tokenizer.encode(text, add_special_tokens=False)[:max_length]
    return ids  # e.g. [151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30]

2026-12-03T06:45:49.123456+00:00 INFO rollout run7-s00000-t000-k00 attempt 1 finished in 12.5 s
loss=0.4123 kl=0.0012 tokens/s=1834.7 step 12/200 lr=1e-06 at 1764745200123456789 ns
Traceback (most recent call last):
  File "/usr/lib/python3.11/site-packages/alight_server/trainer/loop.py", line 212, in run_training_step
request id 123e4567-e89b-12d3-a456-426614174000 took 843 ms; version 0.1.0; port 8700; pid 41872
The answer is 42, and 3.14159 is pi; call the function test_running_rollout_cannot_go_back_to_queued.
API_KEY_ENV = "ALIGHT_INFERENCE_API_KEY"  # the variable's name, not its value
password = os.environ["DB_PASSWORD"]; token_secret = "${TOKEN_SECRET}"
'''


def test_ordinary_code_logs_and_token_ids_stay_readable(redactor: Redactor) -> None:
    text, spans = redactor.redact_text(READABLE)
    assert spans == [] and text == READABLE


def test_a_password_assigned_in_code_or_config_is_hidden(redactor: Redactor) -> None:
    text = 'DB_PASSWORD = "Tr0ub4dor&3"\n  "api_key": "abc123xyz",'
    assert (
        redactor.redact(text) == 'DB_PASSWORD = "[REDACTED:secret_keyword]"\n  "api_key": "[REDACTED:secret_keyword]",'
    )


def test_a_digit_run_that_fails_the_luhn_check_is_not_a_card(redactor: Redactor) -> None:
    assert redactor.spans("order 4111 1111 1111 1112 shipped") == []


def test_a_long_number_outside_the_card_networks_is_not_a_card(redactor: Redactor) -> None:
    assert redactor.spans("created_at_ns 1764745200000000004") == []  # Luhn-valid, but no network starts with 1


def test_a_disabled_kind_is_left_in_and_the_others_still_run() -> None:
    redactor = Redactor(RedactionConfig(disable=["phone"]))
    text = redactor.redact(f"call {SECRETS['phone']} or mail {SECRETS['email']}")
    assert SECRETS["phone"] in text and SECRETS["email"] not in text


def test_public_ip_addresses_are_shown_unless_the_config_enables_them() -> None:
    line = "upstream 93.184.216.34 answered"
    assert Redactor().redact(line) == line
    assert (
        Redactor(RedactionConfig(enable=["public_ip_ipv4"])).redact(line)
        == "upstream [REDACTED:public_ip_ipv4] answered"
    )


def test_an_operator_pattern_from_the_server_config_is_hidden() -> None:
    config = ServerConfig.model_validate({"redaction": {"patterns": [PATTERN]}})
    assert Redactor(config.redaction).redact(f"badge {EMPLOYEE}.") == "badge [REDACTED:employee_id]."
    assert EMPLOYEE in Redactor().redact(f"badge {EMPLOYEE}.")  # no detector knows it without the pattern


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"patterns": [{"name": "x", "regex": "(unclosed"}]}, "redaction pattern '(unclosed' is not a regular"),
        ({"patterns": [{"name": "x", "regex": "a*"}]}, "matches the empty string"),
        ({"disable": ["phones"]}, "unknown redaction detector kind(s) ['phones']; known: "),
        ({"phone_regions": ["XX"]}, "unknown phone region(s) ['XX']"),
    ],
)
def test_a_bad_redaction_section_is_refused_naming_what_to_fix(section: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=None) as caught:
        ServerConfig.model_validate({"redaction": section})
    assert message in str(caught.value)


def test_a_phone_among_other_numbers_is_found(redactor: Redactor) -> None:
    line = f"2026-12-03 loss=0.4123 ids 1 2 3 4 5 6 7 then {SECRETS['phone']} at 06:45:49.123"
    assert leaked(redactor.redact(line)) == [] and "loss=0.4123" in redactor.redact(line)


def test_phone_regions_read_numbers_written_without_a_country_code() -> None:
    local = "call 020 7946 0958 today"
    assert Redactor().redact(local) == local  # a US reading finds no valid number
    assert Redactor(RedactionConfig(phone_regions=["US", "GB"])).redact(local) == "call [REDACTED:phone] today"


def test_redact_json_redacts_every_string_and_keeps_numbers_and_shape(redactor: Redactor) -> None:
    value = {"messages": [{"role": "user", "content": BLOCK}], SECRETS["email"]: 3, "ids": [1, 2], "ok": True}
    out = redactor.redact_json(value)
    assert leaked(json.dumps(out)) == []
    assert out["messages"][0]["role"] == "user" and out["[REDACTED:email]"] == 3
    assert out["ids"] == [1, 2] and out["ok"] is True


def test_a_secret_far_into_a_long_log_is_found_across_the_detection_windows(redactor: Redactor) -> None:
    log = "".join(f"line {i}: all fine\n" for i in range(3000)) + BLOCK + "\n" + "tail\n" * 3000
    assert leaked(redactor.redact(log)) == []


def test_a_redacted_span_becomes_one_block_over_the_tokens_it_covers(redactor: Redactor) -> None:
    pieces = ["Mail", " dana", ".whit", "field", "@example", ".org", " now", "."]
    tokens = [[i, piece, i % 2, -0.5 if i % 2 else None] for i, piece in enumerate(pieces)]
    shown, starts = redact_tokens(redactor, tokens, {"0": 0, "1": 3, "2": 6})
    assert shown[0] == tokens[0] and shown[2:] == tokens[6:]
    assert shown[1] == [None, "[REDACTED:email]", 1, None, 5]  # ' dana' .. '.org': five tokens, some trained
    assert starts == {"0": 0, "1": 1, "2": 2}  # a call starting inside the block starts at the block


def test_a_token_row_without_texts_is_returned_as_it_is(redactor: Redactor) -> None:
    tokens = [[5, None, 0, None], [6, None, 1, -0.1]]
    assert redact_tokens(redactor, tokens, {"0": 0}) == (tokens, {"0": 0})
