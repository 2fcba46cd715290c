"""Generate bug-fix tasks the SWE-smith way, locally: mutate real projects, keep the bugs their own tests catch.

    python examples/coding/make_tasks.py --seed 0 --per-project 80 --out examples/coding/data/tasks.jsonl.gz
    python examples/coding/make_tasks.py --seed 0 --per-project 3 --check examples/coding/data/tasks.jsonl.gz

For each project (sources.py): run its test suite once in the sandbox with a line map (baseline.py, cached),
then draw candidate mutations (mutations.py) in a seeded order. A candidate no passing test executes is
dropped without a run; the others are applied in place to a worker's own copy of the checkout and screened
with only the tests that execute the changed lines; a candidate that breaks 1..--max-fail of them gets the
whole suite, and is kept only if 1..--max-fail baseline-passing tests fail there (FAIL_TO_PASS) and the
run finished; every other baseline-passing test is PASS_TO_PASS. The problem statement is written from
the failing tests' function names and messages, with what varies between runs (addresses, paths, durations)
masked, and so is every literal of the hidden tests' assertions (alight_sandbox.quoting: nothing to special-case).
Each task also carries its `reference` (recording.py): the function the bug was planted in and the calls its
failing tests make into the library, recorded once per project on the pristine suite, which the grader's
differential check draws new inputs from (alight_sandbox.guards.reference).
--workers processes (default 1) run at nice 10 or more; the results are taken in the seeded order, so the same seed,
sdists and Python version give the same bytes whatever the worker count or the machine's load (see
baseline.CPU_S). --check FILE regenerates and compares with FILE's first --per-project (or --count) tasks of
each project.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import taskfile
from baseline import Baseline, baseline, run_in_place, suite
from mutations import Candidate, candidates, render
from recording import module_name, recorded_calls, reference_spec
from sources import PROJECTS, Project, apply_rewrite, fetch

from alight_sandbox.guards import require_tools
from alight_sandbox.quoting import hidden_assertions, mask, test_function

HERE = Path(__file__).resolve().parent
DEFAULT_PYTHON = HERE.parent.parent / ".venv-coding" / "bin" / "python"
MAX_STATEMENT_TESTS = 5
# What differs between two runs of the same failing test: object addresses, temporary paths, durations.
_VARYING = [
    (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "0x..."),
    (re.compile(r"/tmp/[^\s'\":)]+"), "/tmp/..."),
    (re.compile(r"\b\d+\.\d{2,}\s?(?:s|ms|seconds)\b"), "N s"),  # measured times print many decimals
]


def instance_id(candidate: Candidate) -> str:
    return f"{module_name(candidate.file)}.{candidate.kind}.{candidate.index}"


def first_reports(failing: list[str], messages: dict[str, str]) -> dict[str, str]:
    """The normalised message of each of the first MAX_STATEMENT_TESTS failing tests that has one."""
    return {n: normalised(messages[n]) for n in failing[:MAX_STATEMENT_TESTS] if messages.get(n, "").strip()}


def normalised(message: str) -> str:
    """A failure's first line, at most 300 characters, with what varies between runs masked."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    for pattern, placeholder in _VARYING:
        first = pattern.sub(placeholder, first)
    return first[:300]


def problem_statement(p: Project, failing: list[str], reports: dict[str, str], literals: list[str]) -> str:
    """What a bug report would say: the failing tests by function (not by case), and what they report.

    `reports` holds the normalised messages of the first MAX_STATEMENT_TESTS failing tests. A case's id
    (`test_f[child-children]`) and the messages would quote the hidden tests' inputs and expected values, which
    a policy could special-case instead of fixing the bug: ids are left out and the tests' `literals` masked.
    """
    shown = failing[:MAX_STATEMENT_TESTS]
    cases = Counter(test_function(n) for n in failing)
    functions = list(dict.fromkeys(test_function(n) for n in shown))

    # A count that equals one of the tests' literals would read as a quote of it: such a count is masked too.
    def count(n: int) -> str:
        return mask(str(n), literals)

    lines = [f"Some behaviour of `{p.name}` ({p.version}) is broken: {count(len(failing))} of its tests fail."]
    lines += ["", "Failing tests:"]
    lines += [f"- {f}" + (f" ({count(cases[f])} cases)" if cases[f] > 1 else "") for f in functions]
    rest = len(failing) - sum(cases[f] for f in functions)
    if rest:
        lines.append(f"- ... and {count(rest)} more")
    said = []
    for function in functions:
        masked = [mask(reports[n], literals) for n in shown if test_function(n) == function and n in reports]
        if masked:
            said += [f"{function}:", *(f"    {m}" for m in dict.fromkeys(masked))]
    if said:
        lines += ["", "What they report:", "```", *said, "```"]
    lines += [
        "",
        "Fix the library code so that these tests pass again without breaking the others. The test files that",
        "fail are not in your checkout; they are run against your change afterwards. Do not edit tests.",
    ]
    return "\n".join(lines)


def test_files(node_ids: list[str]) -> list[str]:
    return sorted({n.split("::")[0] for n in node_ids})


def hidden_tests(task: dict[str, Any]) -> dict[str, str]:
    """The source of each test file the task hides (for `alight data clean --hidden-tests`)."""
    checkout = fetch(PROJECTS[task["project"]])
    return {f: (checkout / f).read_text() for f in task["hidden_tests"]}


def hidden_literals(p: Project, failing: list[str]) -> list[str]:
    """Every literal of every case of the failing tests' assertions (alight_sandbox.quoting), from the pristine checkout."""
    sources = {f: (fetch(p) / f).read_text() for f in test_files(failing)}
    return sorted({lit for a in hidden_assertions(failing, sources) for lit in a.case})


def project_candidates(p: Project, seed: int) -> list[Candidate]:
    checkout = fetch(p)
    pool = [c for f in p.sources for c in candidates((checkout / f).read_text(), f)]
    random.Random(f"{seed}/{p.name}").shuffle(pool)
    return pool


# Per worker process: the project's baseline and one copy of its checkout that mutations are applied to in place.
_worker: dict[str, tuple[Baseline, Path]] = {}


def _workspace(p: Project, python: str, timeout_s: float, root: str) -> tuple[Baseline, Path]:
    if p.name not in _worker:
        copy = Path(tempfile.mkdtemp(prefix=f"{p.name}-", dir=root)) / "workspace"
        shutil.copytree(fetch(p), copy)
        _worker[p.name] = (baseline(p, python, timeout_s), copy)
    return _worker[p.name]


Job = tuple[str, Candidate, str, int, float, str]  # project, candidate, python, max_fail, timeout_s, scratch root


def evaluate(job: Job) -> tuple[str, dict[str, Any] | None]:
    """One candidate: (outcome, task or None). Outcomes: unrendered, unexecuted, screened_out, rejected, kept."""
    name, candidate, python, max_fail, timeout_s, root = job
    p = PROJECTS[name]
    base, workspace = _workspace(p, python, timeout_s, root)
    original = (workspace / candidate.file).read_text()
    mutation = render(original, candidate)
    if mutation is None:
        return "unrendered", None
    running = base.tests_running(mutation.file, mutation.start, mutation.end)
    if running == []:
        return "unexecuted", None  # no passing test runs these lines: no test can catch the bug
    apply_rewrite(workspace, mutation.rewrite())
    try:
        # Screening pays off only when it collects fewer test files than the whole suite does.
        if running is not None and base.files(running) < base.files(base.passed):
            screen = run_in_place(workspace, python, p, timeout_s, running)
            if not 1 <= len(running) - screen.passed(running) <= max_fail:
                return "screened_out", None
        run = run_in_place(workspace, python, p, timeout_s)
    finally:
        (workspace / candidate.file).write_text(original)
    failing = [n for n in base.passed if run.outcomes.get(n) != "passed"]
    if run.timed_out or not run.outcomes or not 1 <= len(failing) <= max_fail:
        return "rejected", None
    broken = set(failing)
    return "kept", {
        "instance_id": instance_id(candidate),
        "project": p.name,
        "version": p.version,
        "pythonpath": list(p.pythonpath),
        "kind": mutation.kind,
        "rewrite": mutation.rewrite(),
        "problem_statement": problem_statement(
            p, failing, first_reports(failing, run.messages), hidden_literals(p, failing)
        ),
        "FAIL_TO_PASS": failing,
        "PASS_TO_PASS": [n for n in base.passed if n not in broken],
        "hidden_tests": test_files(failing),
        "reference": reference_spec(mutation.rewrite(), failing, original, recorded_calls(p, python, timeout_s)),
    }


def _start_worker(niceness: int) -> None:
    """Raise the worker's niceness to `niceness` (one started under `nice -n 15` stays at 15, not 19), and make
    the pool's SIGTERM unwind it: a candidate stopped past the count removes its sandbox and scratch folders."""
    os.nice(max(0, niceness - os.nice(0)))
    signal.signal(signal.SIGTERM, _stop)


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def generate(
    p: Project,
    seed: int,
    count: int,
    python: str,
    *,
    max_tries: int,
    max_fail: int,
    timeout_s: float,
    workers: int,
    outcomes: Counter[str] | None = None,
    resume: list[str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Up to `count` validated tasks of one project: the first kept ones in the seeded candidate order.

    `resume` continues an interrupted run: the instance ids it kept, in order. Generation goes on from the
    candidate after the last (every earlier one was evaluated: results come in order); they count toward `count`.
    """
    baseline(p, python, timeout_s)  # computed (and cached) once, before the workers read it
    recorded_calls(p, python, timeout_s)
    outcomes = Counter() if outcomes is None else outcomes
    ordered = project_candidates(p, seed)[:max_tries]
    ids = [instance_id(c) for c in ordered]
    done = resume or []
    if not set(done) <= set(ids) or done != sorted(done, key=ids.index):
        raise ValueError(f"cannot resume {p.name}: its tasks are not in seed {seed}'s order of candidates")
    start = ids.index(done[-1]) + 1 if done else 0
    kept = len(done)
    if kept >= count:
        return
    with tempfile.TemporaryDirectory(prefix="alight-gen-") as root:
        jobs: list[Job] = [(p.name, c, python, max_fail, timeout_s, root) for c in ordered[start:]]
        # spawn: workers start clean (no copy of the caller's threads or sockets); imap keeps the seeded order.
        with multiprocessing.get_context("spawn").Pool(
            max(1, workers), initializer=_start_worker, initargs=(10,)
        ) as pool:
            for outcome, task in pool.imap(evaluate, jobs):
                outcomes[outcome] += 1
                if task is not None:
                    kept += 1
                    yield task
                if kept >= count:
                    break  # leaving the block terminates the workers: their in-flight candidates are past the count


def reproduces(task: dict[str, Any], python: str = str(DEFAULT_PYTHON)) -> bool:
    """Does the task's bug show? Every FAIL_TO_PASS test fails on its buggy checkout (for `alight data clean`)."""
    p = PROJECTS[task["project"]]
    with tempfile.TemporaryDirectory(prefix="alight-repro-") as tmp:
        buggy = Path(tmp) / "checkout"
        shutil.copytree(fetch(p), buggy)
        apply_rewrite(buggy, task["rewrite"])
        run = suite(buggy, python, p, 300.0, select=task["FAIL_TO_PASS"])
    return bool(run.outcomes) and run.passed(task["FAIL_TO_PASS"]) == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--projects", default=",".join(PROJECTS), help=f"comma-separated, of {sorted(PROJECTS)}")
    parser.add_argument("--per-project", type=int, default=75, help="tasks to keep per project")
    parser.add_argument("--count", action="append", default=[], metavar="NAME=K", help="K tasks for NAME instead")
    parser.add_argument("--max-tries", type=int, default=400, help="candidates to test per project at most")
    parser.add_argument("--max-fail", type=int, default=20, help="drop bugs that fail more tests than this")
    parser.add_argument("--timeout", type=float, default=900.0, help="wall-clock backstop per run (s)")
    parser.add_argument("--python", default=str(DEFAULT_PYTHON), help="interpreter with pytest, used in the sandbox")
    parser.add_argument("--workers", type=int, default=1, help="parallel candidates (nice >= 10)")
    parser.add_argument("--out", type=Path, help="JSONL to write (gzipped if it ends in .gz)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run of the same --out")
    parser.add_argument("--check", type=Path, help="compare with this file's first tasks of each project")
    args = parser.parse_args(argv)
    if args.out is None and args.check is None:
        parser.error("give --out FILE, --check FILE, or both")
    require_tools("bwrap")
    if not Path(args.python).exists():
        parser.error(f"--python {args.python} does not exist; bash scripts/setup.sh --coding builds .venv-coding")
    projects = [name.strip() for name in args.projects.split(",")]
    unknown = sorted(set(projects) - set(PROJECTS))
    if unknown:
        parser.error(f"unknown projects {unknown}; known: {sorted(PROJECTS)}")
    counts = {name: args.per_project for name in projects}
    for spec in args.count:
        name, _, count = spec.partition("=")
        if name not in counts or not count.isdigit():
            parser.error(f"--count {spec!r}: give NAME=K with NAME one of --projects {projects}")
        counts[name] = int(count)
    options = {"max_tries": args.max_tries, "max_fail": args.max_fail, "timeout_s": args.timeout}
    with tempfile.TemporaryDirectory(prefix="alight-tasks-") as tmp:
        # Each project's tasks are streamed to its own file as they come, so an interrupted run keeps them
        # (and --resume continues it); the output is their concatenation, compressed at the end.
        partial = args.out.with_name(args.out.name + ".partial") if args.out else Path(tmp)
        partial.mkdir(parents=True, exist_ok=True)
        for name in projects:
            _generate_project(PROJECTS[name], counts[name], args, options, partial / f"{name}.jsonl")
        text = "".join((partial / f"{name}.jsonl").read_text() for name in projects)
        if args.out is not None:
            taskfile.write(args.out, text)
            shutil.rmtree(partial)
            print(f"wrote {len(text.splitlines())} tasks to {args.out}, sha256 of the JSONL {taskfile.digest(text)}")
    if args.check is None:
        return 0
    same, ours, theirs = taskfile.check(text, taskfile.read(args.check), counts)
    print(f"regenerated {ours}\n{args.check} {theirs}\n{'identical' if same else 'DIFFERENT'}")
    return 0 if same else 1


def _generate_project(p: Project, count: int, args: argparse.Namespace, options: dict[str, Any], path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True) if args.resume and path.exists() else []
    lines = lines[:count]
    path.write_text("".join(lines))
    outcomes: Counter[str] = Counter()
    started = time.monotonic()
    resume = [json.loads(line)["instance_id"] for line in lines]
    tasks = generate(
        p, args.seed, count, args.python, workers=args.workers, outcomes=outcomes, resume=resume, **options
    )
    with path.open("a") as out:
        for number, task in enumerate(tasks, len(lines) + 1):
            out.write(json.dumps(task) + "\n")
            out.flush()
            print(f"{p.name} {number:4d} {task['instance_id']}: {len(task['FAIL_TO_PASS'])} fail to pass", flush=True)
    elapsed = time.monotonic() - started
    tried = dict(sorted(outcomes.items()))
    print(
        f"{p.name}: {len(resume) + outcomes['kept']} tasks ({len(resume)} resumed), {elapsed:.0f} s, candidates {tried}"
    )


if __name__ == "__main__":
    sys.exit(main())
