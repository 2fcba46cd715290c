"""vLLM's OpenAI-compatible response and stream-chunk shapes, built from the toy model's choices."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from alight_testing.fake_model import Choice, FakeTokenizer, Piece, top_alternatives


def usage(prompt_tokens: int, choices: list[Choice]) -> dict[str, Any]:
    completion = sum(len(c.pieces) for c in choices)
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
    }


def _chat_logprob(tok: FakeTokenizer, p: Piece, k: int) -> dict[str, Any]:
    tops = (
        [{"token": text, "logprob": lp, "bytes": list(text.encode())} for text, _, lp in top_alternatives(tok, p, k)]
        if k
        else []
    )
    return {"token": p.text, "logprob": p.logprob, "bytes": list(p.text.encode()), "top_logprobs": tops}


def _chat_logprobs(tok: FakeTokenizer, pieces: list[Piece], body: dict[str, Any]) -> dict[str, Any] | None:
    if not body.get("logprobs"):
        return None
    k = int(body.get("top_logprobs") or 0)
    return {"content": [_chat_logprob(tok, p, k) for p in pieces]}


def _completion_logprobs(
    tok: FakeTokenizer, pieces: list[Piece], body: dict[str, Any], offset: int = 0
) -> dict[str, Any] | None:
    if body.get("logprobs") is None:
        return None
    k = max(int(body["logprobs"]), 1)
    offsets, pos = [], offset
    for p in pieces:
        offsets.append(pos)
        pos += len(p.text)
    return {
        "text_offset": offsets,
        "token_logprobs": [p.logprob for p in pieces],
        "tokens": [p.text for p in pieces],
        "top_logprobs": [{t: lp for t, _, lp in top_alternatives(tok, p, k)} for p in pieces],
    }


def chat_response(
    rid: str, model: str, prompt_ids: list[int], choices: list[Choice], body: dict[str, Any], tok: FakeTokenizer
) -> dict[str, Any]:
    ids = bool(body.get("return_token_ids"))
    out_choices = []
    for c in choices:
        message: dict[str, Any] = {"role": "assistant", "content": c.content, "refusal": None, "reasoning": c.reasoning}
        if c.tool_calls:
            message["tool_calls"] = c.tool_calls
        out_choices.append(
            {
                "index": c.index,
                "message": message,
                "logprobs": _chat_logprobs(tok, c.pieces, body),
                "finish_reason": c.finish_reason,
                "stop_reason": c.stop_reason,
                "token_ids": c.token_ids if ids else None,
            }
        )
    return {
        "id": rid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": out_choices,
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage(len(prompt_ids), choices),
        "prompt_logprobs": None,
        "prompt_token_ids": prompt_ids if ids else None,
        "kv_transfer_params": None,
    }


def _tool_delta(c: Choice, p: Piece) -> dict[str, Any]:
    if p.tool_name is not None:
        call = c.tool_calls[p.tool_index or 0]
        return {
            "tool_calls": [
                {
                    "index": p.tool_index,
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": p.tool_name, "arguments": ""},
                }
            ]
        }
    if p.tool_args is not None:
        return {"tool_calls": [{"index": p.tool_index, "function": {"arguments": p.tool_args}}]}
    return {}  # tokens that frame a tool call carry ids and logprobs but no visible delta


def interleaved(choices: list[Choice]) -> Iterator[tuple[Choice, int, Piece]]:
    """(choice, position, piece) in vLLM's streaming order: token by token, each choice in turn at each position."""
    longest = max((len(c.pieces) for c in choices), default=0)
    for pos in range(longest):
        for c in choices:
            if pos < len(c.pieces):
                yield c, pos, c.pieces[pos]


def chat_chunk(
    rid: str, model: str, prompt_ids: list[int], choices: list[Choice], body: dict[str, Any], tok: FakeTokenizer
) -> list[dict[str, Any]]:
    """Chunks in vLLM's order: a role chunk per choice (the first carries prompt ids), then tokens."""
    ids = bool(body.get("return_token_ids"))
    created = int(time.time())
    head = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model}
    chunks: list[dict[str, Any]] = []
    for c in choices:
        chunk = {
            **head,
            "choices": [
                {
                    "index": c.index,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
        if ids:
            chunk["prompt_token_ids"] = prompt_ids
            chunk["prompt_text"] = None  # vLLM >= 0.11 sends it (null unless return_prompt_text)
        chunks.append(chunk)
    for c, pos, p in interleaved(choices):
        last = pos == len(c.pieces) - 1
        if p.tool_index is not None:
            delta = _tool_delta(c, p)
        else:
            delta = {"reasoning": p.reasoning} if p.reasoning is not None else {"content": p.content}
        choice: dict[str, Any] = {
            "index": c.index,
            "delta": delta,
            "logprobs": _chat_logprobs(tok, [p], body),
            "finish_reason": c.finish_reason if last else None,
        }
        if last:
            choice["stop_reason"] = c.stop_reason
        if ids:
            choice["token_ids"] = [p.token_id]
        chunks.append({**head, "choices": [choice]})
    return chunks


def completion_response(
    rid: str, model: str, prompt_ids: list[int], choices: list[Choice], body: dict[str, Any], tok: FakeTokenizer
) -> dict[str, Any]:
    ids = bool(body.get("return_token_ids"))
    return {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": c.index,
                "text": c.content or "",
                "logprobs": _completion_logprobs(tok, c.pieces, body),
                "finish_reason": c.finish_reason,
                "stop_reason": c.stop_reason,
                "token_ids": c.token_ids if ids else None,
                "prompt_logprobs": None,
                "prompt_token_ids": prompt_ids if ids else None,
            }
            for c in choices
        ],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage(len(prompt_ids), choices),
        "kv_transfer_params": None,
    }


def completion_chunk(
    rid: str, model: str, prompt_ids: list[int], choices: list[Choice], body: dict[str, Any], tok: FakeTokenizer
) -> list[dict[str, Any]]:
    """One chunk per token per choice; each choice's first chunk carries the prompt ids."""
    ids = bool(body.get("return_token_ids"))
    head = {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model}
    chunks: list[dict[str, Any]] = []
    offsets = [0] * len(choices)
    for c, pos, p in interleaved(choices):
        last = pos == len(c.pieces) - 1
        choice: dict[str, Any] = {
            "index": c.index,
            "text": p.text,
            "logprobs": _completion_logprobs(tok, [p], body, offsets[c.index]),
            "finish_reason": c.finish_reason if last else None,
            "stop_reason": c.stop_reason if last else None,
        }
        offsets[c.index] += len(p.text)
        if ids:
            choice["prompt_token_ids"] = prompt_ids if pos == 0 else None
            choice["token_ids"] = [p.token_id]
        chunks.append({**head, "choices": [choice]})
    return chunks
