"""`alight eval` comparing candidates, run as a user runs it: a variant with a planted failure is worse, one like the
baseline is within noise, comparison.json and comparison.png are written, saved reports compare as well, and the
exit status, JUnit XML and Markdown summary carry the verdict a CI job gates on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import pytest
from gated_run import pipe_env, whole_utf8
from typer.testing import CliRunner

from alight.cli import app as cli
from alight.comparison import COST_PER_SUCCESS, compare_reports
from alight.evaluation import EvalReport
from alight_server.commands.eval_compare import (
    EXIT_FAILED,
    EXIT_IMPROVED,
    EXIT_NO_CHANGE,
    EXIT_SAFETY,
    exit_status,
    outcome,
    write_junit,
)
from alight_testing.tiny_run import tiny_run_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ALIGHT = str(Path(sys.executable).parent / "alight")
AGENT = Path(__file__).parent / "agents" / "planted_agent.py"
WORDS = ["apple", "kiwi", "fig", "plum"]
BEAT = re.compile(r"^\[\d+:\d\d:\d\d\] (?P<phase>[^:]+): (?P<done>\d+)/(?P<total>\d+) rollouts done")


def alight_here(*args: str) -> subprocess.CompletedProcess[str]:
    """The same command run in this process (its options, code and exit status; no interpreter start and no
    matplotlib import per comparison): saved reports compare without a process of their own."""
    done = CliRunner().invoke(cli, list(args))
    return subprocess.CompletedProcess(["alight", *args], done.exit_code, done.stdout, done.stderr)


@dataclass
class Compared:
    """The comparison's folder, and its stdout and stderr, each whole UTF-8 characters."""

    folder: Path
    out: str
    err: str


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> Compared:
    """One `alight eval` of three candidates on 3 held-out tasks x 1 sample: the base config (PLANTED=right), a
    variant that always fails and one that changes nothing but its name. Run into pipes as a CI log keeps it
    (gated_run.py `pipe_env`: the heartbeat every 0.25 s, Python's stdio in latin-1), what it prints must still be
    whole UTF-8 characters."""
    folder = tmp_path_factory.mktemp("compare")
    raw = tiny_run_config(
        folder, f"{AGENT}:main", [{"word": w} for w in WORDS * 2], dataset={"val": str(folder / "val.jsonl")},
        validation={"samples_per_task": 1}, agent={"entrypoint": f"{AGENT}:main", "env": {"PLANTED": "right"}},
        # each candidate's agents forked from one process that imported openai once (controller/zygote.py), not 9
        # interpreter starts and openai imports: how an agent starts is not what a comparison proves
        controller={"concurrency": 6, "preload": True},
    )  # fmt: skip
    (folder / "val.jsonl").write_text("".join(json.dumps({"word": w}) + "\n" for w in WORDS[:3]))
    config = folder / "base.yaml"
    config.write_text(json.dumps(raw))  # JSON is YAML
    done = subprocess.run([ALIGHT, "eval", str(config), "--name", "cmp", "--variant", "wrong:agent.env.PLANTED=wrong",
                           "--variant", "same:agent.env.PLANTED=right"], capture_output=True, stdin=subprocess.DEVNULL,
                          env=pipe_env("latin-1"), timeout=600)  # fmt: skip
    seen = done.stdout.decode("utf-8", "replace")[-4000:] + done.stderr.decode("utf-8", "replace")[-4000:]
    assert done.returncode == 4, seen  # a candidate worse: exit 4
    compared = Compared(folder / "run" / "eval" / "cmp", whole_utf8(done.stdout), whole_utf8(done.stderr))
    assert compared.out.rstrip().endswith("verdict: worse (exit 4; wrong worse, same no change)"), compared.out
    return compared


def report_of(per_task: dict[str, dict[str, list[float]]], scored: int) -> EvalReport:
    """A report with only what a comparison reads: per-task values, task hashes, how many rollouts were scored."""
    counts = dict.fromkeys(["rollouts", "tasks", "tool_errors", "prompt_tokens", "completion_tokens", "model_calls",
                            "retries", "infra_failures", "success_rate", "success_se", "mean_reward", "mean_reward_se",
                            "latency_p50_ms", "latency_p95_ms"], 0)  # fmt: skip
    return EvalReport.from_dict({**counts, "scored": scored, "per_task": per_task,
                                 "task_digests": dict.fromkeys(per_task, "same")})  # fmt: skip


def test_the_exit_status_is_the_most_severe_candidates_and_a_safety_regression_outranks_a_better_reward() -> None:
    def report(success: float, gates: float) -> EvalReport:
        values = {"success": [success], "reward": [success], "gate_violations": [gates]}
        return report_of({f"t{i:03d}": values for i in range(4)}, scored=4)

    base, cheats, better, same = report(0.0, 0.0), report(1.0, 1.0), report(1.0, 0.0), report(0.0, 0.0)
    reports = {"base": base, "cheats": cheats, "better": better, "same": same}
    codes = {name: outcome(compare_reports(base, r, ("base", name))) for name, r in reports.items() if name != "base"}
    assert codes == {"cheats": EXIT_SAFETY, "better": EXIT_IMPROVED, "same": EXIT_NO_CHANGE}
    both = [compare_reports(base, reports[n], ("base", n)) for n in ("better", "same")]
    assert exit_status(both, reports) == (
        EXIT_NO_CHANGE,
        "verdict: no change (exit 3; better improved, same no change)",
    )
    assert exit_status(both[:1], {"base": base, "better": better})[0] == EXIT_IMPROVED
    unscored = {"base": base, "better": report_of(better.per_task, scored=0)}
    assert exit_status(both[:1], unscored)[0] == EXIT_FAILED


def test_a_costlier_success_is_judged_worse_but_fails_no_gate(tmp_path: Path) -> None:
    def report(usd: float) -> EvalReport:
        return report_of({f"t{i:03d}": {"success": [1.0], "reward": [1.0], "usd": [usd]} for i in range(4)}, 4)

    comparison = compare_reports(report(0.001), report(0.003), ("cheap", "dear"))
    assert comparison.row(COST_PER_SUCCESS).verdict == "worse"  # $1 -> $3 per 1000 successes, on every task
    assert outcome(comparison) == EXIT_NO_CHANGE
    write_junit(tmp_path / "junit.xml", [comparison])
    (suite,) = ElementTree.parse(tmp_path / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("8", "0")


def verdicts(text: str, title: str) -> dict[str, str]:
    """metric label -> verdict in the comparison table titled `title ...`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = {}
    for line in lines[start + 2 : start + 9]:
        label, verdict = line[2:29].strip(), line.rsplit("  ", 1)[-1].strip()
        rows[label] = verdict
    return rows


def test_a_planted_failure_is_worse_and_an_identical_candidate_within_noise(compared: Compared) -> None:
    folder, text = compared.folder, compared.out
    assert "wrong vs base: 3 tasks paired (difference ± 2 SE: 95% interval, clustered by task, paired)" in text, text
    wrong = verdicts(text, "wrong vs base")
    assert wrong["success (reward ≥ 1)"] == "worse" and wrong["mean reward"] == "worse", text
    same = verdicts(text, "same vs base")
    assert same["success (reward ≥ 1)"] == "within noise" and same["mean reward"] == "within noise", text
    document = json.loads((folder / "comparison.json").read_text())
    assert document["baseline"]["name"] == "base" and [c["name"] for c in document["candidates"]] == ["wrong", "same"]
    (worse, _) = document["comparisons"]
    success = next(m for m in worse["metrics"] if m["metric"] == "success")
    assert (worse["tasks"], success["baseline"], success["candidate"], success["difference"]) == (3, 1.0, 0.0, -1.0)
    assert success["error"] == 0.0 and success["verdict"] == "worse"
    assert (folder / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name in ("base", "wrong", "same"):  # each candidate ran in a folder of its own
        report = json.loads((folder / name / "report.json").read_text())
        assert report["rollouts"] == 3 and len(report["per_task"]) == 3, report
        assert (folder / name / "alight.db").is_file()


def test_saved_reports_compare_without_running_anything(compared: Compared, tmp_path: Path) -> None:
    folder = compared.folder
    done = alight_here("eval", "--baseline", str(folder / "wrong" / "report.json"),
                       "--against", str(folder / "base" / "report.json"), "--output-dir", str(tmp_path),
                       "--junit", str(tmp_path / "junit.xml"), "--markdown", str(tmp_path / "summary.md"))  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]  # improved: exit 0
    assert verdicts(done.stdout, "base vs wrong")["success (reward ≥ 1)"] == "better", done.stdout
    assert json.loads((tmp_path / "comparison.json").read_text())["baseline"]["name"] == "wrong"
    assert (tmp_path / "comparison.png").is_file() and not (tmp_path / "alight.db").exists()
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## alight eval verdict: improved (exit 0; base improved)"), summary
    assert "| success (reward ≥ 1) | 0.000 | 1.000 | +1.000 ± 0.000 | better |" in summary, summary
    (suite,) = ElementTree.parse(tmp_path / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("8", "0")  # 7 per-rollout metrics, the cost per success

    # the other way round: worse, one failed JUnit case per metric worse; identical: no change
    done = alight_here("eval", "--baseline", str(folder / "base" / "report.json"), "--against",
                       str(folder / "wrong" / "report.json"), "--against", str(folder / "same" / "report.json"),
                       "--output-dir", str(tmp_path / "again"), "--junit", str(tmp_path / "worse.xml"))  # fmt: skip
    assert done.returncode == 4 and "verdict: worse (exit 4; wrong worse, same no change)" in done.stdout, done.stdout
    worse, same = ElementTree.parse(tmp_path / "worse.xml").getroot()
    assert [c.get("name") for c in worse if c.find("failure") is not None] == ["success", "reward"]
    assert same.get("failures") == "0"
    done = alight_here("eval", "--baseline", str(folder / "base" / "report.json"), "--against",
                       str(folder / "same" / "report.json"), "--output-dir", str(tmp_path / "same"))  # fmt: skip
    assert done.returncode == 3 and "verdict: no change (exit 3; same no change)" in done.stdout, done.stdout


def test_eval_prints_a_heartbeat_on_stderr_and_only_the_comparison_on_stdout(compared: Compared) -> None:
    beats = [m for line in compared.err.splitlines() if (m := BEAT.match(line))]
    # each candidate's rollouts: 3 held-out tasks x 1 sample (the planted agent's reward is its env's, not chance's)
    assert beats and {m["phase"] for m in beats} == {"eval"} and {m["total"] for m in beats} == {"3"}, compared.err
    assert not any(BEAT.match(line) for line in compared.out.splitlines()), compared.out
    assert "mean reward" in compared.out and "± 2 SE" in compared.out, compared.out
