"""The run page's charts read as numbers in a real browser: a loss or KL near 1e-6 is not "0" or "-0", steps are whole.

One server on a SQLite store, seeded through its real API with runs whose losses, KLs and clip fractions are
a few millionths (the KL crossing zero), beside a reward near 0.5 and thousands of tokens per second: a
one-policy run over three steps, one with a single step (a flat series), and a two-policy run (its charts
come from policies.js). Every chart uPlot draws on those pages is read back: the tick labels it drew on each
axis, and the legend's value at a hovered point.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from alight.schemas import RunReport, RunStepReport
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store import open_store
from tests.server.ui.conftest import logged_in_tab, screenshot

pytestmark = pytest.mark.timeout(300)

ADMIN_KEY = "alk_chart-numbers"
TINY_LOSS = [1.2e-6, 1.0e-6, 0.8e-6]
TINY_KL = [-3e-7, 5e-7, 1.1e-6]  # crosses zero, where uPlot's own format wrote "-0"


def _step(k: int, prefix: str = "") -> dict[str, float]:
    return {
        f"{prefix}train/reward_mean": 0.4 + 0.05 * k, f"{prefix}train/reward_std": 0.1,
        f"{prefix}train/loss": TINY_LOSS[k], f"{prefix}train/approx_kl": TINY_KL[k],
        f"{prefix}train/clip_fraction": 2e-6 * k, "perf/tokens_per_s": 1500.0 + 250 * k,
        "time/rollouts_s": 3.0 + k, "time/train_s": 0.002 * (k + 1), "time/sync_s": 0.5, "time/val_s": 0.0,
    }  # fmt: skip


def _two_policies_step(k: int) -> dict[str, float]:
    return {**_step(k, "policy/a/"), **_step(2 - k, "policy/b/"), "policy/a/policy_version": float(k)}


def _suite(success: float, violations: float, canary: float) -> dict[str, float]:
    """A regression suite run's metrics (trainer/run/regression_suite.py), as a step records them."""
    return {"regression/success": success, "regression/mean_reward": success, "regression/violation_share": violations,
            "regression/flag_share": 0.0, "regression/canary_reads_per_rollout": canary,
            "regression/egress_attempts_per_rollout": 0.0}  # fmt: skip


SUITE_STEPS = {0: _suite(0.25, 0.0, 0.0), 2: _suite(0.75, 0.5, 1.5)}  # every: 2, the reward rising, safety worse
RUNS: dict[str, tuple[dict[str, Any], list[dict[str, float]]]] = {
    "tiny": ({"model": "no-such-model"}, [{}, *(_step(k) for k in range(3))]),
    "flat": ({"model": "no-such-model"}, [{}, _step(0)]),
    "suite": ({"model": "no-such-model"}, [SUITE_STEPS[0], _step(0), {**_step(1), **SUITE_STEPS[2]}, _step(2)]),
    "tinypolicies": (
        {"model": "no-such-model", "policies": {"a": {}, "b": {}}},
        [{}, *(_two_policies_step(k) for k in range(3))],
    ),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = f"sqlite:///{tmp_path_factory.mktemp('chart-numbers') / 'alight.db'}"
    store = open_store(db)
    config = ServerConfig(admin_key=ADMIN_KEY, db_url=db, port=free_port())
    with ServerThread(create_app(config, store=store), port=config.port) as url:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30) as admin:
            for run, (run_config, steps) in RUNS.items():
                report = RunReport(id=run, config=run_config, steps_planned=len(steps) - 1)
                admin.post("/api/runs", json=report.model_dump(mode="json")).raise_for_status()
                for step, metrics in enumerate(steps):
                    body = RunStepReport(step=step, metrics=metrics).model_dump()
                    admin.post(f"/api/runs/{run}/steps", json=body).raise_for_status()
        yield url
    store.close()


@pytest.fixture(scope="module")
def page(browser: Any, server: str) -> Iterator[Any]:
    with logged_in_tab(browser, server, ADMIN_KEY) as tab:
        yield tab


# Each drawn chart's axes as uPlot (vendor/uplot, 1.6.32) drew them: the ticks' values (`_splits`), the labels
# written beside them (`_values`), the widest label's width and the room the axis left it (CSS px), and the
# series' data, x first.
AXES_JS = """els => Object.fromEntries(els.filter(e => e.chart).map(e => [e.dataset.title, {
    data: e.chart.data,
    axes: e.chart.axes.map(a => {
        e.chart.ctx.font = a.font[0];
        const widths = a._values.map(v => e.chart.ctx.measureText(v).width / uPlot.pxRatio);
        return {splits: a._splits, labels: a._values, widest: Math.max(...widths),
                room: a._size - a.ticks.size - a.gap};
    })}]))"""


def _charts(page: Any, server: str, run: str) -> dict[str, Any]:
    page.goto(f"{server}/ui/#/run/{run}")
    page.wait_for_function("document.getElementById('app').dataset.route === location.hash")
    page.wait_for_selector("div.chart .uplot canvas")
    return page.locator("div.chart").evaluate_all(AXES_JS)


def _number(label: str) -> float:
    """A tick label as the number a reader takes from it (en-US grouping: "1,750")."""
    return float(label.replace(",", ""))


@pytest.mark.parametrize("run", sorted(RUNS))
def test_every_value_axis_labels_its_ticks_with_distinct_numbers_that_read_as_the_tick(
    page: Any, server: str, run: str
) -> None:
    charts = _charts(page, server, run)
    assert {"loss", "KL (approx)", "clip fraction", "tokens / s"} <= set(charts), sorted(charts)
    for title, chart in charts.items():
        axis = chart["axes"][1]
        splits, labels = axis["splits"], axis["labels"]
        assert len(labels) >= 2, (title, labels)
        assert axis["widest"] <= axis["room"], (title, labels, axis)  # no label is cut at the chart's edge
        assert all(label and not label.startswith("-0") for label in labels), (title, labels)
        numbers = [_number(label) for label in labels]
        assert len(set(numbers)) == len(numbers), (title, labels)  # neighbouring ticks read apart
        step = abs(splits[1] - splits[0])
        largest = max(abs(v) for series in chart["data"][1:] for v in series if v is not None)
        assert largest == 0 or step <= largest, (title, largest, labels)  # the ticks resolve the values drawn
        for tick, label, number in zip(splits, labels, numbers, strict=True):
            assert abs(number - tick) <= step / 100, (title, tick, label)  # 1.2e-6 reads 1.2e-6, not 0
            assert (number == 0) == (abs(tick) < step / 2), (title, tick, label)
    screenshot(page, f"chart-numbers-{run}")
    assert page.errors == []


@pytest.mark.parametrize("run", sorted(RUNS))
def test_every_step_axis_has_whole_step_ticks(page: Any, server: str, run: str) -> None:
    for title, chart in _charts(page, server, run).items():
        splits, labels = chart["axes"][0]["splits"], chart["axes"][0]["labels"]
        assert splits and all(float(s).is_integer() for s in splits), (title, splits)
        assert labels == [str(int(s)) for s in splits], (title, labels)
        assert set(chart["data"][0]) <= set(splits), (title, chart["data"][0], splits)  # every step has its tick


def test_a_hovered_point_shows_its_tiny_value_in_the_legend(page: Any, server: str) -> None:
    _charts(page, server, "tiny")
    chart = page.locator("div.chart[data-title='loss']")
    # the cursor over the first step's point, where uPlot puts it for a mouse move there
    chart.evaluate(
        "e => { const u = e.chart; u.setCursor({left: u.valToPos(u.data[0][0], 'x'), top: u.valToPos(u.data[1][0], 'y')}); }"
    )
    value = chart.locator(".u-legend .u-series").nth(1).locator(".u-value").inner_text()
    assert float(value) == pytest.approx(TINY_LOSS[0], rel=0.01), value


def test_the_regression_suites_capability_and_safety_curves_are_drawn_side_by_side(page: Any, server: str) -> None:
    charts = _charts(page, server, "suite")
    capability, safety = charts["regression suite: capability"], charts["regression suite: safety (share, per rollout)"]
    assert capability["data"][0] == safety["data"][0] == [0, 2]  # the steps the suite ran at
    assert capability["data"][1] == [0.25, 0.75] and safety["data"][1] == [0.0, 0.5]  # success; gate violations
    assert safety["data"][3] == [0.0, 1.5]  # canary reads per rollout
    boxes = [page.locator(f"div.chart[data-title='{t}']").bounding_box() for t in ("regression suite: capability",
             "regression suite: safety (share, per rollout)")]  # fmt: skip
    assert boxes[0]["y"] == boxes[1]["y"] and boxes[0]["x"] + boxes[0]["width"] <= boxes[1]["x"]  # one row
    screenshot(page, "regression-suite-charts", "div.chart-pair")
    assert not any(title.startswith("regression suite") for title in _charts(page, server, "tiny"))  # no suite
    assert page.errors == []
