"""reasoning-gym as a task source: any family by name, splits disjoint by construction, its own score_answer.

`dataset: {source: reasoning_gym, task: chain_sum, train: 2000, validation: 128, seed: 0, config: {...}}` and
`evaluator: {source: reasoning_gym}`. reasoning-gym seeds item i of a dataset with seed + i, so two datasets
of nearby seeds share items; here every task is item 0 of a dataset of its own seed, the seeds drawn without
repeats from one generator, and a validation task whose question a training task already asks is skipped.

A task holds the question and the reference that regenerates its entry (family, config, item seed), never the
answer: the scorer rebuilds the entry from the task as the server stored it, in a worker process
(scoring_worker.py), since some families' scorers run the answer through eval (countdown's parse_expr).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from typing import Any

SEED_SPACE = 2**31
MAX_ANSWER_CHARS = 4_000
# The answer is the text after the last <answer>, to its </answer> or the reply's end: a reply that never closes
# the tag is not scored whole (chain_sum credits any reply containing the answer, e.g. a quoted tool output).
ANSWER_TAG = re.compile(r"<answer>\s?(.*?)\s?(?:</answer>|\Z)", re.DOTALL)


def entry(task: str, seed: int, config: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The family's dataset of one item at `seed`, and that item: the same call rebuilds it to score."""
    import reasoning_gym
    from reasoning_gym.factory import DATASETS

    if task not in DATASETS:
        raise ValueError(f"reasoning-gym has no task family {task!r}; it has {len(DATASETS)}, e.g. "
                         f"{sorted(DATASETS)[:12]} (python -c 'import reasoning_gym.factory as f; print(sorted(f.DATASETS))')")  # fmt: skip
    dataset = reasoning_gym.create_dataset(task, seed=seed, size=1, **config)
    return dataset, dataset[0]


class ReasoningGym:
    """Tasks made by a reasoning-gym family; an answer scored by that family's score_answer."""

    def __init__(self) -> None:
        self._worker: ScoringWorker | None = None
        self._lock = threading.Lock()

    def splits(self, spec: dict[str, Any], seed: int) -> tuple[list[Any], list[Any]]:
        name, config = spec.get("task"), spec.get("config") or {}
        train, validation = spec["train"], spec.get("validation") or 0
        if not isinstance(name, str) or not isinstance(train, int) or isinstance(train, bool):
            raise ValueError(f"source reasoning_gym needs task: FAMILY and train: COUNT; got task={name!r}, "
                             f"train={train!r}")  # fmt: skip
        rng, drawn = random.Random(seed), set[int]()

        def make() -> dict[str, Any]:
            item_seed = rng.randrange(SEED_SPACE)
            while item_seed in drawn:
                item_seed = rng.randrange(SEED_SPACE)
            drawn.add(item_seed)
            ref = {"task": name, "seed": item_seed, "config": config}
            return {"question": entry(name, item_seed, config)[1]["question"], "reasoning_gym": ref}

        train_rows = [make() for _ in range(train)]
        asked = {row["question"] for row in train_rows}
        val_rows: list[dict[str, Any]] = []
        for _ in range(20 * validation + 100):
            if len(val_rows) == validation:
                break
            row = make()
            if row["question"] not in asked:
                asked.add(row["question"])
                val_rows.append(row)
        if len(val_rows) < validation:
            raise ValueError(f"reasoning-gym {name!r} with config {config} gave {len(val_rows)} validation questions "
                             f"that no training task asks, of {validation} asked for; widen its config or ask fewer")  # fmt: skip
        return train_rows, val_rows

    def score(self, task: Any, answer: str) -> float:
        ref = task.get("reasoning_gym") if isinstance(task, dict) else None
        if not isinstance(ref, dict):
            raise ValueError("the task has no reasoning_gym reference: it was not made by source: reasoning_gym")
        tagged = ANSWER_TAG.findall(answer)
        answer = (tagged[-1] if tagged else answer).strip()
        if "__" in answer or len(answer) > MAX_ANSWER_CHARS:
            return 0.0  # a dunder is how an eval'd answer reaches Python itself; no family's answer needs one
        with self._lock:
            if self._worker is None or self._worker.process.poll() is not None:
                self._worker = ScoringWorker()
            reply = self._worker.ask({"ref": ref, "question": task.get("question"), "answer": answer})
        if "error" in reply:
            raise ValueError(f"reasoning-gym could not score rollout task {ref}: {reply['error']}")
        value = reply.get("score")
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ValueError(f"reasoning-gym's scorer returned {value!r}, not a number in [0, 1]")
        return float(value)


class ScoringWorker:
    """scoring_worker.py in its own process (under bubblewrap when installed: read-only files, no network),
    holding reasoning-gym imported; each answer is scored in a child it forks, so none changes the next. It ends
    when its stdin closes (not by --die-with-parent, which fires when the *thread* that started it ends); its
    home goes with it, when the worker is dropped or the process exits."""

    def __init__(self) -> None:
        self.home = tempfile.mkdtemp(prefix="alight-rg-")
        argv = [sys.executable, "-m", "alight_environments.sources.scoring_worker"]
        bwrap = shutil.which("bwrap")
        if bwrap is not None:
            # Its one writable place is a tmpfs over its own home; not over /tmp, which may hold the venv itself.
            argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", self.home,
                    "--unshare-all", "--new-session", "--", *argv]  # fmt: skip
        env = {"PATH": "/usr/bin:/bin", "HOME": self.home, "TMPDIR": self.home, "MPLCONFIGDIR": self.home}  # no keys
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True,
                                        cwd=self.home)  # fmt: skip
        self.close = weakref.finalize(self, _retire, self.process, self.home)

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise ValueError(f"the reasoning-gym scoring worker exited ({self.process.poll()})")
        return json.loads(line)


def _retire(process: subprocess.Popen[str], home: str) -> None:
    """End a scoring worker (its stdin closed, then killed after 5 s) and remove its home."""
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    shutil.rmtree(home, ignore_errors=True)
