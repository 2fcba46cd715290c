"""The quickstart's footprint beside a bare PyTorch loop's: peak memory and checkpoint bytes per parameter.

    .venv/bin/python benchmarks/footprint.py [--config examples/quickstart/config.yaml] [--steps 1] [--record]
        [--set KEY=VALUE ...]  (config overrides for both sides, as `alight train --set`) [--sample-s 0.1]

1. The floor, in a child process: the config's model loaded as the trainer loads it (same dtype), one
   micro-batch of `optimizer.micro_batch_tokens` tokens in rows of `--row-tokens` (the quickstart's rows are
   about 200 tokens: a prompt and one or two short answers), token logprobs at fp32 over the whole vocabulary
   for the last `--trained-tokens` positions of each row (`logits_to_keep`, as any loop on a transformers model
   that trains the answer would), a policy-gradient loss, backward, gradient clipping and `torch.optim.AdamW`
   with the config's settings (`--set` applies to it too); two updates (the first allocates AdamW's state). Its checkpoint: the weights as
   safetensors plus the optimizer state (`torch.save`), what a resume needs.
2. alight: `alight train CONFIG` shortened to `--steps` steps, validation on `--val-tasks` tasks x 1 sample,
   a checkpoint every step, into a temporary folder. The peak is the update (the phase the full quickstart
   peaks in too: validation and rollouts only add the engine's caches and the agents, measured here as well).
Both are measured the same way: a sampler thread sums the proportional set size (`Pss` of
/proc/PID/smaps_rollup) of the process and all its descendants (the agents) every `--sample-s` (0.1 s); the
largest sum is the peak. Pss splits shared pages among the processes that share them (forked agents share their parent's),
so the sum is what the tree takes. The trainer process's own high-water mark (`VmHWM`, exact) is printed too.
Checkpoint bytes are the run's last `checkpoints/step-N` folder (and all kept folders: the disk per run).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

FLOOR = """
import json, sys, torch, time
from safetensors.torch import save_file
from alight_server.trainer.config.run import load_config
from alight_server.inference.models import load_policy
from alight_server.trainer.backends.devices import pick_dtype
config = load_config(sys.argv[1], json.loads(sys.argv[5]))
torch.set_num_threads(config.trainer.torch_threads or 2)
torch.manual_seed(0)
model, _ = load_policy(config.model, device=torch.device("cpu"), dtype=pick_dtype(config.inference.dtype, torch.device("cpu")))
model.train()
opt = config.optimizer
optimizer = torch.optim.AdamW(model.parameters(), lr=opt.lr, betas=opt.betas, weight_decay=opt.weight_decay)
width, trained = int(sys.argv[3]), int(sys.argv[4])
ids = torch.randint(0, model.config.vocab_size, (opt.micro_batch_tokens // width, width))  # (R, T)
print("loaded", flush=True)
for _ in range(2):
    optimizer.zero_grad(set_to_none=True)
    logits = model(input_ids=ids, logits_to_keep=trained + 1).logits[:, :-1].float()  # (R, K, V)
    logp = logits.gather(-1, ids[:, -trained:, None])[..., 0] - torch.logsumexp(logits, -1)  # (R, K)
    loss = -(logp * torch.randn_like(logp)).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    del logits, logp, loss
print("trained", flush=True)
out = sys.argv[2]
save_file({n: p.detach().contiguous() for n, p in model.named_parameters()}, out + "/model.safetensors")
torch.save(optimizer.state_dict(), out + "/optimizer.pt")
print("parameters", sum(p.numel() for p in model.parameters()), flush=True)
"""


def proc_kib(pid: int, file: str, field: str) -> int:
    """A KiB figure from /proc/PID/FILE (`Pss:` of smaps_rollup, `VmHWM:` of status); 0 once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class TreeSampler(threading.Thread):
    """Sums the Pss of a process and its descendants every `every` s; keeps the peak and the root's VmHWM."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.peak_kib = self.root_hwm_kib = 0
        self.processes_at_peak = 0
        self.timeline: list[tuple[float, int]] = []  # (seconds from start, summed Pss KiB)
        self.done = threading.Event()

    def run(self) -> None:
        import psutil

        root, start = psutil.Process(self.pid), time.monotonic()
        while not self.done.is_set():
            try:
                pids = [self.pid, *(c.pid for c in root.children(recursive=True))]
            except psutil.NoSuchProcess:
                break
            total = sum(proc_kib(p, "smaps_rollup", "Pss:") for p in pids)
            self.timeline.append((time.monotonic() - start, total))
            if total > self.peak_kib:
                self.peak_kib, self.processes_at_peak = total, len(pids)
            self.root_hwm_kib = max(self.root_hwm_kib, proc_kib(self.pid, "status", "VmHWM:"))
            self.done.wait(self.every)


def measured(command: list[str], log: Path, every: float) -> tuple[TreeSampler, float]:
    start = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        sampler = TreeSampler(process.pid, every)
        sampler.start()
        rc = process.wait()
    sampler.done.set()
    sampler.join()
    if rc != 0:  # still measured (a report failing after the last checkpoint, say); the table says so
        print(f"{' '.join(command)} exited {rc}; its output: {log}\n{log.read_text()[-2000:]}", file=sys.stderr)
    return sampler, time.monotonic() - start


def floor_overrides(args: argparse.Namespace) -> dict[str, object]:
    """The alight run's config overrides (`--model`, each `--set` parsed as `alight train` parses it) for the floor,
    so both sides load the same model with the same micro-batch, optimizer and threads."""
    from alight_server.commands.train import parse_settings

    return {**({"model": args.model} if args.model else {}), **parse_settings(args.set)}


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(ROOT / "examples" / "quickstart" / "config.yaml"))
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--val-tasks", type=int, default=4)
    parser.add_argument("--model", default="", help="another model than the config's (the smoke run: tiny)")
    parser.add_argument("--full", action="store_true", help="the config as it is: every step, all validation")
    parser.add_argument("--row-tokens", type=int, default=256, help="the floor's row length")
    parser.add_argument("--trained-tokens", type=int, default=64, help="the floor's trained tokens per row")
    parser.add_argument(
        "--sample-s", type=float, default=0.1, help="seconds between two samples of the process tree's Pss"
    )
    parser.add_argument("--timeline", action="store_true", help="print the peak of every 10 s of each run")
    parser.add_argument("--work", help="keep the runs' folders and logs here (default: a temporary folder)")
    parser.add_argument("--only", choices=["floor", "alight"], help="measure one side only")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a config override for both sides"
    )
    parser.add_argument(
        "--record", action="store_true", help="append the result to benchmarks/results.jsonl (benchmarks/record.py)"
    )
    args = parser.parse_args()
    python = sys.executable
    alight = str(Path(python).parent / "alight")
    results: dict[str, tuple[TreeSampler, float, Path]] = {}
    params = 0
    with tempfile.TemporaryDirectory(prefix="alight-footprint-") as tmp:
        work = Path(args.work or tmp)
        if args.only != "floor":
            run_dir = work / "run"
            command = [alight, "train", args.config, "--output-dir", str(run_dir), "--quiet"]
            command += ["--set", f"model={args.model}"] if args.model else []
            if not args.full:
                command += [
                    "--steps", str(args.steps), "--set", f"validation.max_tasks={args.val_tasks}",
                    "--set", "validation.samples_per_task=1", "--set", "checkpoint.every=1",
                ]  # fmt: skip
            command += [arg for override in args.set for arg in ("--set", override)]
            sampler, seconds = measured(command, work / "alight.log", args.sample_s)
            kept = sorted((run_dir / "checkpoints").glob("step-*"))
            results["alight"] = (sampler, seconds, kept[-1])
            results["alight kept"] = (sampler, seconds, run_dir / "checkpoints")
        if args.only != "alight":
            floor_dir = work / "floor"
            floor_dir.mkdir()
            sampler, seconds = measured(
                [
                    python,
                    "-c",
                    FLOOR,
                    args.config,
                    str(floor_dir),
                    str(args.row_tokens),
                    str(args.trained_tokens),
                    json.dumps(floor_overrides(args)),
                ],
                work / "floor.log",
                args.sample_s,
            )
            params = int((work / "floor.log").read_text().split("parameters")[-1].split()[0])
            results["floor"] = (sampler, seconds, floor_dir)
        if not params:
            from alight_server.inference.models import load_policy
            from alight_server.trainer.config.run import load_config

            model, _ = load_policy(args.model or load_config(args.config).model, device="cpu")
            params = sum(p.numel() for p in model.parameters())
        print(f"{params / 1e6:.1f} M parameters; peak = the largest sampled sum of Pss over the process tree")
        print(f"{'':14} {'peak memory':>12} {'B/param':>8} {'own VmHWM':>10} {'checkpoint':>11} {'B/param':>8}  time")
        rows = {}
        for name, (sampler, seconds, folder) in results.items():
            peak, hwm, size = sampler.peak_kib * 1024, sampler.root_hwm_kib * 1024, folder_bytes(folder)
            rows[name] = (peak / params, size / params)
            if name == "alight kept":
                print(f"{'alight, kept':14} {'':>12} {'':>8} {'':>10} {size / 1e9:>8.2f} GB {size / params:>8.1f}")
                continue
            print(
                f"{name:14} {peak / 1e9:>9.2f} GB {peak / params:>8.1f} {hwm / 1e9:>7.2f} GB {size / 1e9:>8.2f} GB "
                f"{size / params:>8.1f}  {seconds:.0f} s ({sampler.processes_at_peak} processes at the peak)"
            )
        for name, (sampler, _, _) in results.items() if args.timeline else ():
            if name == "alight kept":
                continue
            windows: dict[int, int] = {}
            for seconds, kib in sampler.timeline:
                windows[int(seconds // 10)] = max(windows.get(int(seconds // 10), 0), kib)
            print(f"{name}, peak GB per 10 s: " + " ".join(f"{k * 10}s:{v / 1e6:.2f}" for k, v in windows.items()))
        if "alight" in rows and "floor" in rows:
            ratio = rows["alight"][0] / rows["floor"][0]
            print(f"alight / floor: memory {ratio:.2f}x, checkpoint {rows['alight'][1] / rows['floor'][1]:.2f}x")
        if args.record and len(rows) == 3:
            from record import record

            (mem, ck), (floor_mem, floor_ck), kept_ck = rows["alight"], rows["floor"], rows["alight kept"][1]
            record(
                "footprint",
                f"{Path(args.config).parent.name} ({params / 1e6:.0f} M parameters), "
                + ("the whole config" if args.full else f"{args.steps} step(s), validation {args.val_tasks} tasks")
                + "".join(f", {override}" for override in args.set)
                + ": peak Pss of the process tree and checkpoint bytes per parameter, "
                "alight against a bare PyTorch loop (same model, micro-batch, AdamW)",
                f"alight {mem:.1f} B/param ({mem * params / 1e9:.2f} GB) vs floor {floor_mem:.1f} B/param "
                f"({floor_mem * params / 1e9:.2f} GB): {mem / floor_mem:.2f}x; checkpoint {ck:.1f} vs {floor_ck:.1f} "
                f"B/param, {kept_ck * params / 1e9:.2f} GB kept per run",
            )


if __name__ == "__main__":
    main()
