"""A tiny random Qwen2 that vLLM's CPU build can serve (head_dim 64), for the optional vLLM tests.

    .venv/bin/python -m alight_testing.tiny_model /tmp/tiny-vllm

Reuses the tokenizer and chat template of alight's built-in `tiny` model and
widens the network so every attention head is 64 wide (vLLM's CPU attention
rejects the 16-wide heads of `tiny`). Needs the `train` extra (torch, transformers).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def build_tiny_vllm_model(out: Path, seed: int = 0) -> Path:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from alight_server.inference.models import resolve_model

    source = resolve_model("tiny")
    out.mkdir(parents=True, exist_ok=True)
    for name in _TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy(source / name, out / name)
    base = json.loads((source / "config.json").read_text())
    config = Qwen2Config(
        vocab_size=base["vocab_size"],
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        eos_token_id=base["eos_token_id"],
        pad_token_id=base["pad_token_id"],
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).float()  # float32 weights: vLLM on CPU runs them as is
    model.save_pretrained(out)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m alight_testing.tiny_model OUT_DIR")
    print(build_tiny_vllm_model(Path(sys.argv[1])))
