"""The controller on the Kubernetes runner against a live server and the fake cluster: every row of the failure table.

Each test drives real Jobs through the real `kubernetes` client and asserts at
the store (through the server's API): the attempt's kind, the retry as a new
attempt, and what is left in the cluster afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from controller_testkit import AGENT_IMAGE, SCRIPTED, create_rollout, get_rollout, wait_terminal, wait_until

from alight_server.controller.k8s import names
from alight_server.controller.loop import Controller, log_event_id
from alight_testing.fake_k8s import FakeCluster

Make = Callable[..., Controller]


def k8s_rollout(
    admin: httpx.Client, rollout_id: str, task: Any = None, image: str = AGENT_IMAGE, **fields: Any
) -> None:
    runner = {"command": SCRIPTED, "image": image, **fields.pop("runner", {})}
    create_rollout(admin, rollout_id, task=task, runner=runner, **fields)


def attempts_of(rollout: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(a["status"], a["failure_kind"]) for a in rollout["attempts"]]


def running_pod(cluster: FakeCluster, rollout_id: str, attempt: int = 1) -> str:
    """The name of the attempt's Pod once its agent runs."""

    def find() -> str | None:
        selector = f"{names.ROLLOUT_LABEL}={rollout_id},{names.ATTEMPT_LABEL}={attempt}"
        pods = cluster.store.list("pods", "default", selector)[0]
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        return running[0]["metadata"]["name"] if running else None

    return wait_until(find, timeout_s=30)


def rewards(admin: httpx.Client, rollout_id: str) -> list[Any]:
    """Every reward the server holds for the rollout (an evaluator or a fallback would show here too)."""
    response = admin.get(f"/api/rollouts/{rollout_id}/rewards")
    assert response.status_code == 200, response.text
    return response.json()["rewards"]


def nothing_left(cluster: FakeCluster) -> bool:
    return not any(cluster.names(kind) for kind in ("jobs", "pods", "secrets"))


def test_an_attempt_runs_as_a_job_and_its_output_is_uploaded(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster
) -> None:
    k8s_rollout(admin_client, "ok-1", task={"say": "hello from the pod"})
    controller = k8s_controllers().start()
    rollout = wait_terminal(admin_client, "ok-1")
    assert rollout["state"] == "succeeded" and attempts_of(rollout) == [("succeeded", None)]
    assert rollout["attempts"][0]["runner_handle"] == f"{controller.runner.name}/ok-1/1"
    events = admin_client.get("/api/rollouts/ok-1/events", params={"kind": "log"}).json()
    events = events["events"] if isinstance(events, dict) else events
    assert events[0]["id"] == log_event_id("ok-1", 1) and "hello from the pod" in events[0]["payload"]["text"]
    posts = [p for m, p in cluster.requests if m == "POST" and p.endswith("/jobs")]
    assert len(posts) == 1


def test_the_attempt_token_reaches_the_agent_only_through_its_secret(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster, tmp_path: Any
) -> None:
    env_out = tmp_path / "env.json"
    k8s_rollout(admin_client, "tok-1", task={"env_out": str(env_out), "sleep": 30})
    k8s_controllers().start()
    running_pod(cluster, "tok-1")
    (job,) = cluster.store.list("jobs", "default")[0]
    env = wait_until(lambda: env_out.exists() and __import__("json").loads(env_out.read_text()))
    token = env["ALIGHT_TOKEN"]
    assert (
        token
        and env["OPENAI_API_KEY"] == env["ANTHROPIC_API_KEY"] == token
        and token in env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"].replace("%20", " ")
    )
    assert token not in str(job)  # nowhere in the Job: not in env, args, annotations
    container = job["spec"]["template"]["spec"]["containers"][0]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e}
    assert set(refs) == {"ALIGHT_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"}
    secret = cluster.store.get("secrets", "default", job["metadata"]["name"])
    assert secret["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert env["ALIGHT_ROLLOUT_ID"] == "tok-1" and env["ALIGHT_ATTEMPT"] == "1"


def test_a_pod_gets_its_runner_env_from_the_secret_and_runs_with_least_privilege(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster, tmp_path: Any
) -> None:
    env_out = tmp_path / "env.json"
    runner = {"env": {"AGENT_DB_PASSWORD": "pw-real-k8s"}}
    k8s_rollout(admin_client, "lp-1", task={"env_out": str(env_out), "sleep": 30}, runner=runner)
    k8s_controllers().start()
    running_pod(cluster, "lp-1")  # the fake API admitted the Job and its Pod runs
    (job,) = cluster.store.list("jobs", "default")[0]
    env = wait_until(lambda: env_out.exists() and __import__("json").loads(env_out.read_text()))
    assert env["AGENT_DB_PASSWORD"] == "pw-real-k8s" and "pw-real-k8s" not in str(job)
    pod = job["spec"]["template"]["spec"]
    security = pod["containers"][0]["securityContext"]
    assert pod["automountServiceAccountToken"] is False and pod["securityContext"]["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True and security["capabilities"]["drop"] == ["ALL"]
    assert security["allowPrivilegeEscalation"] is False
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"


def test_a_non_zero_exit_is_a_task_failure_with_the_log_tail_and_no_retry(
    k8s_controllers: Make, admin_client: httpx.Client
) -> None:
    k8s_rollout(admin_client, "task-1", task={"exit": 3, "say": "wrong answer"}, max_attempts=3)
    k8s_controllers().start()
    rollout = wait_terminal(admin_client, "task-1")
    assert rollout["state"] == "failed" and attempts_of(rollout) == [("failed", "task")]
    assert rollout["attempts"][0]["exit_code"] == 3 and "wrong answer" in rollout["attempts"][0]["message"]


def test_an_image_that_cannot_be_pulled_is_infra_and_retried_without_a_reward(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster
) -> None:
    k8s_rollout(admin_client, "pull-1", image="registry.example/missing@sha256:" + "f" * 64, max_attempts=2)
    k8s_controllers().start()
    rollout = wait_terminal(admin_client, "pull-1")
    assert attempts_of(rollout) == [("failed", "infra"), ("failed", "infra")]
    assert "cannot pull its image: ErrImagePull" in rollout["attempts"][0]["message"]
    assert rewards(admin_client, "pull-1") == []
    wait_until(lambda: nothing_left(cluster))  # a Job that never ran is deleted at once, Secret and Pod with it


def test_an_invalid_image_name_is_infra(k8s_controllers: Make, admin_client: httpx.Client) -> None:
    k8s_rollout(admin_client, "badname-1", image="Registry Example/agent", max_attempts=1)
    k8s_controllers(runner={"allow_unpinned_images": True}).start()
    rollout = wait_terminal(admin_client, "badname-1")
    assert attempts_of(rollout) == [("failed", "infra")] and "InvalidImageName" in rollout["attempts"][0]["message"]


def test_a_pod_unschedulable_past_the_limit_is_infra(k8s_controllers: Make, admin_client: httpx.Client) -> None:
    resources = {"requests": {"cpu": "64"}}  # the node has 8
    k8s_rollout(admin_client, "sched-1", runner={"resources": resources}, max_attempts=1)
    k8s_controllers().start()
    rollout = wait_terminal(admin_client, "sched-1")
    assert attempts_of(rollout) == [("failed", "infra")]
    assert "unschedulable for 1s" in rollout["attempts"][0]["message"]


def test_an_oom_killed_agent_is_infra_and_the_retry_succeeds(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster
) -> None:
    k8s_rollout(admin_client, "oom-1", task={"by_attempt": {"1": {"sleep": 60}}}, max_attempts=2)
    k8s_controllers().start()
    cluster.oom_kill(running_pod(cluster, "oom-1"))
    rollout = wait_terminal(admin_client, "oom-1")
    assert attempts_of(rollout) == [("failed", "infra"), ("succeeded", None)]
    assert "OOMKilled" in rollout["attempts"][0]["message"]


def test_an_evicted_pod_is_infra_although_its_container_exited_137(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster
) -> None:
    k8s_rollout(admin_client, "evict-1", task={"sleep": 60}, max_attempts=1)
    k8s_controllers().start()
    cluster.evict(running_pod(cluster, "evict-1"))
    rollout = wait_terminal(admin_client, "evict-1")
    assert attempts_of(rollout) == [("failed", "infra")] and "Evicted" in rollout["attempts"][0]["message"]


def test_a_lost_node_is_infra(k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster) -> None:
    k8s_rollout(admin_client, "node-1", task={"sleep": 60}, max_attempts=1)
    k8s_controllers().start()
    cluster.lose_node(running_pod(cluster, "node-1"))
    rollout = wait_terminal(admin_client, "node-1")
    assert attempts_of(rollout) == [("failed", "infra")]
    assert "DeletionByTaintManager" in rollout["attempts"][0]["message"]


def test_a_pod_deleted_by_someone_else_is_infra(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster
) -> None:
    k8s_rollout(admin_client, "podgone-1", task={"sleep": 60}, max_attempts=1)
    controller = k8s_controllers().start()
    pod = running_pod(cluster, "podgone-1")
    controller.runner.core.delete_namespaced_pod(pod, "default")  # type: ignore[attr-defined]  # as kubectl would
    rollout = wait_terminal(admin_client, "podgone-1")
    assert attempts_of(rollout) == [("failed", "infra")]
    assert "deleted before its agent finished" in rollout["attempts"][0]["message"]


def test_a_job_deleted_while_running_is_infra_and_retried(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster
) -> None:
    k8s_rollout(admin_client, "jobgone-1", task={"by_attempt": {"1": {"sleep": 60}}}, max_attempts=2)
    controller = k8s_controllers().start()
    running_pod(cluster, "jobgone-1")
    (job,) = cluster.names("jobs")
    controller.runner.batch.delete_namespaced_job(job, "default")  # type: ignore[attr-defined]
    rollout = wait_terminal(admin_client, "jobgone-1")
    assert attempts_of(rollout) == [("failed", "infra"), ("succeeded", None)]
    assert "was deleted while the attempt ran" in rollout["attempts"][0]["message"]


def test_an_attempt_past_its_timeout_is_a_timeout(k8s_controllers: Make, admin_client: httpx.Client) -> None:
    k8s_rollout(admin_client, "slow-1", task={"sleep": 60}, timeout_s=1, max_attempts=1)
    k8s_controllers().start()
    rollout = wait_terminal(admin_client, "slow-1")
    assert attempts_of(rollout) == [("failed", "timeout")]
    assert rewards(admin_client, "slow-1") == []


def test_cancel_deletes_the_job_its_pod_and_its_secret(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster
) -> None:
    k8s_rollout(admin_client, "cancel-1", task={"sleep": 60})
    k8s_controllers().start()
    running_pod(cluster, "cancel-1")
    assert admin_client.post("/api/rollouts/cancel-1/cancel").status_code == 200
    assert wait_terminal(admin_client, "cancel-1")["state"] == "cancelled"
    wait_until(lambda: nothing_left(cluster))
    deletes = [p for m, p in cluster.requests if m == "DELETE" and "/jobs/" in p]
    assert deletes, "the runner never deleted the Job"


def test_a_finished_job_and_its_secret_are_gone_after_the_ttl(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster
) -> None:
    k8s_rollout(admin_client, "ttl-1")
    k8s_controllers().start()
    assert wait_terminal(admin_client, "ttl-1")["state"] == "succeeded"
    assert not cluster.names("secrets")  # the token leaves the cluster as soon as the attempt is reported
    wait_until(lambda: nothing_left(cluster), timeout_s=15)  # TTL 2 s: Job, then its Pod by cascade


def test_a_watch_that_drops_mid_run_resumes_and_the_attempt_finishes(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster
) -> None:
    k8s_rollout(admin_client, "drop-1", task={"sleep": 3})
    controller = k8s_controllers().start()
    running_pod(cluster, "drop-1")
    cluster.drop_watches()
    rollout = wait_terminal(admin_client, "drop-1")
    assert attempts_of(rollout) == [("succeeded", None)]
    runner: Any = controller.runner
    assert runner.pods.resumes >= 1 and runner.pods.lists == 1  # resumed from its resourceVersion, no re-list


def test_a_watch_answered_410_gone_lists_again_and_the_attempt_finishes(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster
) -> None:
    k8s_rollout(admin_client, "gone-1", task={"sleep": 1})
    controller = k8s_controllers().start()
    running_pod(cluster, "gone-1")
    cluster.down()
    wait_until(lambda: cluster.store.list("jobs", "default")[0][0].get("status", {}).get("conditions"))
    cluster.compact()  # the history the watches would resume from is gone: they get 410 Gone
    cluster.up()
    rollout = wait_terminal(admin_client, "gone-1")
    assert attempts_of(rollout) == [("succeeded", None)]
    runner: Any = controller.runner
    assert runner.pods.lists >= 2 and runner.jobs.lists >= 2


def test_a_restarted_controller_adopts_its_running_job_and_creates_no_second_one(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster
) -> None:
    k8s_rollout(admin_client, "adopt-1", task={"sleep": 2, "say": "finished under the second controller"})
    first = k8s_controllers().start()
    running_pod(cluster, "adopt-1")
    first.stop(kill_running=False)
    second = k8s_controllers().start()
    rollout = wait_terminal(admin_client, "adopt-1")
    assert attempts_of(rollout) == [("succeeded", None)]
    assert rollout["attempts"][0]["runner_handle"] == f"{second.runner.name}/adopt-1/1"
    assert len([p for m, p in cluster.requests if m == "POST" and p.endswith("/jobs")]) == 1


def test_starting_an_attempt_twice_creates_one_job(
    cluster: FakeCluster, k8s_controllers: Make, admin_client: httpx.Client
) -> None:
    from controller_testkit import k8s_runner, make_start

    from alight.schemas import RunnerSpec

    runner = k8s_runner(cluster, image=AGENT_IMAGE)
    try:
        start = make_start("twice", runner=RunnerSpec(command=SCRIPTED), task={"sleep": 5})
        assert runner.start(start) == runner.start(start)
        restarted = k8s_runner(cluster, image=AGENT_IMAGE)  # a fresh runner (a restarted controller) too
        assert restarted.start(start) == runner.handle_for("twice", 1)
        restarted.close()
        assert len(cluster.names("jobs")) == 1 and len(cluster.names("secrets")) == 1
    finally:
        runner.kill(runner.handle_for("twice", 1), 0)
        runner.close()


def test_the_api_server_down_for_a_while_marks_nothing(
    k8s_controllers: Make, admin_client: httpx.Client, cluster: FakeCluster, tmp_path: Path
) -> None:
    go = tmp_path / "go"  # down-1's agent ends only once the API is down (a 1 s sleep raced the test under load)
    k8s_rollout(admin_client, "down-1", task={"wait_for": str(go)})
    k8s_controllers().start()
    running_pod(cluster, "down-1")
    cluster.down()
    go.touch()
    k8s_rollout(admin_client, "down-2")  # claimed while the API is unreachable: its Job waits to be created
    wait_until(lambda: get_rollout(admin_client, "down-2")["state"] == "running")
    wait_until(lambda: not cluster.runs[next(iter(cluster.runs))].thread.is_alive())  # down-1's agent has ended
    assert get_rollout(admin_client, "down-1")["state"] == "running"  # nothing concluded from the silence
    cluster.up()
    assert attempts_of(wait_terminal(admin_client, "down-1")) == [("succeeded", None)]
    assert attempts_of(wait_terminal(admin_client, "down-2")) == [("succeeded", None)]


def test_a_job_past_its_active_deadline_is_reported_as_a_timeout(cluster: FakeCluster) -> None:
    from controller_testkit import k8s_runner, make_start

    from alight.schemas import RunnerSpec
    from alight_server.controller import outcome
    from alight_server.controller.base import RunPhase

    runner = k8s_runner(cluster, image=AGENT_IMAGE)
    try:
        # Polled by hand (no loop to kill it first): Kubernetes' own deadline ends the Job.
        handle = runner.start(
            make_start("deadline", runner=RunnerSpec(command=SCRIPTED), task={"sleep": 60}, timeout_s=1)
        )
        status = wait_until(lambda: (s := runner.poll(handle)).ended and s, timeout_s=30)
        assert status.phase is RunPhase.DEADLINE and "activeDeadlineSeconds (1s)" in (status.message or "")
        assert outcome.decide(status, handle).failure_kind == "timeout"
    finally:
        runner.close()


def test_job_creation_is_paced_by_the_rate_limit(cluster: FakeCluster) -> None:
    import time

    from controller_testkit import k8s_runner, make_start

    from alight.schemas import RunnerSpec

    runner = k8s_runner(cluster, image=AGENT_IMAGE, creations_per_s=4)
    try:
        began = time.monotonic()
        for i in range(3):
            runner.start(make_start(f"paced-{i}", runner=RunnerSpec(command=SCRIPTED)))
        assert time.monotonic() - began >= 2 / 4  # three creates, at least two gaps of 1/4 s
        assert len(cluster.names("jobs")) == 3
    finally:
        runner.close()
