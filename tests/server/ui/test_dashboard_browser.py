"""The dashboard in a real browser (Debian's Chromium via Playwright) over a store filled by a real training run."""

from __future__ import annotations

import functools
import json
import math
import re
import statistics
from typing import Any

import pytest

from alight.api_models import RolloutQuery
from alight.cost import Prices, cost_summary
from alight.evaluation import SUCCESS_AT
from alight.schemas import Mode, RolloutState
from alight_server.trainer.config.sections import SamplesConfig
from alight_server.trainer.step.samples import SampleConfig, build_samples
from alight_server.trajectories.call_output import call_output
from alight_server.trajectories.join import build_trajectory
from alight_server.ui import summaries
from tests.server.ui.conftest import (
    ADMIN_KEY,
    GATE_VIOLATIONS,
    PRICES,
    SCRIPT,
    XSS_ROLLOUT,
    Dashboard,
    screenshot,
)

pytestmark = pytest.mark.timeout(600)


def _goto(page: Any, dashboard: Dashboard, route: str, ready: str) -> None:
    page.goto(f"{dashboard.url}/ui/#{route}")
    _rendered(page)
    page.wait_for_selector(ready)


def _rendered(page: Any) -> None:
    """Wait until the route in the address bar is the one on screen (the app marks #app when it renders)."""
    page.wait_for_function("document.getElementById('app').dataset.route === location.hash")


def test_runs_page_lists_the_trained_run(page: Any, dashboard: Dashboard) -> None:
    row = page.locator(f"tr:has(a:text-is('{dashboard.run_id}'))")
    assert row.locator(".state").inner_text() == "succeeded"
    assert "2 / 2" in row.inner_text()
    screenshot(page, "runs")
    assert page.errors == []


# Each uPlot chart as the page built it: its series' labels, its data (x first, null = no value there),
# its bands, and whether uPlot drew it on a canvas.
CHARTS_JS = """els => Object.fromEntries(els.map(e => [e.dataset.title, {
    labels: e.chart.series.slice(1).map(s => s.label), data: e.chart.data,
    bands: e.chart.bands.map(b => b.series), canvas: e.querySelectorAll('.uplot canvas').length}]))"""


def _series(chart: dict[str, Any], label: str) -> list[tuple[int, float]]:
    """(step, value) of one series, the steps where it has a value."""
    values = chart["data"][1 + chart["labels"].index(label)]
    return [(x, y) for x, y in zip(chart["data"][0], values, strict=True) if y is not None]


def test_run_page_draws_each_curve_with_uplot_from_the_reported_steps(page: Any, dashboard: Dashboard) -> None:
    _goto(page, dashboard, f"/run/{dashboard.run_id}", "div.chart .uplot canvas")
    steps = dashboard.store.list_run_steps(dashboard.run_id)
    charts = page.locator("div.chart").evaluate_all(CHARTS_JS)
    assert all(c["canvas"] == 1 for c in charts.values()), charts
    reward = charts["train reward (mean, 1 sd band)"]
    trained = [s for s in steps if "train/reward_mean" in s.metrics]
    assert _series(reward, "reward") == [(s.step, pytest.approx(s.metrics["train/reward_mean"])) for s in trained]
    high = [s.metrics["train/reward_mean"] + s.metrics["train/reward_std"] for s in trained]
    assert [y for _, y in _series(reward, "reward high")] == pytest.approx(high)
    assert reward["bands"] == [[2, 3]]  # the std band, between the high and low series
    val = charts["validation mean reward (± 2 SE, clustered by task)"]
    intervals = summaries.validation_intervals(dashboard.store, dashboard.run_id)
    assert [x for x, _ in _series(val, "val")] == [s.step for s in steps if "val/score" in s.metrics]
    assert _series(val, "val") == [(v["step"], pytest.approx(v["mean"])) for v in intervals]
    assert [y for _, y in _series(val, "val low")] == pytest.approx([v["low"] for v in intervals])
    for title, label, key in (
        ("loss", "loss", "train/loss"),
        ("KL (approx)", "kl", "train/approx_kl"),
        ("clip fraction", "clip", "train/clip_fraction"),
        ("tokens / s", "tokens/s", "perf/tokens_per_s"),
        ("integrity (share)", "violations", "integrity/violation_share"),
        ("integrity (share)", "review flags", "integrity/flag_share"),
        ("quarantined rollouts", "pending review", "integrity/quarantined"),
        ("cost in USD (per success, step total)", "step total", "cost/usd"),
    ):
        expected = [(s.step, pytest.approx(s.metrics[key])) for s in steps if key in s.metrics]
        assert expected and _series(charts[title], label) == expected, title
    assert charts["phase times (s)"]["labels"] == ["rollouts", "train", "sync", "val"]
    screenshot(page, "run")
    assert page.errors == []


def test_rollouts_table_pages_through_every_rollout(page: Any, dashboard: Dashboard) -> None:
    total = len(dashboard.store.list_rollouts(RolloutQuery(limit=1000)))
    _goto(page, dashboard, "/rollouts?per_page=5", "#rollouts")
    seen: list[str] = []
    while True:
        seen += [r.get_attribute("data-id") for r in page.locator("tr.rollout").all()]
        nxt = page.locator(".pager a:has-text('next')")
        if nxt.count() == 0:
            break
        before = page.locator("tr.rollout").first.get_attribute("data-id")
        nxt.click()
        page.wait_for_function(f"document.querySelector('tr.rollout').dataset.id !== {json.dumps(before)}")
        _rendered(page)
    assert len(seen) == total and len(set(seen)) == total
    assert f"{total} rollouts" in page.locator(".pager").inner_text()
    assert page.errors == []


def test_rollouts_table_filters_by_mode_and_state(page: Any, dashboard: Dashboard) -> None:
    _goto(page, dashboard, "/rollouts", "#filters")
    page.select_option("select[name=mode]", "val")
    page.select_option("select[name=state]", "succeeded")
    page.click("#filters button[type=submit]")
    page.wait_for_function("location.hash.includes('mode=val')")
    _rendered(page)
    shown = {r.get_attribute("data-id") for r in page.locator("tr.rollout").all()}
    expected = {
        r.id
        for r in dashboard.store.list_rollouts(RolloutQuery(mode=Mode.VAL, state=[RolloutState.SUCCEEDED], limit=1000))
    }
    assert shown == expected and shown
    assert page.locator("tr.rollout td:nth-child(3)").all_inner_texts() == ["val"] * len(expected)
    assert page.errors == []


def test_a_step_shows_its_groups_with_their_reward_spread(page: Any, dashboard: Dashboard) -> None:
    _goto(page, dashboard, f"/rollouts?run={dashboard.run_id}&step=1&mode=train", "tr.group")
    groups = page.locator("tr.group").all()
    store = dashboard.store
    assert len(groups) == 2  # tasks_per_step
    for header in groups:
        members = store.list_rollouts(RolloutQuery(group_id=header.get_attribute("data-group")))
        rewards = [build_trajectory(store, m.id).final_reward for m in members]
        assert all(r is not None for r in rewards)
        mean = statistics.fmean(rewards)  # type: ignore[arg-type]
        std = statistics.pstdev(rewards)  # type: ignore[arg-type]
        text = header.inner_text()
        assert f"{len(members)} rollouts" in text
        # Shown to 3 decimals; JavaScript rounds a tie (0.3125) up and Python's round() to even, so the numbers
        # are compared, not the strings.
        shown = re.search(r"mean (\S+) std (\S+)", text)
        assert shown is not None, text
        assert math.isclose(float(shown[1]), mean, abs_tol=5e-4 + 1e-9), text
        assert math.isclose(float(shown[2]), std, abs_tol=5e-4 + 1e-9), text
    screenshot(page, "rollouts")
    assert page.errors == []


def _trained_with(dashboard: Dashboard) -> SampleConfig:
    """The sample builder's settings as the trainer took them from the run's config (it excludes `*haiku*`)."""
    section = SamplesConfig.model_validate(dashboard.store.get_run(dashboard.run_id).config["samples"])
    return SampleConfig.from_section(section)


def _first_train_rollout(dashboard: Dashboard) -> str:
    return next(
        r.id
        for r in dashboard.store.list_rollouts(RolloutQuery(mode=Mode.TRAIN))
        if r.id.startswith(f"{dashboard.run_id}-s")
    )


def test_trajectory_page_shows_calls_tool_spans_rewards_and_log(page: Any, dashboard: Dashboard) -> None:
    rid = _first_train_rollout(dashboard)
    trajectory = build_trajectory(dashboard.store, rid)
    _goto(page, dashboard, f"/rollout/{rid}", "#timeline")
    assert page.locator("#timeline .call").count() == len(trajectory.calls) == 3  # the side-model call too
    tool = page.locator("#timeline .tool")
    assert tool.count() == 1
    word = trajectory.calls[0].call.request["messages"][0]["content"].split()[-1].rstrip(".")
    assert f'"word": "{word}"' in tool.inner_text()
    # the tool sits between the two calls, under the rollout's root span
    order = page.locator("#timeline > div").evaluate_all("els => els.map(e => e.className)")
    assert order == ["call", "tool", "call", "call"]
    assert "alight.rollout" in page.locator("#timeline .call .path").first.inner_text()
    rewards = page.locator("#rewards tbody tr").all_inner_texts()
    assert any(r.split("\t")[:3] == ["0.5", "first_call", "step"] for r in rewards), rewards
    assert f"defining {word}" in page.locator("#log").inner_text()
    screenshot(page, "trajectory")
    assert page.errors == []


def test_token_view_colours_exactly_the_tokens_the_sample_builder_trains_on(page: Any, dashboard: Dashboard) -> None:
    rid = _first_train_rollout(dashboard)
    trajectory = build_trajectory(dashboard.store, rid)
    batch, _ = build_samples([trajectory], _trained_with(dashboard))
    side = [tc.call.seq for tc in trajectory.calls if "haiku" in tc.call.request["model"]]
    assert side and not {seq for seqs in batch.row_calls for seq in seqs} & set(side)  # the run left it out
    _goto(page, dashboard, f"/rollout/{rid}", "#token-view .token-row")
    rows = page.locator("#token-view .token-row").all()
    assert len(rows) == batch.num_rows
    calls = {tc.call.seq: tc.call for tc in trajectory.calls}
    for r, row in enumerate(rows):
        trained = [int(x) for x in row.locator(".tok.m1").evaluate_all("els => els.map(e => e.dataset.id)")]
        assert len(trained) == int(batch.loss_mask[r].sum())
        # the mask-1 tokens are the recorded responses of the row's calls, in order; the rest is context
        assert trained == [t for seq in batch.row_calls[r] for t in calls[seq].response_token_ids]
        context = [int(x) for x in row.locator(".tok.m0").evaluate_all("els => els.map(e => e.dataset.id)")]
        first = calls[batch.row_calls[r][0]]
        assert context[: len(first.prompt_token_ids)] == first.prompt_token_ids
    screenshot(page, "tokens", "#token-view")
    assert page.errors == []


def _health_cell(page: Any, step: int, key: str) -> str:
    return page.locator(f"#health tr[data-step='{step}'] td[data-k='{key}']").inner_text()


def test_capture_health_counts_match_the_store(page: Any, dashboard: Dashboard) -> None:
    store, run_id = dashboard.store, dashboard.run_id
    _goto(page, dashboard, f"/run/{run_id}", "#health tr[data-step]")
    for step in (1, 2):
        rollouts = [
            r
            for r in store.list_rollouts(RolloutQuery(mode=Mode.TRAIN, limit=1000))
            if r.id.startswith(f"{run_id}-s{step - 1:05d}-")
        ]
        trajectories = [build_trajectory(store, r.id) for r in rollouts]
        calls = [tc.call for t in trajectories for tc in t.calls]
        batch, _ = build_samples([t for t in trajectories if t.final_reward is not None], _trained_with(dashboard))
        cell = functools.partial(_health_cell, page, step)
        assert cell("rollouts") == str(len(rollouts))
        assert cell("calls") == f"{sum(len(s) for s in batch.row_calls)}/{len(calls)}"
        assert cell("merged_rows") == str(sum(len(s) > 1 for s in batch.row_calls))
        assert cell("single_call_rows") == str(sum(len(s) == 1 for s in batch.row_calls))
        assert cell("truncated_calls") == str(sum(call_output(c).finish_reason == "length" for c in calls))
        kinds = sorted(a.failure_kind.value for r in rollouts for a in r.attempts if a.failure_kind)
        assert cell("failures") == (", ".join(f"{k} 1" for k in kinds) if kinds else "0")
        # what the step cost, from the store at the run's prices, as its metrics count it (alight/cost.py)
        finished = [r for r in rollouts if r.state in (RolloutState.SUCCEEDED, RolloutState.FAILED) and r.attempts]
        cost = cost_summary(
            finished, [build_trajectory(store, r.id) for r in finished], Prices.model_validate(PRICES), SUCCESS_AT
        )
        if cost.successes:
            per = cost.per(cost.successes)
            assert cell("cost").endswith(f"{per['tokens']:.0f} tokens ({cost.successes} successes)")
            assert cell("cost").startswith("$") and cost.total.usd > 0
        else:
            assert cell("cost") == f"no success ({cost.total.tokens} tokens spent)"
    assert page.locator("#health tr[data-step='2'] td[data-k='failures']").inner_text() == "infra 1, task 1"
    screenshot(page, "health", "#health")
    assert page.errors == []


def test_gate_violations_show_in_capture_health_and_on_the_rollout(page: Any, dashboard: Dashboard) -> None:
    _goto(page, dashboard, f"/run/{dashboard.run_id}", "#health tr[data-step]")
    rules = ", ".join(f"{rule} 1" for rule, _ in sorted(GATE_VIOLATIONS))  # by rule name
    assert _health_cell(page, 1, "gates") == f"1 rollouts: {rules}"
    assert _health_cell(page, 2, "gates") == "0"
    _goto(page, dashboard, f"/rollout/{dashboard.gated_rollout}", "#gates")
    shown = [r.split("\t") for r in page.locator("#gates tbody tr").all_inner_texts()]
    assert shown == [["1", rule, evidence] for rule, evidence in GATE_VIOLATIONS]
    assert page.errors == []


def test_model_output_with_a_script_tag_is_shown_as_text(page: Any, dashboard: Dashboard) -> None:
    _goto(page, dashboard, f"/rollout/{XSS_ROLLOUT}", "#timeline .call")
    page.locator("#timeline details summary").first.click()
    reply = page.locator("#timeline .msg.assistant .text").inner_text()
    assert "<script>window.__pwned = 1</script>" in reply  # the fake model echoed it: shown, not run
    assert SCRIPT in page.locator("#timeline .msg.user .text").inner_text()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#app script, #app img").count() == 0
    screenshot(page, "script-as-text")


def test_a_curve_point_leads_to_a_token_view_in_three_clicks(page: Any, dashboard: Dashboard) -> None:
    page.click(f"a:text-is('{dashboard.run_id}')")  # 1: the run
    chart = page.locator("div.chart[data-title='train reward (mean, 1 sd band)']")
    chart.locator(".uplot canvas").wait_for()
    # where uPlot drew the first point of the reward series, relative to its plotting area
    step, x, y = chart.evaluate(
        "e => { const u = e.chart, i = u.data[1].findIndex(v => v !== null); "
        "return [u.data[0][i], u.valToPos(u.data[0][i], 'x'), u.valToPos(u.data[1][i], 'y')]; }"
    )
    chart.locator(".u-over").click(position={"x": x, "y": y})  # 2: that step's groups
    page.wait_for_selector("tr.group")
    assert f"step={step}" in page.url
    page.locator("tr.rollout a").first.click()  # 3: a rollout
    page.wait_for_selector("#token-view .tok.m1")
    assert page.locator("#token-view .token-row").count() >= 1
    assert page.errors == []


def test_gateway_page_shows_the_upstream_and_pause_state(page: Any, dashboard: Dashboard) -> None:
    _goto(page, dashboard, "/gateway", "#gateway-state")
    assert "open" in page.locator("#gateway-state").inner_text()
    assert "fake-policy" in page.locator("table").first.inner_text()
    screenshot(page, "gateway")
    assert page.errors == []


def test_ui_refuses_a_wrong_key_and_an_attempt_token(browser: Any, dashboard: Dashboard) -> None:
    context = browser.new_context()
    tab = context.new_page()
    tab.goto(f"{dashboard.url}/ui/")
    tab.fill("#admin-key", "alk_wrong")
    tab.click("button[type=submit]")
    tab.wait_for_selector(".login .error")
    assert "refused" in tab.locator(".login .error").inner_text()
    tab.fill("#admin-key", dashboard.token)
    tab.click("button[type=submit]")
    tab.wait_for_selector(".error:has-text('needs the admin key')")
    assert dashboard.token not in tab.url and ADMIN_KEY not in tab.url
    context.close()
