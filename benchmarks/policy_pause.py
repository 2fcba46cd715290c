"""One policy's weight update while the other policy keeps running: pause per policy vs a global pause, one run.

    .venv/bin/python benchmarks/policy_pause.py [--model smollm2-135m] [--updates 8] [--clients 1]
        [--max-tokens 8] [--quiet-s 20] [--gap-s 4.0] [--retry-after-s 1.0]

1. The embedded engine serves two LoRA adapters, A and B, over one base model (inference/adapters.py);
   the real inference server serves it on loopback, and the alight gateway (SQLite store in a temp dir)
   routes each call to A or B by its X-Alight-Role header and sends it there as that adapter.
2. Client loops call the gateway without pause (`--clients` per role, threads, httpx): one chat call
   after another. A 429 is waited out as its Retry-After says and retried, as the OpenAI client does;
   a call's latency is from its first try to its answer, so a refused call counts its waits.
3. After `--quiet-s` of calls with no update, `--updates` times each, interleaved, `--gap-s` apart: a push of A's adapter through
   `WeightSync.push(tensors, policy="A")` (only A's calls paused and drained), and the same adapter
   load under a global pause (`WeightSync.paused(load)`, policy None: every call paused and drained).
4. Reported: the pause of each push (pause to resume, as push returns it), A's and B's calls refused
   (429) while each kind ran, and B's latency p50/p99 for the calls that started during a push of each
   kind against B's calls that overlapped none. A per-policy push must refuse none of B's calls.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import torch

from alight.client import AlightClient
from alight.schemas import RolloutCreate, UpstreamCreate
from alight.semconv import HEADER_ROLE
from alight_server.app import create_app
from alight_server.config import GatewayConfig, ServerConfig
from alight_server.http.auth import issue_attempt_token
from alight_server.inference.adapters import AdapterSpec
from alight_server.inference.engine import InferenceEngine
from alight_server.inference.models import load_policy
from alight_server.inference.server import create_inference_app
from alight_server.policies.routing import GatewayRouting, RoutingRule
from alight_server.stacks.kinds import KEY_DIR
from alight_server.stacks.server_thread import ServerThread
from alight_server.store.sql import SqlStore
from alight_server.trainer.run.weight_sync import WeightSync

SPEC = AdapterSpec(r=8, alpha=16.0, target_modules=("q_proj", "v_proj"))
ROLES = ("A", "B")
ADMIN_KEY, ENGINE_KEY = "alk_policy-pause-bench", "policy-pause-engine-key"


@dataclass
class Call:
    role: str
    start: float
    end: float
    refused_at: list[float]  # when each 429 came, before it went through


@dataclass
class Push:
    kind: str  # "policy" (A only) or "global"
    start: float
    end: float
    paused_s: float


@dataclass
class Record:
    calls: list[Call] = field(default_factory=list)
    pushes: list[Push] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def adapter_tensors(model_name: str, seed: int) -> dict[str, torch.Tensor]:
    """A trained adapter for A as the trainer hands it over (peft's names), B of the LoRA non-zero."""
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

    model, _ = load_policy(model_name, device="cpu")
    config = LoraConfig(r=SPEC.r, lora_alpha=int(SPEC.alpha), target_modules=list(SPEC.target_modules))
    state = get_peft_model_state_dict(get_peft_model(model, config))
    generator = torch.Generator().manual_seed(seed)
    return {k: 0.02 * torch.randn(v.shape, generator=generator) for k, v in state.items()}


def client_loop(url: str, token: str, role: str, max_tokens: int, record: Record, stop: threading.Event) -> None:
    body = {"model": "any", "messages": [{"role": "user", "content": f"Say something, {role}."}]}
    body["max_tokens"] = max_tokens
    headers = {"authorization": f"Bearer {token}", HEADER_ROLE: role}
    with httpx.Client(timeout=120) as http:
        while not stop.is_set():
            start, refused_at = time.monotonic(), []
            while True:
                reply = http.post(f"{url}/chat/completions", json=body, headers=headers)
                if reply.status_code != 429:
                    break
                refused_at.append(time.monotonic())
                time.sleep(float(reply.headers["retry-after"]))
            reply.raise_for_status()
            with record.lock:
                record.calls.append(Call(role, start, time.monotonic(), refused_at))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def overlaps(call: Call, pushes: list[Push]) -> bool:
    return any(call.start < p.end and p.start < call.end for p in pushes)


def started_during(call: Call, pushes: list[Push]) -> bool:
    return any(p.start <= call.start <= p.end for p in pushes)


def refusals(calls: list[Call], role: str, pushes: list[Push]) -> int:
    """The 429s `role`'s calls got while one of `pushes` ran."""
    return sum(p.start <= t <= p.end for c in calls if c.role == role for t in c.refused_at for p in pushes)


def report(record: Record) -> None:
    calls, pushes = record.calls, record.pushes
    kinds = {kind: [p for p in pushes if p.kind == kind] for kind in ("policy", "global")}
    b_calls = [c for c in calls if c.role == "B"]
    quiet = [c for c in b_calls if not overlaps(c, pushes)]

    def ms(chosen: list[Call]) -> str:
        lat = [1000 * (c.end - c.start) for c in chosen]
        return f"p50 {pct(lat, 0.5):7.1f} ms  p99 {pct(lat, 0.99):7.1f} ms  ({len(lat)} calls)"

    print(f"calls answered: A {sum(c.role == 'A' for c in calls)}, B {len(b_calls)}; pushes {len(pushes)}")
    print(f"B without an update       : {ms(quiet)}")
    # B's calls during a push: those that started while it ran (choosing the calls that overlap one would
    # favour long calls); without: those that overlapped none
    during = {kind: [c for c in b_calls if started_during(c, chosen)] for kind, chosen in kinds.items()}
    for kind, chosen in kinds.items():
        paused = [p.paused_s for p in chosen]
        refused = {role: refusals(calls, role, chosen) for role in ROLES}
        print(
            f"{kind:6s} pause of A: mean {1000 * statistics.fmean(paused):7.1f} ms  max {1000 * max(paused):7.1f} ms"
            f" | refused A {refused['A']}, B {refused['B']}"
        )
        print(f"B started during a {kind:6s} update: {ms(during[kind])}")
        print(f"B overlapping a {kind:6s} update   : {ms([c for c in b_calls if overlaps(c, chosen)])}")
    quiet_p50 = pct([c.end - c.start for c in quiet], 0.5)
    for kind, chosen in during.items():
        print(f"B p50 during {kind} updates / without: {pct([c.end - c.start for c in chosen], 0.5) / quiet_p50:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description="pause per policy vs a global pause, one run")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--updates", type=int, default=8, help="pushes of each kind")
    parser.add_argument("--clients", type=int, default=1, help="client loops per role")
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--quiet-s", type=float, default=20.0, help="calls with no update first (the baseline)")
    parser.add_argument("--gap-s", type=float, default=4.0, help="between two pushes")
    parser.add_argument("--retry-after-s", type=float, default=1.0, help="the gateway's Retry-After (its default)")
    args = parser.parse_args()

    torch.set_num_threads(2)
    tensors = adapter_tensors(args.model, seed=1)
    model, tokenizer = load_policy(args.model, device="cpu")
    engine = InferenceEngine(model, tokenizer, adapters=dict.fromkeys(ROLES, SPEC), max_batch_size=16)
    routing = GatewayRouting(policies=list(ROLES), rules=[RoutingRule(role=r, policy=r) for r in ROLES])
    with tempfile.TemporaryDirectory(prefix="alight-policy-pause-") as folder:
        root = Path(folder)
        (root / KEY_DIR).mkdir()
        (root / KEY_DIR / "engine.key").write_text(ENGINE_KEY)
        db_url = f"sqlite:///{root / 'alight.db'}"
        store = SqlStore(db_url)
        config = ServerConfig(
            admin_key=ADMIN_KEY,
            db_url=db_url,
            upstream_key_dir=root / KEY_DIR,
            gateway=GatewayConfig(routing=routing, retry_after_s=args.retry_after_s),
        )
        app = create_app(config, store=store)
        with ServerThread(create_inference_app(engine, ENGINE_KEY)) as engine_url, ServerThread(app) as url:
            store.add_upstream(
                UpstreamCreate(id="engine", url=engine_url + "/v1", api_key_file=str(root / KEY_DIR / "engine.key"))
            )
            loops: list[tuple[str, str, str]] = []  # (role, the attempt's base URL, its token)
            for role in ROLES:
                for _ in range(args.clients):
                    (rollout,) = store.create_rollouts([RolloutCreate(task={"role": role})])
                    ((claimed, attempt),) = store.claim_attempts(limit=1, ids=[rollout.id])
                    token = issue_attempt_token(app.state.token_secret, claimed.id, attempt, ttl_s=3600)
                    loops.append((role, f"{url}/gw/{claimed.id}/{attempt}/v1", token))
            record, stop = Record(), threading.Event()
            threads = [
                threading.Thread(target=client_loop, args=(u, t, role, args.max_tokens, record, stop), daemon=True)
                for role, u, t in loops
            ]
            for thread in threads:
                thread.start()
            with AlightClient(url, admin_key=ADMIN_KEY, timeout=300) as client:
                sync = WeightSync(client, engine=engine)
                time.sleep(args.gap_s * 2)  # warm: every loop has answered a few calls
                with record.lock:
                    record.calls.clear()
                time.sleep(args.quiet_s)
                pushes: list[tuple[str, Callable[[], tuple[int, float]]]] = [
                    ("policy", lambda: sync.push(tensors, {"bench": "policy"}, policy="A")),
                    ("global", lambda: sync.paused(lambda _v: engine.update_adapter("A", tensors), {"bench": "all"})),
                ]
                for _ in range(args.updates):
                    for kind, push in pushes:
                        time.sleep(args.gap_s)
                        start = time.monotonic()
                        _, paused_s = push()
                        record.pushes.append(Push(kind, start, time.monotonic(), paused_s))
                time.sleep(args.gap_s)
            stop.set()
            for thread in threads:
                thread.join(timeout=120)
        store.close()
    report(record)


if __name__ == "__main__":
    main()
