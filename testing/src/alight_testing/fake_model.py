"""A deterministic toy language model: tokenizer, chat template, replies, tool calls, logprobs.

Everything is a pure function of the request, so a test can compute or
compare exactly what an upstream produced. Tokens are whitespace-led words
(`" world"`), and the chat template is ChatML-like with four special tokens.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

SPECIAL_TOKENS = {"<|im_start|>": 1, "<|im_end|>": 2, "<tool_call>": 3, "</tool_call>": 4}
FIRST_WORD_ID = 1000
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in SPECIAL_TOKENS) + ")")
_PIECE_RE = re.compile(r"\s*\S+|\s+")
_CALL_RE = re.compile(r"\bcall\s+([A-Za-z_][A-Za-z0-9_.-]*)")

Reasoning = Literal["tags", "field"] | None
# (tools, last user text) -> [(tool name, arguments dict)]; [] means answer in text.
ToolRule = Callable[[list[dict[str, Any]], str], list[tuple[str, dict[str, Any]]]]


class FakeTokenizer:
    """Word-piece tokenizer: pieces concatenate back to the text exactly."""

    def __init__(self, vocab_size: int = 32000) -> None:
        if vocab_size <= FIRST_WORD_ID:
            raise ValueError(f"vocab_size must be above {FIRST_WORD_ID}, got {vocab_size}")
        self.vocab_size = vocab_size

    def pieces(self, text: str) -> list[str]:
        out: list[str] = []
        for part in _SPECIAL_RE.split(text):
            if part in SPECIAL_TOKENS:
                out.append(part)
            elif part:
                out.extend(_PIECE_RE.findall(part))
        return out

    def piece_id(self, piece: str) -> int:
        if piece in SPECIAL_TOKENS:
            return SPECIAL_TOKENS[piece]
        return FIRST_WORD_ID + zlib.crc32(piece.encode()) % (self.vocab_size - FIRST_WORD_ID)

    def encode(self, text: str) -> list[int]:
        return [self.piece_id(p) for p in self.pieces(text)]


def message_text(content: Any) -> str:
    """Chat content as plain text: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def render_chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """The prompt the toy model reads, ending with the assistant header."""
    parts: list[str] = []
    if tools:
        parts.append(f"<|im_start|>system\n# Tools\n{json.dumps(tools, sort_keys=True)}<|im_end|>\n")
    for m in messages:
        body = message_text(m.get("content"))
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function", {})
            body += f"<tool_call>{fn.get('name')} {fn.get('arguments')}</tool_call>"
        parts.append(f"<|im_start|>{m.get('role')}\n{body}<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def _default_for(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    return {"string": "x", "integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}.get(str(kind))


def schema_arguments(tool: dict[str, Any]) -> dict[str, Any]:
    """Arguments that satisfy the tool's JSON schema: its required properties with simple values."""
    params = (tool.get("function") or {}).get("parameters") or {}
    props = params.get("properties") or {}
    return {name: _default_for(props.get(name) or {}) for name in params.get("required") or []}


def default_tool_rule(tools: list[dict[str, Any]], user_text: str) -> list[tuple[str, dict[str, Any]]]:
    """`call NAME` (optionally followed by a JSON object of arguments) calls tool NAME, in order."""
    by_name: dict[str, dict[str, Any]] = {str((t.get("function") or {}).get("name")): t for t in tools}
    calls: list[tuple[str, dict[str, Any]]] = []
    for match in _CALL_RE.finditer(user_text):
        name = match.group(1).rstrip(".")
        if name not in by_name or not name:
            continue
        rest = user_text[match.end() :].lstrip()
        args: dict[str, Any] | None = None
        if rest.startswith("{"):
            try:
                parsed, _ = json.JSONDecoder().raw_decode(rest)
                args = parsed if isinstance(parsed, dict) else None
            except ValueError:
                args = None
        calls.append((name, args if args is not None else schema_arguments(by_name[name])))
    return calls


@dataclass
class Piece:
    """One generated token: its text, id, logprob, and what it adds to a streamed delta."""

    text: str
    token_id: int
    logprob: float
    content: str | None = None  # text delta
    reasoning: str | None = None  # reasoning delta (a server running a reasoning parser)
    tool_index: int | None = None  # which tool call this token belongs to
    tool_name: str | None = None  # set on the token that opens a tool call
    tool_args: str | None = None  # arguments fragment


@dataclass
class Choice:
    index: int
    pieces: list[Piece]
    finish_reason: str
    stop_reason: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def content(self) -> str | None:
        if self.tool_calls:
            return None
        return "".join(p.content or "" for p in self.pieces)

    @property
    def reasoning(self) -> str | None:
        return "".join(p.reasoning for p in self.pieces if p.reasoning) or None

    @property
    def token_ids(self) -> list[int]:
        return [p.token_id for p in self.pieces]


def token_logprob(position: int, token_id: int) -> float:
    """A deterministic, plausible logprob in [-5, -0.001]."""
    return -round(0.001 + (zlib.crc32(f"{position}:{token_id}".encode()) % 5000) / 1000, 3)


def top_alternatives(tok: FakeTokenizer, piece: Piece, k: int) -> list[tuple[str, int, float]]:
    """The chosen token then k-1 lower-ranked alternatives: (text, id, logprob)."""
    out = [(piece.text, piece.token_id, piece.logprob)]
    for j in range(1, k):
        alt = f"{piece.text}~{j}"
        out.append((alt, tok.piece_id(alt), round(piece.logprob - j * 0.5, 3)))
    return out


class FakeModel:
    """Turns a prompt into replies. `tag` words make each prompt's reply distinct."""

    def __init__(
        self, tokenizer: FakeTokenizer, tool_rule: ToolRule = default_tool_rule, reasoning: Reasoning = None
    ) -> None:
        self.tok = tokenizer
        self.tool_rule = tool_rule
        # A reasoning model's text replies start with a thought: `<think>...</think>` in the content
        # ("tags", a server without a reasoning parser) or in the `reasoning` field ("field", with one).
        self.reasoning = reasoning

    def _piece(self, text: str, position: int, **delta: Any) -> Piece:
        tid = self.tok.piece_id(text)
        return Piece(text=text, token_id=tid, logprob=token_logprob(position, tid), **delta)

    def _text_reply(self, prompt: str, seed: Any, index: int, answer: str, tagged: bool) -> list[str]:
        tag = hashlib.sha256(f"{prompt}\0{seed}\0{index}".encode()).hexdigest()[:8]
        return self.tok.pieces(f"[{tag}] {answer}".rstrip() if tagged else answer)

    def reply(
        self,
        prompt: str,
        answer: str,
        *,
        index: int = 0,
        seed: Any = None,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
        tool_calls: list[tuple[str, dict[str, Any]]] | None = None,
        tagged: bool = True,
    ) -> Choice:
        """One choice: a text answer (after a tag unique to the prompt, seed and index, unless not `tagged`), or
        tool calls rendered as `<tool_call>name args</tool_call>`."""
        budget = max_tokens if max_tokens is not None else 256
        if tool_calls:
            return self._tool_choice(prompt, index, tool_calls, budget)
        texts = self._text_reply(prompt, seed, index, answer, tagged)
        finish, stop_reason = "stop", None
        joined = "".join(texts)
        for s in stop or []:
            cut = joined.find(s) if s else -1
            if cut >= 0:
                texts = self.tok.pieces(joined[:cut])
                stop_reason = s
                joined = joined[:cut]
        if len(texts) > budget:
            texts, finish, stop_reason = texts[:budget], "length", None
        thought = self._thought(prompt, seed, index)
        if len(thought) + len(texts) > budget:
            texts, finish, stop_reason = texts[: max(budget - len(thought), 0)], "length", None
        pieces = [self._piece(t, i, content=t) for i, t in enumerate(texts, start=len(thought))]
        return Choice(index=index, pieces=thought + pieces, finish_reason=finish, stop_reason=stop_reason)

    def _thought(self, prompt: str, seed: Any, index: int) -> list[Piece]:
        if self.reasoning is None:
            return []
        tag = hashlib.sha256(f"think\0{prompt}\0{seed}\0{index}".encode()).hexdigest()[:8]
        if self.reasoning == "tags":
            texts = self.tok.pieces(f"<think> Let me see: {tag}. </think>\n")
            return [self._piece(t, i, content=t) for i, t in enumerate(texts)]
        texts = self.tok.pieces(f"Let me see: {tag}.")
        return [self._piece(t, i, reasoning=t) for i, t in enumerate(texts)]

    def _tool_choice(self, prompt: str, index: int, calls: list[tuple[str, dict[str, Any]]], budget: int) -> Choice:
        pieces: list[Piece] = []
        tool_calls: list[dict[str, Any]] = []
        digest = hashlib.sha256(prompt.encode()).hexdigest()
        for k, (name, args) in enumerate(calls):
            arguments = json.dumps(args)
            call_id = f"call_{digest[:12]}_{index}_{k}"
            tool_calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
            pieces.append(self._piece("<tool_call>", len(pieces), tool_index=k))
            pieces.append(self._piece(name, len(pieces), tool_index=k, tool_name=name))
            for frag in self.tok.pieces(arguments):
                pieces.append(self._piece(frag, len(pieces), tool_index=k, tool_args=frag))
            pieces.append(self._piece("</tool_call>", len(pieces), tool_index=k))
        # A tool call is never cut by max_tokens here: clients cannot parse half a call.
        del budget
        return Choice(index=index, pieces=pieces, finish_reason="tool_calls", tool_calls=tool_calls)
