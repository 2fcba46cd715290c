"""Generation engine: one thread decodes every live sequence together and swaps weights between steps.

How admission, prefill, decoding and weight updates interleave: docs/inference.md "How batching works" and
"Several adapters".

Long because: one thread's loop and the state only it touches (the queue, the live batch, the versions);
what does not touch that state already lives apart (prefill.py, batching.py, adapters.py, sampling.py,
prefix_cache.py).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from alight_server.inference.adapters import AdapterSpec, ServedAdapters, copy_adapter
from alight_server.inference.batching import DecodeBatch
from alight_server.inference.detokenize import IncrementalText
from alight_server.inference.generation import Completion, GenerationHandle, TokenEvent
from alight_server.inference.prefill import Prefiller
from alight_server.inference.prefix_cache import PrefixCache
from alight_server.inference.sampling import InvalidRequest, SamplingParams, choice_generator, raw_logprobs, sample_next
from alight_server.inference.weights import WeightsError, check_state_dict, read_state_dict


@dataclass
class _Sequence:
    handle: GenerationHandle
    choice: int
    generator: torch.Generator
    version: tuple[int, int]  # the weights (base, own adapter) that prefilled it: its cached keys and values
    text: IncrementalText
    tokens: list[int] = field(default_factory=list)  # sampled so far; all but the last are in the batch's cache


class InferenceEngine:
    """Owns the model; thread-safe `submit` / `stream` / `generate` / `update_weights`."""

    default_max_tokens = 1024  # a request's max_tokens when it names none (capped by the room left in the context)
    batch_window_s = 0.003  # after idling, how long requests gather before the first step, so a burst starts together

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        model_name: str = "policy",
        max_batch_size: int = 32,
        max_n: int = 16,
        max_model_len: int | None = None,
        prefix_cache_tokens: int = 16384,
        overlap_prefill: bool = True,
        adapters: Mapping[str, AdapterSpec | None] | None = None,
    ) -> None:
        # None: one model served as `model_name`, no peft anywhere on the path.
        self.adapters = ServedAdapters(model, adapters) if adapters is not None else None
        self._mixed = self.adapters is not None and self.adapters.mixed
        if self.adapters is not None:
            model = self.adapters.model
        self.model = model
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.device = next(model.parameters()).device
        self.max_batch_size = max_batch_size
        self.max_n = min(max_n, max_batch_size)
        self.max_model_len = max_model_len or int(getattr(model.config, "max_position_embeddings", 2048))
        eos = model.generation_config.eos_token_id
        eos = eos if isinstance(eos, list) else [eos] if eos is not None else []
        self.eos_token_ids = set(eos) | ({tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set())
        self.version = 0
        self._cond = threading.Condition()
        self._pending: list[GenerationHandle] = []
        self._weight_updates: list[tuple[Callable[[], int], Future[int]]] = []
        self._sequences: list[_Sequence] = []
        self._batch = DecodeBatch(model, self.device, mixed=self._mixed)
        # 0 turns reuse off. SmolLM2-135M keeps ~46 KB of fp32 keys and values per token (16384 tokens: ~750 MB).
        self.prefix_cache = PrefixCache(prefix_cache_tokens)
        self._thread: threading.Thread | None = None
        self._stopping = False
        # Admitted prompts until they join the batch; shares _cond and reads _stopping under it.
        self._prefiller = Prefiller(
            model, self.device, self.prefix_cache, self._cond, lambda: self._stopping, overlap=overlap_prefill
        )

    @classmethod
    def from_model_name(
        cls, name_or_path: str, device: Any = None, dtype: Any = None, **kwargs: Any
    ) -> InferenceEngine:
        from alight_server.inference.models import load_policy

        model, tokenizer = load_policy(name_or_path, device=device, dtype=dtype)
        return cls(model, tokenizer, model_name=kwargs.pop("model_name", str(name_or_path)), **kwargs)

    @property
    def running_choices(self) -> int:
        """Choices decoding now or waiting to be admitted."""
        with self._cond:
            return len(self._sequences) + self._prefiller.admitted_choices() + sum(h.params.n for h in self._pending)

    def start(self) -> InferenceEngine:
        if self._thread is None:
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="alight-inference", daemon=True)
            self._thread.start()
            self._prefiller.start()
        return self

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._prefiller.join(timeout=30)
        self._thread = None

    def __enter__(self) -> InferenceEngine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def served_names(self) -> list[str]:
        """The model names requests may name: the adapters' (and base names'), else `model_name`."""
        return list(self.adapters.rows) if self.adapters is not None else [self.model_name]

    @property
    def adapter_versions(self) -> dict[str, int]:
        """Each LoRA adapter's own version: the number of `update_adapter` calls it took."""
        return dict(self.adapters.versions) if self.adapters is not None else {}

    def policy_version(self, name: str | None = None) -> int:
        """What events of model `name` report: an adapter's own version, else the base weights' version."""
        return self._reported(self.adapters.rows.get(name) if self.adapters is not None and name else None)

    def _row(self, params: SamplingParams) -> str | None:
        """The peft row name a request runs under (None: the engine wraps no adapters)."""
        if self.adapters is None:
            if params.adapter is not None:
                raise InvalidRequest(f"the model {params.adapter!r} does not exist; this engine serves one model")
            return None
        return self.adapters.row(params.adapter)

    def check_request(self, prompt_ids: list[int], params: SamplingParams) -> int:
        """Validate against this model; returns the max_tokens the request will run with."""
        params.validate(self.max_n)
        self._row(params)
        if not prompt_ids:
            raise InvalidRequest("the prompt is empty; send at least one token", "prompt")
        vocab = self.model.get_input_embeddings().num_embeddings
        if any(not 0 <= t < vocab for t in prompt_ids):
            raise InvalidRequest(f"prompt token ids must be in [0, {vocab}) for this model", "prompt")
        room = self.max_model_len - len(prompt_ids)
        if room < 1 or (params.max_tokens is not None and params.max_tokens > room):
            asked = params.max_tokens or 1
            raise InvalidRequest(
                f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                f"{len(prompt_ids) + asked} tokens ({len(prompt_ids)} in the prompt, {asked} in the completion). "
                "Shorten the prompt or lower max_tokens.",
                "max_tokens" if room >= 1 else "messages",
            )
        return params.max_tokens or min(self.default_max_tokens, room)

    def submit(self, prompt_ids: list[int], params: SamplingParams, sink: Callable[[Any], object]) -> GenerationHandle:
        """Queue a request; `sink` gets TokenEvents (or one exception) on the engine thread."""
        max_tokens = self.check_request(prompt_ids, params)
        handle = GenerationHandle(list(prompt_ids), params, max_tokens, sink, self._row(params))
        with self._cond:
            if self._thread is None:
                raise RuntimeError("the inference engine is not running; call engine.start() first")
            self._pending.append(handle)
            self._cond.notify_all()
        return handle

    async def stream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncGenerator[TokenEvent, None]:
        """TokenEvents of all choices, interleaved, until each choice has finished."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        handle = self.submit(prompt_ids, params, lambda event: loop.call_soon_threadsafe(queue.put_nowait, event))
        # (If `loop` closes first, call_soon_threadsafe raises in the engine thread, which cancels the request.)
        unfinished = params.n
        try:
            while unfinished:
                event = await queue.get()
                if isinstance(event, BaseException):
                    raise event
                unfinished -= event.finish_reason is not None
                yield event
        finally:
            handle.cancel()

    def generate(self, prompt_ids: list[int], params: SamplingParams, timeout_s: float = 600) -> list[Completion]:
        """Blocking generation for in-process callers (trainer, tests)."""
        done = threading.Event()
        results = [Completion(index=i) for i in range(params.n)]
        errors: list[BaseException] = []

        def sink(event: Any) -> None:
            if isinstance(event, BaseException):
                errors.append(event)
                done.set()
                return
            result = results[event.choice]
            result.text += event.text
            result.token_ids.append(event.token_id)
            result.logprobs.append(event.logprob)
            result.policy_version = event.policy_version
            if event.finish_reason is not None:
                result.finish_reason = event.finish_reason
                if all(r.finish_reason is not None for r in results):
                    done.set()

        self.submit(prompt_ids, params, sink)
        if not done.wait(timeout_s):
            raise TimeoutError(f"generation did not finish within {timeout_s}s")
        if errors:
            raise errors[0]
        return results

    def update_weights(self, weights: Mapping[str, torch.Tensor] | str | Path) -> int:
        """Copy new weights into the live parameters between two decode steps; returns the new policy version."""
        if self._mixed:
            raise WeightsError(
                "this engine serves LoRA adapters over one frozen base model; load an adapter with "
                "update_adapter(name, tensors) (or /admin/weights with 'adapter')"
            )
        state = read_state_dict(weights) if isinstance(weights, str | Path) else dict(weights)
        check_state_dict(self.model, state)
        return self._between_steps(lambda: self._apply_weights(state))

    def update_adapter(self, name: str, tensors: Mapping[str, torch.Tensor] | str | Path) -> int:
        """Copy one adapter's LoRA tensors in between two decode steps; returns that adapter's own new version.

        `tensors` are named as `peft.get_peft_model_state_dict` names a one-adapter model's (or a folder /
        file holding them, e.g. `adapter_model.safetensors`). Rows of other adapters are untouched.
        """
        if self.adapters is None:
            raise WeightsError(f"adapter {name!r}: this engine serves one model and no LoRA adapters")
        state = read_state_dict(tensors) if isinstance(tensors, str | Path) else dict(tensors)
        targets, checked = self.adapters.checked(name, state)
        return self._between_steps(lambda: self._apply_adapter(name, targets, checked))

    def _between_steps(self, apply: Callable[[], int]) -> int:
        """Run `apply` on the engine thread between two decode steps (now, when the engine is not running)."""
        future: Future[int] = Future()
        with self._cond:
            if self._thread is None:
                return apply()
            self._weight_updates.append((apply, future))
            self._cond.notify_all()
        return future.result()

    def _apply_weights(self, state: dict[str, torch.Tensor]) -> int:
        targets = self.model.state_dict()  # shares storage with the parameters (tied ones included)
        with torch.no_grad():
            for name, tensor in state.items():
                targets[name].copy_(tensor)
        self.prefix_cache.clear()  # the cached keys and values belong to the old weights
        self.version += 1
        return self.version

    def _apply_adapter(self, name: str, targets: dict[str, torch.Tensor], state: dict[str, torch.Tensor]) -> int:
        assert self.adapters is not None
        copy_adapter(targets, state)
        self.prefix_cache.clear_scope(name)  # only this adapter's keys and values are stale
        self.adapters.versions[name] += 1
        return self.adapters.versions[name]

    def _reported(self, row: str | None) -> int:
        """The version events of a row of `row` carry: its adapter's own, or the base weights'."""
        return self.adapters.version(row, self.version) if self.adapters is not None else self.version

    def _weights_of(self, row: str | None) -> tuple[int, int]:
        """The versions (base, adapter) a row of adapter `row` runs under now."""
        return self.version, self.adapters.version(row, 0) if self.adapters is not None and row else 0

    # -- the engine thread -----------------------------------------------------------------------
    def _run(self) -> None:
        with torch.inference_mode():
            while True:
                with self._cond:
                    while not (self._stopping or self._has_work()):
                        self._cond.wait()
                    if self._stopping:
                        break
                    was_idle = not self._sequences and not self._prefiller.admitted_choices()
                if was_idle and self.batch_window_s:
                    time.sleep(self.batch_window_s)  # let the rest of a burst arrive and share the first step
                with self._cond:
                    updates, self._weight_updates = self._weight_updates, []
                    admitted = self._take_admissible()
                    if self._prefiller.overlap:
                        self._prefiller.queue(admitted)
                if updates:
                    with self._prefiller.lock:  # no prefill runs; the finished ones join under the old weights
                        self._join_prefilled()
                        for apply, future in updates:
                            try:
                                future.set_result(apply())
                            except Exception as exc:  # reported to the caller of update_weights; serving goes on
                                future.set_exception(exc)
                if not self._prefiller.overlap:
                    for handle in admitted:
                        self._prefiller.prefill(handle)
                self._join_prefilled()
                if not self._sequences:
                    continue
                try:
                    self._decode_step()
                except Exception as exc:  # a failed step leaves the shared cache unusable: fail every row
                    for handle in {s.handle for s in self._sequences}:
                        handle.fail(exc)
                    self._sequences = []
                    self._batch = DecodeBatch(self.model, self.device, mixed=self._mixed)
        self._fail_outstanding(RuntimeError("the inference engine stopped before this request finished"))

    def _has_work(self) -> bool:
        """Something for the engine thread to do (under _cond)."""
        return bool(self._pending or self._weight_updates or self._sequences or self._prefiller.has_prefilled())

    def _take_admissible(self) -> list[GenerationHandle]:
        free = self.max_batch_size - len(self._sequences) - self._prefiller.admitted_choices()
        admitted = []
        empty = not self._sequences and not self._prefiller.admitted_choices()
        while self._pending and (self._pending[0].params.n <= free or (not admitted and empty)):
            handle = self._pending.pop(0)
            if not handle.cancelled:
                admitted.append(handle)
                free -= handle.params.n
        return admitted

    def _join_prefilled(self) -> None:
        """Sample the first token of every prefilled prompt's choices; the live ones join the batch."""
        for item in self._prefiller.take():
            handle, n = item.handle, item.handle.params.n
            if handle.cancelled:
                continue
            try:
                sequences = [
                    _Sequence(
                        handle,
                        i,
                        choice_generator(handle.params, i, self.device),
                        self._weights_of(handle.row),
                        IncrementalText(self.tokenizer, handle.params.stop),
                    )
                    for i in range(n)
                ]
                chosen = self._emit(sequences, item.logits.expand(n, -1))
                alive = [(s, t) for s, t, finished in chosen if not finished]
                if alive:
                    self._batch.add(item.layers, [t for _, t in alive], handle.row)
                    self._sequences.extend(s for s, _ in alive)
            except Exception as exc:  # this request alone fails; the batch is untouched until add()
                handle.fail(exc)

    def _decode_step(self) -> None:
        logits = self._batch.step()  # (B, V)
        chosen = self._emit(self._sequences, logits)
        self._batch.next_token = torch.tensor([t for _, t, _ in chosen], dtype=torch.long, device=self.device)
        if self.prefix_cache.max_tokens > 0:
            for row, (seq, _, finished) in enumerate(chosen):
                # A row that decoded across a weight update holds keys and values of both: not reusable.
                if finished and not seq.handle.cancelled and seq.version == self._weights_of(seq.handle.row):
                    self._cache_reply(row, seq)
        keep = [row for row, (s, _, finished) in enumerate(chosen) if not finished and not s.handle.cancelled]
        self._sequences = [self._sequences[row] for row in keep]
        self._batch.keep(keep)

    def _cache_reply(self, row: int, seq: _Sequence) -> None:
        """Keep a finished row's prompt + reply: an agent's next call repeats both before its new turn.

        The cache holds every token but the last one sampled (it was never fed); the next prompt's
        template re-tokenizes the reply, and reuse stops wherever that differs from what was sampled.
        """
        fed = seq.tokens[:-1]
        length = len(seq.handle.prompt_ids) + len(fed)
        layers = [
            (k[row : row + 1, :, -length:].clone(), v[row : row + 1, :, -length:].clone())
            for k, v in self._batch.layers
        ]
        self.prefix_cache.store(
            [*seq.handle.prompt_ids, *fed], layers, replaces=seq.handle.prompt_ids, scope=seq.handle.row
        )

    def _emit(self, sequences: list[_Sequence], logits: torch.Tensor) -> list[tuple[_Sequence, int, bool]]:
        """Sample each row, report it to its request; returns (sequence, token, finished) per row."""
        params = [s.handle.params for s in sequences]
        chosen = sample_next(logits, params, [s.generator for s in sequences])
        top_k = max(p.top_logprobs for p in params)
        chosen_logp, top_values, top_ids = raw_logprobs(logits, chosen, top_k)
        rows = zip(chosen.tolist(), chosen_logp.tolist(), top_ids.tolist(), top_values.tolist(), strict=True)
        out = []
        for seq, (token, logp, ids, values) in zip(sequences, rows, strict=True):
            seq.tokens.append(token)
            text = seq.text.push(token)
            finish = None
            if (token in self.eos_token_ids and not seq.handle.params.ignore_eos) or seq.text.stopped:
                finish = "stop"
            elif len(seq.tokens) >= seq.handle.max_tokens:
                finish = "length"
            if finish is not None:
                text += seq.text.flush()
            k = seq.handle.params.top_logprobs
            top = list(zip(ids[:k], values[:k], strict=True))
            try:
                seq.handle.sink(TokenEvent(seq.choice, token, logp, top, text, finish, self._reported(seq.handle.row)))
            except Exception:  # a broken consumer (e.g. its event loop closed) loses only its own request
                seq.handle.cancel()
            out.append((seq, token, finish is not None))
        return out

    def _fail_outstanding(self, error: BaseException) -> None:
        with self._cond:
            handles = {s.handle for s in self._sequences} | set(self._pending) | self._prefiller.drain()
            self._pending, self._sequences = [], []
        for handle in handles:
            handle.fail(error)
