"""Streamed chat and completions chunks assembled into the response a non-streamed call returns."""

from __future__ import annotations

from typing import Any

from alight_server.gateway.flavours.reasoning import field_reasoning

# What `_Assembler.add` folds into every choice, passed on as the stream had it.
_COMMON = ("finish_reason", "stop_reason", "token_ids")


def _extend(acc: dict[str, Any], key: str, values: list[Any]) -> None:
    if acc[key] is None:
        acc[key] = []
    acc[key].extend(values)


class _Assembler:
    """What both assemblers fold the same way: the head, the usage, a choice's token ids and finish."""

    object = ""

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.usage: dict[str, Any] | None = None
        self.choices: dict[int, dict[str, Any]] = {}

    def add(self, chunk: dict[str, Any]) -> None:
        if not self.head:
            self.head = {k: chunk.get(k) for k in ("id", "created", "model")}
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for c in chunk.get("choices") or []:
            index = c.get("index", 0)
            acc = self.choices.get(index)
            if acc is None:  # not setdefault: that would build a dict for every chunk
                acc = self.choices[index] = dict.fromkeys(_COMMON)
                acc.update(self._new_choice())
            self._add_choice(c, acc)
            # Extended in place: a long stream stays linear (None until a chunk carries any).
            if c.get("token_ids") is not None:
                _extend(acc, "token_ids", c["token_ids"])
            if c.get("finish_reason"):
                acc["finish_reason"] = c["finish_reason"]
                acc["stop_reason"] = c.get("stop_reason")

    def _new_choice(self) -> dict[str, Any]:
        """A choice's own accumulators before its first chunk."""
        raise NotImplementedError

    def _add_choice(self, c: dict[str, Any], acc: dict[str, Any]) -> None:
        raise NotImplementedError

    def _result(self, choices: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
        out = {**self.head, "object": self.object, "choices": choices, **fields}
        if self.usage is not None:
            out["usage"] = self.usage
        return out


class ChatAssembler(_Assembler):
    """Folds `chat.completion.chunk`s (vLLM token-id extensions included) into one `chat.completion`."""

    object = "chat.completion"

    def __init__(self) -> None:
        super().__init__()
        self.prompt_token_ids: list[int] | None = None

    def add(self, chunk: dict[str, Any]) -> None:
        if chunk.get("prompt_token_ids") is not None:
            self.prompt_token_ids = chunk["prompt_token_ids"]
        super().add(chunk)

    def _new_choice(self) -> dict[str, Any]:
        return {"content": [], "reasoning": [], "tool_calls": {}, "logprobs": None}

    def _add_choice(self, c: dict[str, Any], acc: dict[str, Any]) -> None:
        delta = c.get("delta") or {}
        if delta.get("content"):
            acc["content"].append(delta["content"])
        if reasoning := field_reasoning(delta):
            acc["reasoning"].append(reasoning)
        for tc in delta.get("tool_calls") or []:
            slot = acc["tool_calls"].setdefault(tc.get("index", 0), {"id": None, "name": "", "arguments": []})
            slot["id"] = tc.get("id") or slot["id"]
            fn = tc.get("function") or {}
            slot["name"] += fn.get("name") or ""
            if fn.get("arguments"):
                slot["arguments"].append(fn["arguments"])
        lp = c.get("logprobs")
        if isinstance(lp, dict) and lp.get("content") is not None:
            _extend(acc, "logprobs", lp["content"])

    def tool_calls(self, index: int = 0) -> list[dict[str, Any]]:
        acc = self.choices.get(index)
        if not acc:
            return []
        return [
            {"id": s["id"], "type": "function", "function": {"name": s["name"], "arguments": "".join(s["arguments"])}}
            for _, s in sorted(acc["tool_calls"].items())
        ]

    def result(self) -> dict[str, Any]:
        choices = []
        for i, acc in sorted(self.choices.items()):
            calls = self.tool_calls(i)
            message: dict[str, Any] = {
                "role": "assistant",
                "content": "".join(acc["content"]) if not calls or acc["content"] else None,
            }
            if calls:
                message["tool_calls"] = calls
            if acc["reasoning"]:
                message["reasoning_content"] = "".join(acc["reasoning"])
            logprobs = None if acc["logprobs"] is None else {"content": acc["logprobs"]}
            choices.append({"index": i, "message": message, "logprobs": logprobs, **{k: acc[k] for k in _COMMON}})
        return self._result(choices, prompt_token_ids=self.prompt_token_ids)


class CompletionAssembler(_Assembler):
    """Folds streamed `text_completion` chunks into one completions response."""

    object = "text_completion"

    def _new_choice(self) -> dict[str, Any]:
        return {"text": [], "prompt_token_ids": None, "logprobs": None}

    def _add_choice(self, c: dict[str, Any], acc: dict[str, Any]) -> None:
        acc["text"].append(c.get("text") or "")
        if c.get("prompt_token_ids") is not None:
            acc["prompt_token_ids"] = c["prompt_token_ids"]
        lp = c.get("logprobs")
        if isinstance(lp, dict):
            merged = acc["logprobs"] or {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
            for key in merged:
                merged[key] += list(lp.get(key) or [])
            acc["logprobs"] = merged

    def result(self) -> dict[str, Any]:
        kept = ("logprobs", *_COMMON, "prompt_token_ids")
        choices = [
            {"index": i, "text": "".join(acc["text"]), **{k: acc[k] for k in kept}}
            for i, acc in sorted(self.choices.items())
        ]
        return self._result(choices)
