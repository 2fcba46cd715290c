"""The review queue in a real browser (Chromium via Playwright), one quarantine round trip: two groups, each with
a flagged rollout, are held out of a training step by the trainer's quarantine; the flagged rollouts wait in the
queue with their evidence (redacted), diff and commands; a viewer sees them without the buttons; a reviewer accepts
one and rejects the other, the decisions are stored under the reviewer key's fingerprint and the queue empties;
the next step trains the accepted group with its recorded policy version, and the rejected rollout's task is
recorded as a security regression. A reviewer is refused an admin action."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alight.client import AlightClient
from alight.schemas import REVIEW_DECISION, EventCreate
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.redaction import PatternRule, RedactionConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store import Store, open_store
from alight_server.trainer.config.run import TrainConfig, parse_config
from alight_server.trainer.run.quarantine import Quarantine, regression_tasks
from alight_server.trainer.run.rollouts import RolloutPhase, collect
from alight_server.trainer.step.filters import filter_for_training
from alight_server.trainer.step.samples import SampleConfig
from alight_testing.tiny_run import tiny_run_config
from tests.server.redaction.planted import PATTERN, SECRETS, leaked
from tests.server.redaction.planted_review import COMMANDS, plant_flagged
from tests.server.ui.conftest import ADMIN_KEY, AGENT, logged_in_tab, screenshot

pytestmark = pytest.mark.timeout(300)

REVIEWER_KEY = "alr_browser-reviewer-key-0001"
VIEWER_KEY = "alv_browser-viewer-key-0002"
ACCEPTED, REJECTED = "g-accept-k00", "g-reject-k00"  # flagged, each in a group of two with a clean rollout
GROUPS = {"g-accept": (ACCEPTED, "g-accept-k01"), "g-reject": (REJECTED, "g-reject-k01")}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Store]]:
    """A fresh server per test (the browser is the module's): the two groups, flagged as report_grade flags."""
    db = f"sqlite:///{tmp_path / 'alight.db'}"
    config = ServerConfig(
        admin_key=ADMIN_KEY,
        db_url=db,
        port=free_port(),
        viewer_keys=[VIEWER_KEY],
        reviewer_keys=[REVIEWER_KEY],
        redaction=RedactionConfig(patterns=[PatternRule(**PATTERN)]),
    )
    store = open_store(db, config.kek_source())
    evidence = {
        ACCEPTED: "calc.py:3 calls sys._getframe (frame introspection)",
        REJECTED: f"calc.py:7 reads {SECRETS['github_token']} from the caller's locals",
    }
    for group, (flagged, clean) in GROUPS.items():
        plant_flagged(store, flagged, evidence[flagged], group_id=group, reward=1.0)
        plant_flagged(store, clean, None, group_id=group, reward=0.0)
    with ServerThread(create_app(config, store=store), port=config.port) as url:
        yield url, store
    store.close()


@pytest.fixture
def train_config(tmp_path: Path) -> TrainConfig:
    raw = tiny_run_config(tmp_path, f"{AGENT}:main", [{"word": "x"}] * 4, review={"audit_share": 0.0})
    return parse_config(raw, tmp_path)


def _queue(tab: Any, url: str) -> None:
    tab.goto(f"{url}/ui/#/reviews")
    tab.wait_for_selector("#reviews")


def _trained(quarantine: Quarantine, phase: RolloutPhase, step: int, config: TrainConfig) -> list[str]:
    """The rollouts step `step + 1` trains on: the trainer's quarantine, then its filter (run/train_step.py)."""
    screened = quarantine.screen(phase, step, version=0)
    kept, _ = filter_for_training(screened.trajectories, SampleConfig.from_section(config.samples, pad_token_id=0))
    assert {c.call.policy_version for t in kept for c in t.calls} <= {0}  # as each call was served
    return sorted(t.rollout_id for t in kept)


def test_a_viewer_sees_the_queue_without_the_buttons(browser: Any, server: tuple[str, Store]) -> None:
    url, _ = server
    with logged_in_tab(browser, url, VIEWER_KEY) as tab:
        _queue(tab, url)
        assert tab.locator("article.review").count() == 2 and tab.locator("#review-read-only").is_visible()
        assert tab.locator("button.accept").count() == 0 and tab.errors == []


def test_one_quarantine_round_trip_through_the_dashboard(
    browser: Any, server: tuple[str, Store], train_config: TrainConfig, tmp_path: Path
) -> None:
    url, store = server
    with AlightClient(url, ADMIN_KEY, timeout=30) as client:
        quarantine = Quarantine(client, train_config, tmp_path)
        rollouts = [client.get_rollout(rid) for ids in GROUPS.values() for rid in ids]
        assert _trained(quarantine, collect(client, rollouts, time.monotonic()), 0, train_config) == []  # held
        with logged_in_tab(browser, url, REVIEWER_KEY) as tab:
            _queue(tab, url)
            _look_at_the_queue(tab)
            _decide(tab, ACCEPTED, "accept", "a plain fix; the frame read is a logger's")
            _decide(tab, REJECTED, "reject", "reads the test's expected value")
            tab.wait_for_selector("#review-empty")
            assert tab.errors == []
        fingerprint = hashlib.sha256(REVIEWER_KEY.encode()).hexdigest()[:12]
        decided = {rid: store.list_events(rid, kind=REVIEW_DECISION)[0].payload for rid in (ACCEPTED, REJECTED)}
        assert decided == {
            ACCEPTED: {
                "decision": "accept",
                "reviewer": fingerprint,
                "note": "a plain fix; the frame read is a logger's",
            },
            REJECTED: {"decision": "reject", "reviewer": fingerprint, "note": "reads the test's expected value"},
        }
        empty = RolloutPhase(rollouts=[], trajectories=[], seconds=0.0)
        assert _trained(quarantine, empty, 1, train_config) == sorted([*GROUPS["g-accept"], GROUPS["g-reject"][1]])
    assert regression_tasks(tmp_path) == [{"instance_id": REJECTED}]


def _look_at_the_queue(tab: Any) -> None:
    """The rejected one's evidence redacted, its diff, its commands and the link to its trajectory."""
    flagged = tab.locator(f"article.review[data-rollout='{REJECTED}']")
    assert "[REDACTED:github_token]" in flagged.locator(".review-flags").inner_text()
    assert "+    return a + b" in flagged.locator("pre.diff").inner_text()
    flagged.locator("summary", has_text="commands").click()
    assert flagged.locator(".review-commands tr").count() == len(COMMANDS) + 1  # the header row too
    assert flagged.locator(f"a[href='#/rollout/{REJECTED}']").is_visible()
    assert leaked(tab.locator("body").inner_text()) == []
    screenshot(tab, "review-queue")


def _decide(tab: Any, rollout: str, decision: str, note: str) -> None:
    item = tab.locator(f"article.review[data-rollout='{rollout}']")
    item.locator("textarea.review-note").fill(note)
    item.locator(f"button.{decision}").click()
    item.wait_for(state="detached")


def test_the_rollout_page_says_how_it_was_decided(browser: Any, server: tuple[str, Store]) -> None:
    url, store = server
    decision = {"decision": "reject", "reviewer": "ana", "note": ""}
    store.add_event(REJECTED, EventCreate(kind=REVIEW_DECISION, payload=decision))
    with logged_in_tab(browser, url, REVIEWER_KEY) as tab:
        tab.goto(f"{url}/ui/#/rollout/{REJECTED}")
        state = tab.wait_for_selector("#review-state")
        assert state is not None and "Review: rejected" in state.inner_text()


def test_a_reviewer_is_refused_an_admin_action_in_the_dashboard(browser: Any, server: tuple[str, Store]) -> None:
    url, _ = server
    with logged_in_tab(browser, url, REVIEWER_KEY) as tab:
        tab.goto(f"{url}/ui/#/gateway")
        error = tab.wait_for_selector("main .error")
        assert error is not None and "needs the admin key; a reviewer key reads" in error.inner_text()
        status = tab.evaluate(
            """async () => (await fetch("/api/gateway/pause", {method: "POST",
                headers: {Authorization: "Bearer " + sessionStorage.getItem("alight.adminKey")}})).status"""
        )
        assert status == 403
