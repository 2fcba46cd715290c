"""Several LoRA adapters in one engine: rows of different adapters share decode steps, each adapter updates alone."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import torch
from inference_testkit import ADMIN_AUTH, ADMIN_KEY, API_KEY, MODEL, forward_logprobs

from alight_server.inference.adapters import AdapterSpec
from alight_server.inference.engine import InferenceEngine
from alight_server.inference.generation import TokenEvent
from alight_server.inference.models import load_policy
from alight_server.inference.sampling import InvalidRequest, SamplingParams
from alight_server.inference.server import create_inference_app
from alight_server.inference.weights import WeightsError
from alight_server.stacks.server_thread import ServerThread

SPEC = AdapterSpec(r=4, alpha=8.0, target_modules=("q_proj", "v_proj"))
SERVED = {"planner": SPEC, "executor": SPEC, "judge": None}  # two adapters and the base under its own name
NAMES = ["planner", "executor", "judge"]
PROMPT = "The quick brown fox"


def trainer_model(model_name: str = MODEL, tensors: dict[str, torch.Tensor] | None = None) -> Any:
    """The trainer's side: the base wrapped in peft with one adapter (named as the trainer names it), eval mode."""
    from peft import LoraConfig, get_peft_model, set_peft_model_state_dict

    model, _ = load_policy(model_name, device="cpu")
    config = LoraConfig(r=SPEC.r, lora_alpha=int(SPEC.alpha), target_modules=list(SPEC.target_modules))
    peft_model = get_peft_model(model, config)
    if tensors is not None:
        set_peft_model_state_dict(peft_model, tensors)
    return peft_model.eval()


def trained_adapter(seed: int, scale: float = 0.3, model_name: str = MODEL) -> dict[str, torch.Tensor]:
    """An adapter as a trainer hands it over: a one-adapter peft model's state dict, A and B random (B non-zero)."""
    from peft import get_peft_model_state_dict

    state = get_peft_model_state_dict(trainer_model(model_name))
    generator = torch.Generator().manual_seed(seed)
    return {k: scale * torch.randn(v.shape, generator=generator) for k, v in state.items()}


def new_engine() -> InferenceEngine:
    model, tokenizer = load_policy(MODEL, device="cpu")
    return InferenceEngine(model, tokenizer, adapters=SERVED, max_batch_size=16)


@pytest.fixture(scope="module")
def engine() -> Iterator[InferenceEngine]:
    """Planner and executor trained (distinct adapters), judge the base; tests here never change its weights."""
    eng = new_engine()
    eng.update_adapter("planner", trained_adapter(1))
    eng.update_adapter("executor", trained_adapter(2))
    with eng:
        yield eng


@pytest.fixture
def fresh() -> Iterator[InferenceEngine]:
    """An engine of its own, for tests that update adapters."""
    with new_engine() as eng:
        yield eng


def ids_of(engine: InferenceEngine, text: str = PROMPT) -> list[int]:
    return engine.tokenizer(text)["input_ids"]


def run(engine: InferenceEngine, name: str, temperature: float = 0.0, seed: int | None = None, tokens: int = 24):
    params = SamplingParams(max_tokens=tokens, temperature=temperature, seed=seed, ignore_eos=True, adapter=name)
    done = engine.generate(ids_of(engine), params)[0]
    return done.token_ids, done.logprobs


class RowNames:
    """The adapter names peft's LoRA layer received per forward pass (a torch hook after the engine's own)."""

    def __init__(self, engine: InferenceEngine) -> None:
        from peft.tuners.lora import LoraLayer

        modules: list[torch.nn.Module] = list(engine.model.modules())
        layer = next(m for m in modules if isinstance(m, LoraLayer))
        self.seen: list[list[str]] = []
        self._handle = layer.register_forward_pre_hook(self._record, with_kwargs=True)

    def _record(self, module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        self.seen.append(list(kwargs.get("adapter_names") or []))

    def close(self) -> None:
        self._handle.remove()


@pytest.mark.parametrize(("temperature", "seed"), [(0.0, None), (1.0, 7)], ids=["greedy", "seeded"])
def test_two_adapters_and_the_base_decode_in_one_batch_and_match_serving_each_alone(
    engine: InferenceEngine, temperature: float, seed: int | None
) -> None:
    alone = {name: run(engine, name, temperature, seed) for name in NAMES}
    rows = RowNames(engine)
    try:
        with ThreadPoolExecutor(6) as pool:
            together = list(pool.map(lambda n: run(engine, n, temperature, seed), NAMES * 2))
    finally:
        rows.close()
    assert any({"planner", "executor", "__base__"} <= set(names) for names in rows.seen), "never one batch"
    for name, (tokens, logprobs) in zip(NAMES * 2, together, strict=True):
        assert tokens == alone[name][0], name
        # Float summation order differs with the batch's size and padding (as with no adapters): ~1e-6.
        torch.testing.assert_close(torch.tensor(logprobs), torch.tensor(alone[name][1]), atol=1e-4, rtol=0)
    assert alone["planner"][0] != alone["executor"][0] != alone["judge"][0]


@pytest.mark.parametrize(
    ("model_name", "tolerance"), [(MODEL, 1e-4), pytest.param("smollm2-135m", 1e-3, marks=pytest.mark.slow)]
)
def test_each_row_of_a_mixed_batch_gets_the_logprobs_the_trainers_model_computes(
    model_name: str, tolerance: float
) -> None:
    adapters = {"planner": trained_adapter(1, 0.05, model_name), "executor": trained_adapter(2, 0.05, model_name)}
    model, tokenizer = load_policy(model_name, device="cpu")
    prompt = tokenizer(PROMPT)["input_ids"]
    with InferenceEngine(model, tokenizer, adapters=SERVED) as engine:
        for name, tensors in adapters.items():
            engine.update_adapter(name, tensors)
        params = {n: SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True, adapter=n) for n in NAMES}
        with ThreadPoolExecutor(3) as pool:
            served = dict(zip(NAMES, pool.map(lambda n: engine.generate(prompt, params[n])[0], NAMES), strict=True))
    references = {name: trainer_model(model_name, tensors) for name, tensors in adapters.items()}
    references["judge"] = load_policy(model_name, device="cpu")[0]
    for name, done in served.items():
        expected = forward_logprobs(references[name], prompt, done.token_ids)
        torch.testing.assert_close(torch.tensor(done.logprobs), expected, atol=tolerance, rtol=tolerance)
    assert len({tuple(done.token_ids) for done in served.values()}) == 3, "the adapters did not change the output"


def test_a_fresh_adapter_answers_exactly_as_the_base_model(fresh: InferenceEngine) -> None:
    assert run(fresh, "planner") == run(fresh, "judge")


def test_updating_one_adapter_leaves_the_others_outputs_bit_identical(fresh: InferenceEngine) -> None:
    fresh.update_adapter("executor", trained_adapter(2))
    for name in NAMES:  # fills the prefix cache: a prompt reused from it sums in another order (~1e-6)
        run(fresh, name)
    before = {name: run(fresh, name) for name in NAMES}
    version = fresh.update_adapter("planner", trained_adapter(1))
    after = {name: run(fresh, name) for name in NAMES}
    assert version == 1 and fresh.adapter_versions == {"planner": 1, "executor": 1}
    assert after["planner"][0] != before["planner"][0]
    assert after["executor"] == before["executor"] and after["judge"] == before["judge"]


def test_rows_of_one_adapter_decode_on_through_an_update_of_another(fresh: InferenceEngine) -> None:
    run(fresh, "executor", tokens=1)  # its prompt in the prefix cache, as for the run below
    executor_alone = run(fresh, "executor", tokens=200)
    events: list[Any] = []
    started = threading.Event()

    def sink(event: Any) -> None:
        events.append(event)
        started.set()

    params = SamplingParams(max_tokens=200, temperature=0.0, ignore_eos=True, adapter="executor")
    fresh.submit(ids_of(fresh), params, sink)
    assert started.wait(30)
    fresh.update_adapter("planner", trained_adapter(1))
    during = len(events)
    while not events or not (isinstance(events[-1], BaseException) or events[-1].finish_reason):
        threading.Event().wait(0.01)
    assert 0 < during < 200, "the update did not land while the executor's row decoded"
    assert all(isinstance(e, TokenEvent) for e in events), "a row of the executor failed"
    assert [e.token_id for e in events] == executor_alone[0]
    assert [e.logprob for e in events] == executor_alone[1]
    assert {e.policy_version for e in events} == {0}  # the executor's own version never moved


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: {"base_model.model.nope.lora_A.weight": torch.zeros(1)}, "'base_model.model.nope.lora_A.weight'"),
        (lambda s: {next(iter(s)): torch.zeros(3, 3)}, "has shape (3, 3)"),
        (lambda s: {k: v.fill_(math.nan) for k, v in list(s.items())[:1]}, "NaN or infinite"),
        (lambda s: {}, "hold no tensors"),
    ],
    ids=["unknown-name", "wrong-shape", "nan", "empty"],
)
def test_bad_adapter_tensors_are_refused_naming_the_tensor_and_change_nothing(
    engine: InferenceEngine, change: Any, message: str
) -> None:
    before = run(engine, "planner")
    with pytest.raises(WeightsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        engine.update_adapter("planner", change(trained_adapter(3)))
    assert engine.adapter_versions["planner"] == 1 and run(engine, "planner") == before


def test_only_lora_adapters_take_adapter_updates_and_the_base_stays_frozen(engine: InferenceEngine) -> None:
    with pytest.raises(WeightsError, match="'judge' is not a LoRA adapter"):
        engine.update_adapter("judge", trained_adapter(3))
    with pytest.raises(WeightsError, match="update_adapter"):
        engine.update_weights({"model.norm.weight": torch.ones(1)})


def test_a_request_for_a_model_the_engine_does_not_serve_is_refused(engine: InferenceEngine) -> None:
    with pytest.raises(InvalidRequest, match="'critic' does not exist"):
        engine.generate(ids_of(engine), SamplingParams(max_tokens=2, adapter="critic"))


def test_the_prefix_cache_never_hands_one_adapters_keys_to_another(fresh: InferenceEngine) -> None:
    run(fresh, "planner", tokens=2)
    missed = fresh.prefix_cache.miss_tokens
    run(fresh, "executor", tokens=2)
    assert fresh.prefix_cache.miss_tokens - missed == len(ids_of(fresh))
    hit = fresh.prefix_cache.hit_tokens
    run(fresh, "planner", tokens=2)
    assert fresh.prefix_cache.hit_tokens > hit  # its own entry still serves it


@pytest.fixture
def served(fresh: InferenceEngine) -> Iterator[str]:
    with ServerThread(create_inference_app(fresh, api_key=API_KEY, admin_key=ADMIN_KEY)) as url:
        yield url


def test_over_http_the_model_picks_the_adapter_and_admin_weights_loads_one(
    fresh: InferenceEngine, served: str, tmp_path: Path
) -> None:
    from safetensors.torch import save_file

    client = openai.OpenAI(base_url=f"{served}/v1", api_key=API_KEY, max_retries=0)
    assert [m.id for m in client.models.list().data] == NAMES

    def greedy(name: str) -> str:
        return client.completions.create(model=name, prompt=PROMPT, max_tokens=12, temperature=0).choices[0].text

    before = {name: greedy(name) for name in NAMES}
    save_file(trained_adapter(1), str(tmp_path / "adapter_model.safetensors"))
    body = {"path": str(tmp_path), "adapter": "planner"}
    response = httpx.post(f"{served}/admin/weights", json=body, headers=ADMIN_AUTH)
    assert response.status_code == 200 and response.json() == {"policy_version": 1, "adapter": "planner"}
    after = {name: greedy(name) for name in NAMES}
    assert after["planner"] != before["planner"]
    assert after["executor"] == before["executor"] and after["judge"] == before["judge"]
    with pytest.raises(openai.BadRequestError, match="'critic' does not exist") as refused:
        greedy("critic")
    assert refused.value.code == "model_not_found"


def test_admin_weights_names_a_bad_adapter_tensor_in_a_400(served: str, tmp_path: Path) -> None:
    from safetensors.torch import save_file

    save_file({"base_model.model.bogus.lora_A.weight": torch.zeros(2)}, str(tmp_path / "adapter_model.safetensors"))
    body = {"path": str(tmp_path), "adapter": "planner"}
    response = httpx.post(f"{served}/admin/weights", json=body, headers=ADMIN_AUTH)
    assert response.status_code == 400 and "bogus.lora_A.weight" in response.json()["error"]["message"]


def test_an_engine_without_adapters_never_imports_peft() -> None:
    script = (
        "import sys\n"
        "from alight_server.inference.engine import InferenceEngine\n"
        "from alight_server.inference.sampling import SamplingParams\n"
        f"with InferenceEngine.from_model_name({MODEL!r}, device='cpu') as e:\n"
        "    e.generate(e.tokenizer('hi')['input_ids'], SamplingParams(max_tokens=2))\n"
        "assert 'peft' not in sys.modules, 'peft was imported'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
