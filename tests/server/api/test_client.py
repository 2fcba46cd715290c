"""AlightClient against a live server: typed results for every route, ApiError with the server's message."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from alight.api_models import RolloutQuery
from alight.client import AlightClient, ApiError
from alight.schemas import (
    AttemptFinish,
    EventCreate,
    FailureKind,
    RewardCreate,
    RolloutCreate,
    RolloutState,
    UpstreamCreate,
)

if TYPE_CHECKING:
    from tests.conftest import LiveServer


@pytest.fixture
def client(live_server: LiveServer) -> Iterator[AlightClient]:
    with AlightClient(live_server.url, live_server.admin_key, timeout=10) as c:
        yield c


def test_a_rollout_lifecycle_through_the_client(client: AlightClient) -> None:
    (r,) = client.create_rollouts([RolloutCreate(id="r", task={"q": 1}, max_attempts=2)])
    (start,) = client.claim_attempts(limit=5)
    assert start.rollout.id == "r" and start.attempt == 1 and start.token.startswith("alt1.")
    assert client.set_runner_handle("r", 1, "pid:1").runner_handle == "pid:1"
    client.finish_attempt("r", 1, AttemptFinish(status="failed", failure_kind=FailureKind.INFRA))
    (retry,) = client.claim_attempts(ids=["r"])
    assert retry.attempt == 2
    client.add_event("r", EventCreate(kind="log", attempt=2, payload={"line": "x"}))
    client.add_reward("r", RewardCreate(attempt=2, value=1.0, final=True))
    done = client.finish_attempt("r", 2, AttemptFinish(status="succeeded"))
    assert done.state == RolloutState.SUCCEEDED
    assert client.wait_rollouts(["r"], timeout_s=5).done[0].id == "r"
    assert [e.kind for e in client.list_events("r", kind="log")] == ["log"]
    assert [w.value for w in client.list_rewards("r", attempt=2)] == [1.0]
    page = client.list_rollouts_page(RolloutQuery(state=[RolloutState.SUCCEEDED]))
    assert [x.id for x in page.rollouts] == ["r"] and page.next_seq == done.seq
    assert client.list_rollouts(RolloutQuery(since_seq=r.seq))[0].id == "r"
    assert client.get_rollout("r").attempts[1].status == "succeeded"


def test_status_and_cancel_through_the_client(client: AlightClient) -> None:
    client.create_rollouts([RolloutCreate(id="a"), RolloutCreate(id="b")])
    assert client.set_status("a", RolloutState.RUNNING).state == RolloutState.RUNNING
    assert client.cancel_rollout("b").state == RolloutState.CANCELLED


def test_upstreams_and_policy_through_the_client(client: AlightClient) -> None:
    assert client.add_upstream(UpstreamCreate(id="u", url="http://x/v1")).id == "u"
    assert [u.id for u in client.list_upstreams()] == ["u"]
    client.remove_upstream("u")
    assert client.add_policy_version({"step": 3}).version == 1
    assert client.policy().current == 1
    assert client.ready()


def test_server_refusals_become_api_errors_with_the_message(client: AlightClient) -> None:
    with pytest.raises(ApiError) as info:
        client.get_rollout("ghost")
    assert info.value.status_code == 404 and info.value.message == "no rollout with id 'ghost'"
    assert info.value.error_type == "not_found_error"
    client.create_rollouts([RolloutCreate(id="r")])
    client.cancel_rollout("r")
    with pytest.raises(ApiError, match="409: rollout 'r' cannot move"):
        client.set_status("r", RolloutState.RUNNING)


def test_a_wrong_key_is_an_api_error(live_server: LiveServer) -> None:
    with AlightClient(live_server.url, "wrong") as c, pytest.raises(ApiError) as info:
        c.list_rollouts()
    assert info.value.status_code == 401


def test_an_unreachable_server_is_not_ready() -> None:
    assert not AlightClient("http://127.0.0.1:9", "k", timeout=1).ready()
