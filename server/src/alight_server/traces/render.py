"""A call known only as text, rendered with the policy's own chat template and tokenizer (fidelity `rendered`).

How the prompt and response are rendered: docs/traces.md "Fidelity".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from alight_server.traces.model import TraceCall


class RenderError(ValueError):
    """The policy's chat template cannot render this call; the message says what in it."""


class Renderer:
    """Render calls with one tokenizer (and its chat template)."""

    def __init__(self, tokenizer: Any, name: str) -> None:
        self.tokenizer, self.name = tokenizer, name
        eos = tokenizer.eos_token_id
        self._end = set(eos if isinstance(eos, list) else [eos]) - {None}

    @classmethod
    def for_model(cls, model: str) -> Renderer:
        """The tokenizer of a registered model name (tiny, smollm2-135m) or a local HF folder."""
        from transformers import AutoTokenizer

        from alight_server.inference.models import resolve_model

        path: Path = resolve_model(model)
        return cls(AutoTokenizer.from_pretrained(path), model)

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids)))

    def render(self, call: TraceCall) -> tuple[list[int], list[int]]:
        """(prompt ids, response ids) of a text-only call."""
        prompt = self._template(call.messages, call.tools, generation_prompt=True)
        whole = self._template([*call.messages, call.reply], call.tools, generation_prompt=False)
        if not whole.startswith(prompt):
            at = next((i for i, (a, b) in enumerate(zip(prompt, whole, strict=False)) if a != b), len(prompt))
            raise RenderError(
                f"the chat template of {self.name} renders the reply into the history differently from the generation "
                f"prompt (they part at character {at}: {prompt[at : at + 30]!r} vs {whole[at : at + 30]!r})"
            )
        prompt_ids = self.render_ids(prompt)
        response_ids = self.render_ids(whole[len(prompt) :])
        end = next((i for i, t in enumerate(response_ids) if t in self._end), None)
        if not response_ids or (end is None and not call.reply.get("content") and not call.reply.get("tool_calls")):
            raise RenderError("the reply is empty: nothing the model generated to store")
        return prompt_ids, response_ids if end is None else response_ids[: end + 1]

    def _template(self, messages: list[dict[str, Any]], tools: Any, *, generation_prompt: bool) -> str:
        try:
            text = self.tokenizer.apply_chat_template(
                messages, tools=tools, add_generation_prompt=generation_prompt, tokenize=False
            )
        except Exception as exc:  # jinja raises anything: the template cannot render this conversation
            raise RenderError(
                f"the chat template of {self.name} cannot render this call: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(text, str):
            raise RenderError(f"the chat template of {self.name} returned {type(text).__name__}, not text")
        return text

    def render_ids(self, text: str) -> list[int]:
        """`text` as token ids, special tokens read as such (no BOS added): how rendered prompts are tokenized."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
