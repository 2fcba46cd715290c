"""The model registry: names resolve to cached HF directories; unknown names list the known ones."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from alight_server.inference.models import BUILDERS, resolve_model


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_unknown_model_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown model 'gpt-17'.*smollm2-135m.*tiny"):
        resolve_model("gpt-17")


def test_tiny_model_is_rebuilt_identically_from_its_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cached = resolve_model("tiny")
    monkeypatch.setenv("ALIGHT_CACHE_DIR", str(tmp_path))
    rebuilt = resolve_model("tiny")
    assert rebuilt.parent == tmp_path
    for name in ("model.safetensors", "tokenizer.json"):
        assert _digest(rebuilt / name) == _digest(cached / name)


def test_a_local_directory_resolves_to_itself() -> None:
    tiny = resolve_model("tiny")
    assert resolve_model(str(tiny)) == tiny


def test_a_directory_without_a_config_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"config\.json"):
        resolve_model(str(tmp_path))


def test_registry_knows_tiny_and_smollm2() -> None:
    assert {"tiny", "smollm2-135m"} <= set(BUILDERS)


def test_chat_template_renders_tools_calls_and_results_hermes_style(engine) -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]  # fmt: skip
    text = engine.tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather"' in text
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
        in text
    )
    assert "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n" in text
