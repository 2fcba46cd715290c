"""Helpers shared by the inference tests (imported by module name, like other areas' testkits)."""

from __future__ import annotations

from typing import Any

import torch

MODEL = "tiny"
API_KEY = "inference-test-api-key"  # what the test servers' /v1 opens with
ADMIN_KEY = "inference-test-admin-key"  # what opens every route, /admin/weights included
AUTH = {"Authorization": f"Bearer {API_KEY}"}
ADMIN_AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}


def render(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> list[int]:
    """The prompt ids the server should consume: the chat template's text, encoded without extra specials."""
    text = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def forward_logprobs(model: Any, prompt_ids: list[int], response_ids: list[int]) -> torch.Tensor:
    """log_softmax of a fresh full-sequence forward pass at each response token (what the trainer computes)."""
    ids = torch.tensor([prompt_ids + response_ids])
    with torch.no_grad():
        logp = model(input_ids=ids).logits[0].float().log_softmax(-1)  # (T, V)
    targets = torch.tensor(response_ids)[:, None]
    return logp[len(prompt_ids) - 1 : -1].gather(-1, targets)[:, 0]  # (R,)


def overfit(model: Any, prompt_ids: list[int], target_ids: list[int], steps: int = 120) -> dict[str, torch.Tensor]:
    """Train `model` (a copy) until it answers `prompt_ids` with `target_ids`; returns its new state dict."""
    ids = torch.tensor([prompt_ids + target_ids])
    labels = ids.clone()
    labels[:, : len(prompt_ids)] = -100  # loss on the answer only
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}
