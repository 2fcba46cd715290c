"""A running batch of sequences sharing one left-padded KV cache; rows join and leave between decode steps."""

from __future__ import annotations

import inspect
from typing import Any

import torch
from transformers import DynamicCache

from alight_server.inference import adapters


def _cache_kwarg(model: Any) -> str:
    # transformers 5.x renamed `past_key_values` to `cache`; older releases only know the first. A peft
    # wrapper's forward takes **kwargs and hands them to the model it wraps: ask that one.
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"


def prefill(
    model: Any,
    prompt_ids: list[int],
    device: torch.device,
    reused: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
    row: str | None = None,
) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], Any]:
    """Run the prompt alone (no padding, so it is exact) -> (per-layer (keys, values) of batch 1, last logits (V,)).

    `reused`: the layers of the prompt's first P tokens, already computed (prefix_cache); only the rest runs.
    `row`: the peft adapter it runs under (an engine with adapters), else None.
    """
    done = reused[0][0].shape[2] if reused else 0
    cache = DynamicCache(ddp_cache_data=list(reused)) if reused else DynamicCache()
    ids = torch.tensor([prompt_ids[done:]], device=device)  # (1, L - P)
    positions = torch.arange(done, len(prompt_ids), device=device)
    with adapters.rows([row] if row is not None else None):
        out = model(
            input_ids=ids,
            use_cache=True,
            logits_to_keep=1,
            cache_position=positions,
            position_ids=positions[None],
            **{_cache_kwarg(model): cache},
        )
    cache_layers: list[Any] = cache.layers
    layers = [(layer.keys, layer.values) for layer in cache_layers]  # each (1, H, L, D)
    return layers, out.logits[0, -1]


def _left_pad(t: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    if width == 0:
        return t
    shape = list(t.shape)
    shape[dim] = width
    return torch.cat([t.new_zeros(shape), t], dim=dim)


class DecodeBatch:
    """Rows are sequences; row r's real tokens are the trailing `mask[r].sum()` columns of the cache.

    Left padding keeps every row's next token in the same cache column, so one forward pass with a
    (B, 1) input decodes all rows; padded columns are masked out, positions come from each row's length.
    """

    def __init__(self, model: Any, device: torch.device, *, mixed: bool = False) -> None:
        self.model = model
        self.device = device
        self._cache_kwarg = _cache_kwarg(model)
        # With `mixed` (an engine with adapters) each row's peft adapter name, passed to every forward pass.
        self.rows: list[str] | None = [] if mixed else None
        self.cache: DynamicCache | None = None  # per layer (B, H, T, D) keys and values; None while empty
        self.mask = torch.zeros(0, 0, dtype=torch.long, device=device)  # (B, T) 1 where the cache is real
        self.next_token = torch.zeros(0, dtype=torch.long, device=device)  # (B,) sampled, not yet fed

    @property
    def size(self) -> int:
        return self.mask.shape[0]

    @property
    def layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        cache_layers: list[Any] = self.cache.layers if self.cache is not None else []
        return [(layer.keys, layer.values) for layer in cache_layers]

    def _set_layers(self, layers: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        # Rebuilt only when rows join or leave; decode steps grow the same cache object in place.
        self.cache = DynamicCache(ddp_cache_data=layers) if layers else None

    def add(self, layers: list[tuple[torch.Tensor, ...]], first_tokens: list[int], row: str | None = None) -> None:
        """Append len(first_tokens) rows that all share one prefilled prompt cache (batch 1), under adapter `row`."""
        rows = len(first_tokens)
        if self.rows is not None:
            assert row is not None, "a mixed batch needs each row's adapter"
            self.rows.extend([row] * rows)
        length = layers[0][0].shape[2]
        width = max(self.mask.shape[1], length)
        new_mask = torch.ones(rows, length, dtype=torch.long, device=self.device)
        self.mask = torch.cat(
            [_left_pad(self.mask, width - self.mask.shape[1], 1), _left_pad(new_mask, width - length, 1)]
        )
        merged = []
        old_layers = self.layers
        for i, (keys, values) in enumerate(layers):
            new_k = _left_pad(keys.expand(rows, -1, -1, -1), width - length, 2)
            new_v = _left_pad(values.expand(rows, -1, -1, -1), width - length, 2)
            if old_layers:
                old_k, old_v = old_layers[i]
                pad = width - old_k.shape[2]
                new_k = torch.cat([_left_pad(old_k, pad, 2), new_k])
                new_v = torch.cat([_left_pad(old_v, pad, 2), new_v])
            merged.append((new_k, new_v))
        self._set_layers(merged)
        tokens = torch.tensor(first_tokens, dtype=torch.long, device=self.device)
        self.next_token = torch.cat([self.next_token, tokens])

    def keep(self, rows: list[int]) -> None:
        """Drop every row not in `rows` and the leading columns that only padding still occupies."""
        index = torch.tensor(rows, dtype=torch.long, device=self.device)
        mask = self.mask.index_select(0, index)
        real_columns = mask.any(dim=0).nonzero()
        start = int(real_columns[0]) if len(real_columns) else mask.shape[1]
        self.mask = mask[:, start:]
        self.next_token = self.next_token.index_select(0, index)
        if self.rows is not None:
            self.rows = [self.rows[r] for r in rows]
        layers = [
            (k.index_select(0, index)[:, :, start:], v.index_select(0, index)[:, :, start:]) for k, v in self.layers
        ]
        self._set_layers(layers if rows else [])

    def step(self) -> torch.Tensor:
        """Feed every row its pending token; returns next-token logits (B, V) and extends the cache by one column."""
        width = self.mask.shape[1]
        positions = self.mask.sum(dim=1, keepdim=True)  # (B, 1) the fed token's position in its own sequence
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)  # (B, T + 1)
        with adapters.rows(self.rows):
            out = self.model(
                input_ids=self.next_token[:, None],
                attention_mask=self.mask,
                position_ids=positions,
                **{self._cache_kwarg: self.cache},
                cache_position=torch.tensor([width], device=self.device),
                use_cache=True,
            )
        return out.logits[:, -1]
