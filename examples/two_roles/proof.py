"""The two-role example's proof: both configs over seeds, each role's held-out metric before and after training,
and the frozen role's adapter and greedy outputs hashed before and after.

`python examples/two_roles/proof.py --seeds 0 1 2` trains config.yaml ("both": both roles train) and
config_frozen.yaml ("frozen": the planner frozen) once per seed, in this process, each run in
runs/two_roles_proof/<config>-s<seed>/ (--out), and prints the table README.md shows. A run whose result file exists
is not trained again; `--table` only prints the table from the result files.

1. Each role's metric is its own named reward over the validation rollouts that reported it (the solver runs
   only when the planner wrote an expression), at the training temperature, before training and at the end;
   its standard error clusters a task's samples. Over seeds: the mean, and ± 2 standard errors of the seeds.
2. When the run's engine starts, and again when the run has ended, each policy's adapter tensors are hashed
   (sha256 of names and bytes) and its greedy replies (token ids and logprobs, one prompt at a time, so no
   batch changes the arithmetic, from an empty prefix cache) to its first prompt on every held-out task too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from alight.evaluation import Z, mean_and_error

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1] / "runs" / "two_roles_proof"
CONFIGS = {"both": "config.yaml", "frozen": "config_frozen.yaml"}
ROLES = ("planner", "solver")


def role_prompts(tasks: list[dict[str, Any]]) -> dict[str, list[list[dict[str, Any]]]]:
    """Each role's first conversation on each task, as agent.py sends it (system turn = the agent's instructions)."""
    sys.path.insert(0, str(HERE))
    import agent

    def conversation(role: Any, examples: list[Any], text: str) -> list[dict[str, Any]]:
        return [{"role": "system", "content": role.instructions}, *examples, {"role": "user", "content": text}]

    return {
        "planner": [conversation(agent.planner, agent.PLANNER_EXAMPLES, t["question"]) for t in tasks],
        "solver": [conversation(agent.solver, agent.SOLVER_EXAMPLES, f"Compute {t['expression']}") for t in tasks],
    }


def fingerprint(engine: Any, prompts: dict[str, list[list[dict[str, Any]]]]) -> dict[str, dict[str, str]]:
    """Per role: the hash of its adapter's tensors and of its greedy replies (ids and logprobs) to `prompts`."""
    from alight_server.inference.adapters import adapter_tensors
    from alight_server.inference.sampling import SamplingParams

    found: dict[str, dict[str, str]] = {}
    engine.prefix_cache.clear()  # a prompt computed from a cached prefix differs in the last bits from a fresh one
    for role in ROLES:
        tensors = adapter_tensors(engine.model, role)
        weights = hashlib.sha256()
        for name in sorted(tensors):
            weights.update(name.encode())
            weights.update(tensors[name].detach().cpu().contiguous().numpy().tobytes())
        outputs = hashlib.sha256()
        params = SamplingParams(max_tokens=24, temperature=0.0, adapter=role)
        for messages in prompts[role]:
            text = engine.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            (completion,) = engine.generate(engine.tokenizer(text, add_special_tokens=False)["input_ids"], params)
            outputs.update(json.dumps([completion.token_ids, completion.logprobs]).encode())
        found[role] = {"adapter_sha256": weights.hexdigest(), "greedy_sha256": outputs.hexdigest()}
    return found


def role_scores(run_dir: Path) -> dict[int, dict[str, dict[str, float]]]:
    """Per validation step, per role: its named reward's mean, clustered standard error and count of rollouts."""
    from alight.api_models import RolloutQuery
    from alight.schemas import FailureKind, Mode
    from alight_server.stacks.run_store import open_run_store
    from alight_server.trainer.step.policy_samples import named_reward
    from alight_server.trajectories.join import build_trajectory

    store = open_run_store(run_dir)
    by_step: dict[int, dict[str, dict[str, list[float]]]] = {}
    try:
        since = 0
        while page := store.list_rollouts(RolloutQuery(mode=Mode.VAL, since_seq=since, limit=500)):
            since = page[-1].seq
            for rollout in page:
                if not rollout.attempts:
                    continue
                trajectory = build_trajectory(store, rollout.id)
                if trajectory.failure_kind in (FailureKind.INFRA, FailureKind.TIMEOUT):
                    continue
                step = by_step.setdefault(int(rollout.metadata.get("step", 0)), {r: {} for r in ROLES})
                for role in ROLES:
                    value = named_reward(trajectory, role)
                    if value is not None:
                        step[role].setdefault(rollout.group_id or rollout.id, []).append(value)
    finally:
        store.close()
    return {step: {role: _clustered(tasks) for role, tasks in roles.items()} for step, roles in sorted(by_step.items())}


def _clustered(by_task: dict[str, list[float]]) -> dict[str, float]:
    mean, se = mean_and_error(by_task)  # 1 SE, tasks as clusters (alight's one error)
    return {"mean": mean, "se": se, "n": float(sum(map(len, by_task.values())))}


def train_one(kind: str, seed: int, settings: list[str], out: Path) -> dict[str, Any]:
    """One run of `kind`'s config with `seed`; its result (also written next to its run folder)."""
    from alight_server.commands.train import parse_settings
    from alight_server.stacks.kinds import EmbeddedStack
    from alight_server.stacks.opening import TrainingStacks
    from alight_server.trainer.config.run import load_config
    from alight_server.trainer.run.loop import TrainingRun

    run_dir = out / f"{kind}-s{seed}"
    overrides = parse_settings([f"seed={seed}", f"output_dir={run_dir}", *settings])
    config = load_config(HERE / CONFIGS[kind], overrides)
    tasks = [json.loads(line) for line in (HERE / "tasks_val.jsonl").read_text().splitlines()]
    prompts = role_prompts(tasks[: config.validation.max_tasks])

    class ProofStacks(TrainingStacks):
        """`alight train`'s stacks, fingerprinting the engine's policies as the run starts."""

        engine: Any = None
        at_start: dict[str, dict[str, str]] | None = None

        def open_local(self, config: Any, run_dir: Path, backend: Any) -> Any:
            stack = super().open_local(config, run_dir, backend)
            assert isinstance(stack, EmbeddedStack) and stack.engine is not None, "the proof needs the embedded engine"
            self.engine = stack.engine
            self.at_start = fingerprint(self.engine, prompts)
            return stack

    stacks = ProofStacks()
    started = time.monotonic()
    TrainingRun(config, stacks=stacks, show_progress=False).run()
    wall_s = time.monotonic() - started
    with stacks.engine:  # the stopped run's engine, started again: what it served at the end
        at_end = fingerprint(stacks.engine, prompts)
    scores = role_scores(run_dir)
    result = {"kind": kind, "seed": seed, "wall_s": wall_s, "scores": scores, "at_start": stacks.at_start,
              "at_end": at_end, "frozen": [n for n, p in config.policies.items() if not p.trainable]}  # fmt: skip
    (out / f"{kind}-s{seed}.json").write_text(json.dumps(result, indent=2))
    return result


def table(results: list[dict[str, Any]]) -> str:
    """The markdown table: per config and role, before -> after over seeds (mean ± 2 SE of seeds), and the hashes."""
    lines = [
        "| config | role | seeds | before | after | gain | adapter hash same | greedy outputs same |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind in CONFIGS:
        runs = [r for r in results if r["kind"] == kind]
        if not runs:
            continue
        for role in ROLES:
            steps = [sorted(r["scores"], key=int) for r in runs]
            before = [r["scores"][s[0]][role]["mean"] for r, s in zip(runs, steps, strict=True)]
            after = [r["scores"][s[-1]][role]["mean"] for r, s in zip(runs, steps, strict=True)]
            gains = [a - b for a, b in zip(after, before, strict=True)]
            same_w = sum(r["at_start"][role]["adapter_sha256"] == r["at_end"][role]["adapter_sha256"] for r in runs)
            same_g = sum(r["at_start"][role]["greedy_sha256"] == r["at_end"][role]["greedy_sha256"] for r in runs)
            frozen = " (frozen)" if role in runs[0]["frozen"] else ""
            lines.append(
                f"| {kind} | {role}{frozen} | {len(runs)} | {_mean_se(before)} | {_mean_se(after)} | "
                f"{_mean_se(gains, sign=True)} | {same_w}/{len(runs)} | {same_g}/{len(runs)} |"
            )
    return "\n".join(lines)


def cost_table(results: list[dict[str, Any]], out: Path) -> str:
    """Per run: wall time (fingerprints included), the validations, s/step and generated tok/s from metrics.jsonl.

    Step 1's rollouts run beside the first validation, so s/step and tok/s are the later steps' means.
    """
    lines = [
        "| run | wall | validation before / after | s/step (rollouts + update) | generated tok/s |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        rows = [
            json.loads(line) for line in (out / f"{r['kind']}-s{r['seed']}" / "metrics.jsonl").read_text().splitlines()
        ]
        vals = [row["time/val_s"] for row in rows if "time/val_s" in row]
        later = [row for row in rows if row["step"] >= 2 and "time/rollouts_s" in row]
        per_step = statistics.fmean(
            row["time/rollouts_s"] + row.get("time/train_s", 0.0) + row.get("time/sync_s", 0.0) for row in later
        )
        tok_s = statistics.fmean(row["perf/tokens_per_s"] for row in later)
        wall = f"{int(r['wall_s'] // 60)} min {int(r['wall_s'] % 60)} s"
        lines.append(
            f"| {r['kind']} seed {r['seed']} | {wall} | {vals[0]:.0f} s / {vals[-1]:.0f} s | {per_step:.1f} s | {tok_s:.1f} |"
        )
    return "\n".join(lines)


def _mean_se(values: list[float], sign: bool = False) -> str:
    """The mean over seeds ± 2 SE of the seeds (each seed one sample), as alight prints every ±."""
    mean, se = mean_and_error({str(i): [v] for i, v in enumerate(values)})
    return f"{mean:+.3f} ± {Z * se:.3f}" if sign else f"{mean:.3f} ± {Z * se:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description="Train both configs over seeds and print the proof table.")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--set", dest="settings", action="append", default=[], help="a config override, KEY=VALUE")
    parser.add_argument("--out", type=Path, default=ROOT, help="the runs' folder and result files")
    parser.add_argument("--table", action="store_true", help="only print the table from the result files")
    parser.add_argument("--one", nargs=2, metavar=("CONFIG", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.one:
        train_one(args.one[0], int(args.one[1]), args.settings, args.out)
        return
    if not args.table:
        for seed in args.seeds:
            for kind in args.configs:
                if not (args.out / f"{kind}-s{seed}.json").exists():
                    # Each run in its own process: runs in one process kept ~2.5 GB each alive (the OOM killer
                    # ended the fifth here, at 10 GB).
                    sets = [f"--set={item}" for item in args.settings]
                    command = [sys.executable, __file__, "--one", kind, str(seed), "--out", str(args.out), *sets]
                    subprocess.run(command, check=True)
    results = [json.loads(p.read_text()) for p in sorted(args.out.glob("*-s*.json"))]
    print(table(results))
    print()
    print(cost_table(results, args.out))


if __name__ == "__main__":
    main()
