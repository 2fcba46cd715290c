"""OpenAI request bodies (plus vLLM's `return_token_ids`) and their translation into prompts and SamplingParams."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from alight_server.inference.sampling import InvalidRequest, SamplingParams

_ROLES = {"system", "developer", "user", "assistant", "tool"}


class StreamOptions(BaseModel):
    include_usage: bool = False


class _Common(BaseModel):
    # Unknown fields (user, metadata, parallel_tool_calls, ...) are accepted and ignored, as vLLM does.
    model_config = ConfigDict(extra="allow")

    model: str
    n: int = 1
    temperature: float | None = None
    top_p: float | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    return_token_ids: bool | None = None  # vLLM: prompt_token_ids on the response, token_ids per choice
    ignore_eos: bool = False  # vLLM extension

    def sampling(self, max_tokens: int | None, top_logprobs: int) -> SamplingParams:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return SamplingParams(
            max_tokens=max_tokens,
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            n=self.n,
            seed=self.seed,
            stop=stop,
            top_logprobs=top_logprobs,
            ignore_eos=self.ignore_eos,
        )


class ChatCompletionRequest(_Common):
    messages: list[Any]
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None

    def sampling_params(self) -> SamplingParams:
        if self.top_logprobs and not self.logprobs:
            raise InvalidRequest("top_logprobs needs logprobs=true", "top_logprobs")
        return self.sampling(self.max_completion_tokens or self.max_tokens, self.top_logprobs or 0)

    def use_tools(self) -> bool:
        return bool(self.tools) and self.tool_choice != "none"


class CompletionRequest(_Common):
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = 16  # the OpenAI completions default
    logprobs: int | None = None  # completions-style: how many top alternatives per token
    echo: bool = False

    def sampling_params(self) -> SamplingParams:
        if self.echo:
            raise InvalidRequest("echo=true is not supported by this server; send echo=false", "echo")
        return self.sampling(self.max_tokens, self.logprobs or 0)

    def prompt_ids(self, tokenizer: Any) -> list[int]:
        prompt: Any = self.prompt
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
            prompt = prompt[0]  # a batch of one
        if isinstance(prompt, str):
            return tokenizer(prompt)["input_ids"]
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            return list(prompt)
        raise InvalidRequest("send one prompt per request (a string or a list of token ids)", "prompt")


def _text_content(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in ("text", "input_text", "output_text"):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise InvalidRequest(f"{where} has a content part of type {kind!r}; only text parts are supported")
        return "".join(str(part.get("text", "")) for part in content)
    raise InvalidRequest(f"{where} content must be a string or a list of text parts; got {type(content).__name__}")


def chat_messages(raw: list[Any]) -> list[dict[str, Any]]:
    """Validated messages in the shape chat templates expect (string content, 'developer' as 'system')."""
    if not raw:
        raise InvalidRequest("messages is empty; send at least one message", "messages")
    messages = []
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            role = message.get("role") if isinstance(message, dict) else message
            raise InvalidRequest(f"{where} has role {role!r}; expected one of {sorted(_ROLES)}", "messages")
        role = "system" if message["role"] == "developer" else message["role"]
        content = message.get("content")
        tool_calls = message.get("tool_calls") or None
        if role == "assistant" and content is None and tool_calls:
            text = ""
        elif content is None:
            raise InvalidRequest(f"{where} ({role}) has no content", "messages")
        else:
            text = _text_content(content, where)
        out: dict[str, Any] = {"role": role, "content": text}
        if tool_calls is not None:
            if not isinstance(tool_calls, list) or not all(
                isinstance(c, dict) and isinstance(c.get("function"), dict) and "name" in c["function"]
                for c in tool_calls
            ):
                raise InvalidRequest(f"{where}.tool_calls must be a list of {{'function': {{'name', 'arguments'}}}}")
            out["tool_calls"] = tool_calls
        if role == "tool" and "tool_call_id" in message:
            out["tool_call_id"] = message["tool_call_id"]
        messages.append(out)
    return messages
