"""The dashboard with several policies, in a real browser: curves per policy, calls coloured by policy, hostile names.

One server on a SQLite store, seeded through its real API: a two-policy run (triage trains, specialist is
frozen) reporting `policy/<name>/...` step metrics, a one-policy run, and a run whose config and metrics name a
policy `<img ...>`. A rollout of the two-policy run makes three calls through the real gateway, routed by
agent and role to the fake upstream's two adapters. A call flagged `policy:<img ...>` is written straight into
the store: no routing config lets that name through the gateway, so this is the forged row an attacker with
the database would leave.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from alight.schemas import RunReport, RunStepReport
from alight.semconv import HEADER_AGENT, HEADER_ROLE
from alight_server.app import create_app
from alight_server.config import GatewayConfig, ServerConfig
from alight_server.policies.routing import GatewayRouting, RoutingRule
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store import Store, open_store
from alight_testing import create_fake_upstream
from tests.server.ui.conftest import logged_in_tab, screenshot

pytestmark = pytest.mark.timeout(300)

ADMIN_KEY = "alk_policies-dashboard"
RUN = "tworoles"
ROLLOUT = f"{RUN}-s00000-t000-k00"
HOSTILE_NAME = "<img src=x onerror=window.__pwned=1>"
HOSTILE_ROLLOUT = "forged-flag"
ROUTING = GatewayRouting(
    policies=["triage", "specialist"],
    rules=[RoutingRule(agent="Triage*", policy="triage"), RoutingRule(role="specialist", policy="specialist")],
)
# The roles of the rollout's three calls, in order, and the policy each is routed to.
CALLS = [({HEADER_AGENT: "Triage agent"}, "triage"), ({HEADER_ROLE: "specialist"}, "specialist"),
         ({HEADER_AGENT: "Triage agent"}, "triage")]  # fmt: skip
OWN_VERSIONS = ["triage v0", "specialist v0", "triage v1"]  # triage is updated alone before the third call


def _steps() -> list[dict[str, float]]:
    """Steps 0..3 of the two-policy run: validation at 0 and 3, training 1..3; only triage trains."""
    steps: list[dict[str, float]] = [{"val/score": 0.25, "policy/triage/val/score": 0.2}]
    for k in (1, 2, 3):
        steps.append({
            "train/reward_mean": 0.3 + 0.1 * k, "train/reward_std": 0.1, "train/loss": 0.5 / k,
            "policy/triage/train/reward_mean": 0.2 + 0.1 * k, "policy/specialist/train/reward_mean": 0.5,
            "policy/triage/train/loss": 0.5 / k, "policy/triage/policy_version": float(k),
            "policy/specialist/policy_version": 0.0, "policy/triage/samples/rows": 4.0,
            "policy/specialist/samples/rows": 2.0,
        })  # fmt: skip
    steps[3].update({"val/score": 0.5, "policy/triage/val/score": 0.6})
    return steps


@dataclass
class Seeded:
    url: str
    store: Store


def _report(admin: httpx.Client, run: str, config: dict[str, Any], steps: list[dict[str, float]]) -> None:
    admin.post("/api/runs", json=RunReport(id=run, config=config, steps_planned=len(steps) - 1).model_dump(mode="json"))
    for step, metrics in enumerate(steps):
        admin.post(f"/api/runs/{run}/steps", json=RunStepReport(step=step, metrics=metrics).model_dump())


def _claim(admin: httpx.Client, rollout: str) -> dict[str, Any]:
    body = {"rollouts": [{"id": rollout, "task": {"q": "route me"}, "metadata": {"step": 0}}]}
    admin.post("/api/rollouts", json=body).raise_for_status()
    return admin.post("/api/attempts/claim", json={"limit": 1, "ids": [rollout]}).json()["attempts"][0]


def _finish(admin: httpx.Client, rollout: str) -> None:
    admin.post(f"/api/rollouts/{rollout}/rewards", json={"value": 1.0, "attempt": 1, "final": True}).raise_for_status()
    admin.post(f"/api/rollouts/{rollout}/attempts/1/finish", json={"status": "succeeded"}).raise_for_status()


def _routed_rollout(admin: httpx.Client) -> None:
    """Three calls through the gateway, each routed to its policy by the caller's agent name or role; before
    the third, a weight update of triage alone (its own version 1, specialist's still 0)."""
    start = _claim(admin, ROLLOUT)
    for i, (headers, _) in enumerate(CALLS):
        if i == 2:
            admin.post("/api/gateway/pause", json={"policy": "triage"}).raise_for_status()
            admin.post("/api/gateway/resume", json={"policy": "triage", "weights_changed": True}).raise_for_status()
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"turn {i}"}], "max_tokens": 4}
        auth = {"authorization": f"Bearer {start['token']}", **headers}
        reply = httpx.post(f"{start['gateway_base_url']}/chat/completions", json=body, headers=auth, timeout=30)
        reply.raise_for_status()
    _finish(admin, ROLLOUT)


def _forged_flag(admin: httpx.Client, store: Store) -> None:
    """A copy of a real recorded call in another rollout, flagged with a policy whose name is markup."""
    _claim(admin, HOSTILE_ROLLOUT)
    real = store.list_model_calls(ROLLOUT)[0]
    forged = real.model_copy(update={"id": "forged-call", "rollout_id": HOSTILE_ROLLOUT, "attempt": 1, "seq": 0,
                                     "flags": [f"policy:{HOSTILE_NAME}"]})  # fmt: skip
    store.add_model_call(forged)
    _finish(admin, HOSTILE_ROLLOUT)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    db = f"sqlite:///{Path(tmp_path_factory.mktemp('policies')) / 'alight.db'}"
    store = open_store(db)
    config = ServerConfig(admin_key=ADMIN_KEY, db_url=db, port=free_port(), gateway=GatewayConfig(routing=ROUTING))
    fake = create_fake_upstream(model="base", adapters=("triage", "specialist"))
    with ServerThread(fake) as fake_url, ServerThread(create_app(config, store=store), port=config.port) as url:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30) as admin:
            admin.post("/api/upstreams", json={"id": "u1", "url": f"{fake_url}/v1", "model": "base"}).raise_for_status()
            policies = {"triage": {"trainable": True}, "specialist": {"trainable": False}}
            _report(admin, RUN, {"model": "no-such-model", "policies": policies}, _steps())
            _report(admin, "onepolicy", {"model": "no-such-model"}, [{}, {"train/reward_mean": 0.5, "train/loss": 0.1}])
            hostile = {"model": "no-such-model", "policies": {HOSTILE_NAME: {}}}
            _report(admin, "hostile", hostile, [{}, {f"policy/{HOSTILE_NAME}/train/loss": 0.3}])
            _routed_rollout(admin)
            _forged_flag(admin, store)
        yield Seeded(url, store)
    store.close()


@pytest.fixture(scope="module")
def page(browser: Any, seeded: Seeded) -> Iterator[Any]:
    """One logged-in tab for the module; console and page errors collected on `page.errors`."""
    with logged_in_tab(browser, seeded.url, ADMIN_KEY) as tab:
        yield tab


def _goto(page: Any, seeded: Seeded, route: str, ready: str) -> None:
    page.goto(f"{seeded.url}/ui/#{route}")
    page.wait_for_function("document.getElementById('app').dataset.route === location.hash")
    page.wait_for_selector(ready)


# Each chart: its series' labels, their stroke colours, and the labels uPlot's legend shows.
CHARTS_JS = """els => Object.fromEntries(els.map(e => [e.dataset.title, e.chart ? {
    labels: e.chart.series.slice(1).map(s => s.label),
    strokes: e.chart.series.slice(1).map((s, i) => typeof s.stroke === 'function' ? s.stroke(e.chart, i + 1) : s.stroke),
    legend: [...e.querySelectorAll('.u-legend .u-series .u-label')].map(l => l.textContent).slice(1)} : null]))"""


def _colours(charts: dict[str, Any]) -> dict[str, set[str]]:
    """Each policy's line colours over every chart."""
    seen: dict[str, set[str]] = {}
    for chart in filter(None, charts.values()):
        for label, stroke in zip(chart["labels"], chart["strokes"], strict=True):
            seen.setdefault(label, set()).add(stroke)
    return seen


def test_the_per_policy_charts_draw_one_line_per_policy_with_a_legend(page: Any, seeded: Seeded) -> None:
    _goto(page, seeded, f"/run/{RUN}", "div.chart .uplot canvas")
    charts = page.locator("div.chart").evaluate_all(CHARTS_JS)
    # the rollout's reward keeps its std band (two faint series); a policy's has no std
    reward = ["rollout", "rollout high", "rollout low", "triage", "specialist"]
    assert charts["train reward (mean, 1 sd band)"]["legend"] == reward
    # no val rollouts; triage's named score
    assert charts["validation mean reward (± 2 SE, clustered by task)"]["legend"] == ["triage"]
    assert charts["loss"]["legend"] == ["triage"]  # the frozen specialist takes no step
    assert charts["own policy version"]["legend"] == ["triage", "specialist"]
    assert charts["training rows"]["legend"] == ["triage", "specialist"]
    own = charts["own policy version"]
    assert own["labels"] == ["triage", "specialist"]
    assert page.locator("#run-policies .policy-chip").all_inner_texts() == ["triage", "specialist"]
    screenshot(page, "run-policies")
    assert page.errors == []


def test_a_policy_has_one_colour_on_every_chart_and_two_policies_differ(page: Any, seeded: Seeded) -> None:
    _goto(page, seeded, f"/run/{RUN}", "div.chart .uplot canvas")
    colours = _colours(page.locator("div.chart").evaluate_all(CHARTS_JS))
    assert len(colours["triage"]) == 1 and len(colours["specialist"]) == 1
    assert colours["triage"] != colours["specialist"]
    chip = page.locator("#run-policies .policy-chip[data-policy=triage]")
    assert chip.evaluate("e => getComputedStyle(e).getPropertyValue('--policy').trim()") in colours["triage"]


def test_a_single_policy_run_draws_todays_charts_without_a_policy_legend(page: Any, seeded: Seeded) -> None:
    _goto(page, seeded, "/run/onepolicy", "div.chart .uplot canvas")
    titles = page.locator("div.chart").evaluate_all("els => els.map(e => e.dataset.title)")
    assert titles == ["train reward (mean, 1 sd band)", "validation mean reward (± 2 SE, clustered by task)",
                      "loss", "KL (approx)", "clip fraction", "tokens / s", "phase times (s)", "integrity (share)",
                      "quarantined rollouts"]  # fmt: skip
    assert page.locator("#run-policies").count() == 0 and page.locator("th:text-is('own versions')").count() == 0
    charts = page.locator("div.chart").evaluate_all(CHARTS_JS)
    assert charts["train reward (mean, 1 sd band)"]["labels"] == ["reward"]


def test_the_runs_list_names_the_policies_each_run_trains(page: Any, seeded: Seeded) -> None:
    _goto(page, seeded, "/", "h1:has-text('Training runs')")
    two = page.locator(f"tr:has(a:text-is('{RUN}')) td.policies .policy-chip")
    assert two.all_inner_texts() == ["triage", "specialist (frozen)"]
    assert page.locator("tr:has(a:text-is('onepolicy')) td.policies").inner_text() == ""


def test_each_call_is_labelled_and_coloured_by_its_policy(page: Any, seeded: Seeded) -> None:
    _goto(page, seeded, f"/rollout/{ROLLOUT}", "#timeline .call")
    cards = page.locator("#timeline .call")
    assert [c.get_attribute("data-policy") for c in cards.all()] == [policy for _, policy in CALLS]
    assert cards.locator(".policy-chip").all_inner_texts() == OWN_VERSIONS  # each policy's own version then
    borders = cards.evaluate_all("els => els.map(e => getComputedStyle(e).borderLeftColor)")
    assert borders[0] == borders[2] != borders[1]
    assert page.locator("#trajectory-policies .policy-chip").all_inner_texts() == ["triage", "specialist"]
    screenshot(page, "trajectory-policies", "#timeline")
    assert page.errors == []


def test_the_filter_shows_only_the_calls_of_the_chosen_policy(page: Any, seeded: Seeded) -> None:
    _goto(page, seeded, f"/rollout/{ROLLOUT}", "#policy-filter")
    page.select_option("#policy-filter", "specialist")
    visible = page.locator("#timeline .call:visible")
    assert [c.get_attribute("data-policy") for c in visible.all()] == ["specialist"]
    page.select_option("#policy-filter", "")
    assert page.locator("#timeline .call:visible").count() == len(CALLS)


def test_the_token_view_gives_each_policy_its_own_rows(page: Any, seeded: Seeded) -> None:
    _goto(page, seeded, f"/rollout/{ROLLOUT}", "#token-view")
    rows = page.locator("#token-view .token-row")
    policy_of_seq = {str(seq): policy for seq, (_, policy) in enumerate(CALLS)}
    seen = set()
    for row in rows.all():
        policy = row.get_attribute("data-policy")
        marks = row.locator(".call-mark").all_inner_texts()  # "▸ call N" where each merged call starts
        assert marks and {policy_of_seq[m.split()[-1]] for m in marks} == {policy}
        seen.add(policy)
    assert seen == {"triage", "specialist"}
    assert page.locator("#token-policies .policy-chip").all_inner_texts() == ["triage", "specialist"]


def test_a_policy_flag_holding_markup_renders_as_text(page: Any, seeded: Seeded) -> None:
    _goto(page, seeded, f"/rollout/{HOSTILE_ROLLOUT}", "#timeline .call")
    assert page.locator("#timeline .call .policy-chip").inner_text().startswith(HOSTILE_NAME)
    assert page.locator("#token-view .token-row .policy-chip").first.inner_text() == HOSTILE_NAME
    assert page.locator("#app img").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert page.errors == []


def test_a_policy_name_holding_markup_in_a_runs_config_and_metrics_renders_as_text(page: Any, seeded: Seeded) -> None:
    _goto(page, seeded, "/", "h1:has-text('Training runs')")
    assert page.locator("tr:has(a:text-is('hostile')) td.policies").inner_text() == HOSTILE_NAME
    _goto(page, seeded, "/run/hostile", "div.chart .uplot canvas")
    assert page.evaluate("window.__pwned") is None and page.locator("#app img").count() == 0
    charts = page.locator("div.chart").evaluate_all(CHARTS_JS)
    assert charts["loss"]["legend"] == [HOSTILE_NAME]
    assert page.locator("#run-policies .policy-chip").inner_text() == HOSTILE_NAME


def test_the_gateway_page_shows_each_policys_pause_calls_in_flight_and_own_version(page: Any, seeded: Seeded) -> None:
    with httpx.Client(base_url=seeded.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as admin:
        admin.post("/api/gateway/pause", json={"policy": "specialist"}).raise_for_status()
        try:
            _goto(page, seeded, "/gateway", "#gateway-policies")
            rows = page.locator("#gateway-policies tbody tr")
            cells = [r.locator("td").all_inner_texts() for r in rows.all()]
        finally:
            admin.post("/api/gateway/resume", json={"policy": "specialist"}).raise_for_status()
    assert cells == [["triage", "open", "0", "1"], ["specialist", "paused", "0", "0"]]
    assert page.errors == []


CHIP_COLOURS_JS = "els => els.map(e => [e.dataset.policy, e.style.getPropertyValue('--policy')])"


def test_a_policy_has_the_same_colour_in_every_view(page: Any, seeded: Seeded) -> None:
    """Runs list, run page (legend, own versions, chart lines), rollout (calls, legend, token rows), gateway."""
    seen: dict[str, set[str]] = {}
    for route, chips in (("/", f"tr:has(a:text-is('{RUN}')) .policy-chip"), (f"/run/{RUN}", "#app .policy-chip"),
                         (f"/rollout/{ROLLOUT}", "#app .policy-chip"), ("/gateway", "#app .policy-chip")):  # fmt: skip
        _goto(page, seeded, route, chips)
        for policy, colour in page.locator(chips).evaluate_all(CHIP_COLOURS_JS):
            seen.setdefault(policy, set()).add(colour)
    _goto(page, seeded, f"/run/{RUN}", "div.chart .uplot canvas")
    for policy, colours in _colours(page.locator("div.chart").evaluate_all(CHARTS_JS)).items():
        seen.setdefault(policy, set()).update(colours)
    assert len(seen["triage"]) == 1 and len(seen["specialist"]) == 1 and seen["triage"] != seen["specialist"]


def test_capture_health_gives_each_policy_its_own_row_under_the_step(page: Any, seeded: Seeded) -> None:
    _goto(page, seeded, f"/run/{RUN}", "#health tr.policy-health")
    rows = page.locator("#health tr.policy-health[data-policy-step='1']")
    assert [r.get_attribute("data-policy") for r in rows.all()] == ["triage", "specialist"]
    assert rows.locator("td[data-k=calls]").all_inner_texts() == ["2/2", "1/1"]  # routed calls, none dropped
    assert page.locator("#health tr[data-step='1'] td[data-k=calls]").inner_text() == "3/3"
    screenshot(page, "health-policies", "#health")
