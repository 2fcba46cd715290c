"""Dashboard fixtures: a store filled by a real short training run, plus gateway calls, served on loopback.

The training run (tiny model, 2 steps, real agent subprocesses) takes about half a minute and is trained
once per session, whichever xdist workers need it (each serves its own copy); while it trains, a probe (live_probe.py) looks at the run's own dashboard and at a second
`alight serve` on its store. Then, through the same server's gateway and the fake upstream: a rollout
whose user turn (and so the fake model's echoed reply) carries a `<script>` tag. Straight into the
store: a rollout of the run's step 2 that failed once for infrastructure and once as a task, and the
hard gates' `reward_hacking` events on a rollout of step 1, as alight_sandbox.guards.report_grade writes them.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from filelock import FileLock

from alight.api_models import RolloutQuery
from alight.evaluation import REWARD_HACKING
from alight.schemas import AttemptFinish, EventCreate, FailureKind, RewardCreate, RolloutCreate, UpstreamCreate
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.redaction import PatternRule, RedactionConfig
from alight_server.stacks.opening import TrainingStacks
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store import Store, open_store
from alight_server.store.keys.upstream import SECRET_KEY_ENV
from alight_server.trainer.config.run import parse_config
from alight_server.trainer.run.loop import TrainingRun
from alight_testing import create_fake_upstream
from alight_testing.tiny_run import tiny_run_config
from tests.server.redaction.planted import PATTERN
from tests.server.redaction.planted_rollout import plant_run
from tests.server.ui.live_probe import LiveProbe, LiveView, Tee

AGENT = Path(__file__).parent / "agents" / "dash_agent.py"
PRICES = {"device_second": 0.5, "sandbox_second": 0.01}  # local inference: by the model-second
ADMIN_KEY = "alk_dashboard-test-key"
SCRIPT = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
XSS_ROLLOUT = "xss-rollout"
GATE_VIOLATIONS = [("tests_modified", "tests/test_core.py changed"), ("canary_read", "open ~/.netrc")]


@dataclass
class Dashboard:
    url: str
    store: Store
    run_id: str
    token: str  # the token of an attempt that is still running, which must not open the UI
    live: LiveView  # what the probe saw while the run trained
    gated_rollout: str  # the step-1 rollout that broke the gates in GATE_VIOLATIONS
    secret_key: str  # ALIGHT_SECRET_KEY the run's data keys are wrapped under: a server on a copy needs it


def _train(folder: Path) -> tuple[Path, LiveView]:
    tasks = [{"word": w} for w in ["apple", "river", "stone"] * 4]
    # The agent's side-model call is left out, as the Claude Code recipe leaves out `*haiku*`.
    raw = tiny_run_config(
        folder, f"{AGENT}:main", tasks, validation={"samples_per_task": 2}, samples={"exclude_models": ["*haiku*"]}
    )
    raw["prices"] = PRICES  # the run page's cost chart and the capture health's cost per success
    stderr = Tee(sys.stderr)
    probe = LiveProbe(stderr, folder / "run" / "alight.db")
    with contextlib.redirect_stderr(stderr):  # type: ignore[type-var]
        probe.start()
        try:
            db = (
                TrainingRun(parse_config(raw, folder), stacks=TrainingStacks(), show_progress=False).run().run_dir
                / "alight.db"
            )
        finally:
            view = probe.stop()
    return db, view


def _gate_violations(store: Store, run_id: str) -> str:
    """The events alight_sandbox.guards.report_grade posts for a graded episode that broke two rules."""
    rid = next(r.id for r in store.list_rollouts(RolloutQuery(limit=1000)) if r.id.startswith(f"{run_id}-s00000-"))
    for rule, evidence in GATE_VIOLATIONS:
        store.add_event(rid, EventCreate(kind=REWARD_HACKING, attempt=1, payload={"rule": rule, "evidence": evidence}))
    return rid


def _failed_twice(store: Store, run_id: str) -> None:
    """A rollout of the run's second training step: an infra failure, then a task failure."""
    rid = f"{run_id}-s00001-t009-k00"
    store.create_rollouts(
        [RolloutCreate(id=rid, task={"word": "x"}, group_id=f"{run_id}-s00001-t009", metadata={"step": 1})]
    )
    for kind in (FailureKind.INFRA, FailureKind.TASK):
        ((_, attempt),) = store.claim_attempts(1, ids=[rid])
        store.finish_attempt(
            rid, attempt, AttemptFinish(status="failed", failure_kind=kind, message=f"{kind} on purpose")
        )


def _xss_rollout(admin: httpx.Client) -> None:
    """Through the gateway: the user's turn holds a script tag, which the fake model echoes back."""
    from openai import OpenAI

    admin.post("/api/rollouts", json={"rollouts": [{"id": XSS_ROLLOUT, "task": {"q": SCRIPT}}]}).raise_for_status()
    start = admin.post("/api/attempts/claim", json={"limit": 1, "ids": [XSS_ROLLOUT]}).json()["attempts"][0]
    client = OpenAI(base_url=start["gateway_base_url"], api_key=start["token"], max_retries=0)
    client.chat.completions.create(model="any", messages=[{"role": "user", "content": SCRIPT}], max_tokens=64)
    reward = RewardCreate(value=1.0, attempt=1, final=True)
    admin.post(
        f"/api/rollouts/{XSS_ROLLOUT}/rewards", json=reward.model_dump(mode="json", exclude_none=True)
    ).raise_for_status()
    finish = {"status": "succeeded"}
    admin.post(f"/api/rollouts/{XSS_ROLLOUT}/attempts/1/finish", json=finish).raise_for_status()


def _running_attempt_token(admin: httpx.Client) -> str:
    """A valid attempt token: its attempt stays running (a token dies 60 s after its attempt ends)."""
    admin.post("/api/rollouts", json={"rollouts": [{"id": "still-running"}]}).raise_for_status()
    return admin.post("/api/attempts/claim", json={"limit": 1, "ids": ["still-running"]}).json()["attempts"][0]["token"]


def _trained_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LiveView, str]:
    """(the trained run's folder, what the probe saw, the server secret), trained once per session.

    Under xdist the first worker to get here trains into a folder all workers share (the standard FileLock
    recipe); the others wait for it and read the same run. Each worker then opens its own copy of the run.
    """
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the session's folder, above each worker's own
    folder = shared / "dashboard-run"
    with FileLock(str(shared / "dashboard-run.lock")):
        done = folder / "trained.pickle"
        if not done.exists():
            folder.mkdir(exist_ok=True)
            # One server secret for the run, the stores opened on it and the dashboards' servers: the run's
            # content cells are sealed under data keys its KEK wraps (store/keys/kek.py), which a store opened
            # under another key cannot open. Set only while they open their keys, so the rest of the session
            # runs without ALIGHT_SECRET_KEY as before.
            secret = Fernet.generate_key().decode()
            with pytest.MonkeyPatch.context() as env:
                env.setenv(SECRET_KEY_ENV, secret)
                db, live = _train(folder)
            done.write_bytes(pickle.dumps((db.parent, live, secret)))
        return pickle.loads(done.read_bytes())


@pytest.fixture(scope="session")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    trained, live, secret = _trained_once(tmp_path_factory)
    run_dir = shutil.copytree(trained, tmp_path_factory.mktemp("dashboard") / "run")  # this worker writes to it
    db = run_dir / "alight.db"
    with pytest.MonkeyPatch.context() as env:
        env.setenv(SECRET_KEY_ENV, secret)
        store = open_store(f"sqlite:///{db}")
        config = ServerConfig(admin_key=ADMIN_KEY, db_url=f"sqlite:///{db}", port=free_port())
        app = create_app(config, store=store)
    (run,) = store.list_runs()
    _failed_twice(store, run.id)
    gated = _gate_violations(store, run.id)
    fake = create_fake_upstream(model="fake-policy")
    with ServerThread(fake) as fake_url, ServerThread(app, port=config.port) as url:
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        with httpx.Client(base_url=url, headers=headers, timeout=60) as admin:
            upstream = UpstreamCreate(id="fake", url=fake_url + "/v1", model="fake-policy", policy_version=0)
            admin.post("/api/upstreams", json=upstream.model_dump(mode="json")).raise_for_status()
            _xss_rollout(admin)
            token = _running_attempt_token(admin)
        yield Dashboard(
            url=url, store=store, run_id=run.id, token=token, live=live, gated_rollout=gated, secret_key=secret
        )
    store.close()


def _chromium() -> str | None:
    return os.environ.get("ALIGHT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless Chromium driven by Playwright (its own browser download cannot reach the internet)."""
    executable = _chromium()
    if executable is None:
        pytest.skip("no chromium on PATH: bash scripts/setup.sh --browser (apt-get install chromium, as root)")
    playwright_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright missing: bash scripts/setup.sh --dev"
    )
    with playwright_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


SCREENSHOTS = (
    Path(os.environ.get("ALIGHT_TEST_ARTIFACTS", Path(__file__).parents[3] / ".alight" / "test-artifacts")) / "ui"
)


@contextlib.contextmanager
def logged_in_tab(browser: Any, url: str, admin_key: str = ADMIN_KEY) -> Iterator[Any]:
    """A tab of the dashboard at `url` logged in with `admin_key`; console and page errors on `tab.errors`."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.errors = errors
    tab.goto(f"{url}/ui/")
    tab.fill("#admin-key", admin_key)
    tab.click("button[type=submit]")
    tab.wait_for_selector("h1:has-text('Training runs')")
    try:
        yield tab
    finally:
        context.close()


@contextlib.contextmanager
def planted_dashboard(folder: Path, **settings: Any) -> Iterator[str]:
    """A server over a store in `folder` holding the redaction tests' planted run (content sealed under the server's
    key), with the operator's pattern configured and `settings`; yields its URL."""
    db = f"sqlite:///{folder / 'alight.db'}"
    redaction = RedactionConfig(patterns=[PatternRule(**PATTERN)])
    config = ServerConfig(admin_key=ADMIN_KEY, db_url=db, port=free_port(), redaction=redaction, **settings)
    store = open_store(db, config.kek_source())
    plant_run(store)
    try:
        with ServerThread(create_app(config, store=store), port=config.port) as url:
            yield url
    finally:
        store.close()


@pytest.fixture
def page(browser: Any, dashboard: Dashboard) -> Iterator[Any]:
    """A fresh tab logged in with the admin key; console errors and page errors are collected on `page.errors`."""
    with logged_in_tab(browser, dashboard.url) as tab:
        yield tab


def screenshot(page: Any, name: str, selector: str | None = None) -> Path:
    """The whole page, or one part of it, as a test artefact."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    if selector is None:
        page.screenshot(path=str(path), full_page=True)
    else:
        page.locator(selector).screenshot(path=str(path))
    return path
