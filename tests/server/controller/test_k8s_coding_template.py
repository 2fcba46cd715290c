"""The coding example's Job template (examples/coding/k8s-job.yaml) on the Kubernetes runner and the fake cluster."""

from __future__ import annotations

from pathlib import Path

from controller_testkit import AGENT_IMAGE, k8s_runner, make_start, wait_until

from alight.schemas import RunnerSpec
from alight_server.controller.k8s.manifest import JobTemplate
from alight_server.controller.k8s.preflight import preflight
from alight_testing.fake_k8s import FakeCluster

TEMPLATE = Path(__file__).parents[3] / "examples" / "coding" / "k8s-job.yaml"
ENTRYPOINT = "examples/coding/agent.py:main"


def test_the_coding_job_template_passes_the_preflight_and_the_api_accepts_its_job(cluster: FakeCluster) -> None:
    runner = k8s_runner(cluster, template=JobTemplate.load(TEMPLATE), agent_server_url="http://127.0.0.1:9")
    try:
        assert preflight(runner) == []
        runner.start(make_start("coding-1", runner=RunnerSpec(entrypoint=ENTRYPOINT, image=AGENT_IMAGE)))
        (job,) = cluster.store.list("jobs", "default")[0]
        container = job["spec"]["template"]["spec"]["containers"][0]
        assert container["command"] == ["python", "-m", "alight.entry", ENTRYPOINT]
        # bubblewrap's two capabilities, on top of the runner's drop of every other one
        assert container["securityContext"]["capabilities"] == {"add": ["SYS_ADMIN", "SYS_PTRACE"], "drop": ["ALL"]}
        assert container["securityContext"]["seccompProfile"] == {"type": "Unconfined"}  # the template's choice wins
        assert container["resources"]["requests"]["cpu"] == "2"
        env = {e["name"]: e for e in container["env"]}
        assert env["CODING_STEP_LIMIT"]["value"] == "40"  # the template's, kept beside the attempt contract
        assert env["OPENAI_API_KEY"]["valueFrom"]["secretKeyRef"]["key"] == "token"

        def pod_past_waiting() -> bool:  # scheduled on the node, image pulled, Secret resolved
            pods = cluster.job_pods("default", job["metadata"]["name"])
            statuses = (pods[0].get("status") or {}).get("containerStatuses") or [] if pods else []
            return bool(statuses) and "waiting" not in statuses[0]["state"]

        wait_until(pod_past_waiting)
    finally:
        runner.close()
