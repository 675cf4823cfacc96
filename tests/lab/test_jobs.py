"""The lab's Job controller and the kubelet's in-cluster pieces
(rotate_lab.cluster.controllers.job, rotate_lab.cluster.node.incluster), on the in-process
MiniCluster with real processes: the ``rotate`` image runs the installed console script, a
pod of ``restartPolicy: Never`` ends Succeeded or Failed, the Job counts and concludes, the
ServiceAccount token is mounted and verifiable.
(The full in-cluster rotation is tests/e2e/test_in_cluster.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rotate_lab.cluster.api.store import ApiError
from rotate_lab.cluster.api.tokens import TokenIssuer
from rotate_lab.cluster.context import ApiEndpoint
from rotate_lab.cluster.controllers.job import JobController, condition_true
from rotate_lab.cluster.node.incluster import (
    is_rotate_image,
    link_nested_mounts,
    translate,
)

from tests.support.minicluster import MiniCluster, namespace, pid_alive, start_cluster
from tests.support.polling import eventually

Obj = dict[str, Any]
NS = "jobs"


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[MiniCluster]:
    mc = start_cluster(tmp_path / "lab")
    mc.ctx.tokens = TokenIssuer()
    mc.ctx.api = ApiEndpoint("127.0.0.1", 6443, b"-----BEGIN CERTIFICATE-----\nlab\n")
    controller = JobController(mc.ctx)
    controller.start()
    mc.controllers.append(controller)
    mc.apply(namespace(NS), {"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": "runner", "namespace": NS}})
    try:
        yield mc
    finally:
        pids = list(mc.pids().values())
        mc.stop()
        assert not [p for p in pids if pid_alive(p)]


def job(name: str, args: list[str], *, backoff: int = 0, sa: str = "runner",
        policy: str = "Never") -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"backoffLimit": backoff, "template": {"spec": {
                "serviceAccountName": sa, "restartPolicy": policy,
                "containers": [{"name": "rotate", "image": "ghcr.io/acme/rotate:1.0",
                                "args": args}]}}}}


def finished(mc: MiniCluster, name: str) -> Obj | None:
    obj = mc.get("Job", NS, name)
    return obj if condition_true(obj, "Complete") or condition_true(obj, "Failed") else None


def test_a_job_runs_rotate_to_completion(jobs: MiniCluster) -> None:
    jobs.apply(job("version", ["--version"]))
    done = eventually(lambda: finished(jobs, "version"), 30, "the Job to finish")
    assert condition_true(done, "Complete"), done["status"]
    assert (done["status"]["succeeded"], done["status"]["active"]) == (1, 0)
    assert done["status"]["completionTime"] >= done["status"]["startTime"]
    assert done["spec"]["selector"] == {
        "matchLabels": {"batch.kubernetes.io/job-name": "version"}}
    [pod] = jobs.pods(NS, "batch.kubernetes.io/job-name=version")
    assert pod["status"]["phase"] == "Succeeded"
    state = pod["status"]["containerStatuses"][0]["state"]
    assert state["terminated"]["exitCode"] == 0 and state["terminated"]["reason"] == "Completed"
    log = jobs.kubelet.log_file(NS, pod["metadata"]["name"]).read_text()
    assert "rotate" in log and "starting container rotate (rotate)" in log

    # The ServiceAccount token the kubelet mounted: signed by the API server's issuer.
    sa_dir = jobs.kubelet.pod_dir(NS, pod["metadata"]["name"]) / "serviceaccount"
    assert jobs.ctx.tokens is not None
    claims = jobs.ctx.tokens.verify((sa_dir / "token").read_text())
    assert claims["sub"] == f"system:serviceaccount:{NS}:runner"
    assert (sa_dir / "namespace").read_text() == NS
    assert (sa_dir / "token").stat().st_mode & 0o777 == 0o600
    reasons = [e["reason"] for e in jobs.store.list("Event", NS)[0]
               if e["involvedObject"]["kind"] == "Job"]
    assert sorted(reasons) == ["Completed", "SuccessfulCreate"]


def test_a_failing_job_retries_up_to_its_backoff_limit(jobs: MiniCluster) -> None:
    jobs.apply(job("broken", ["--no-such-option"], backoff=1))
    done = eventually(lambda: finished(jobs, "broken"), 30, "the Job to fail")
    assert condition_true(done, "Failed"), done["status"]
    failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert (done["status"]["failed"], done["status"].get("succeeded")) == (2, 0)
    pods = jobs.pods(NS, "batch.kubernetes.io/job-name=broken")
    assert sorted(p["status"]["phase"] for p in pods) == ["Failed", "Failed"]
    exit_codes = {p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
                  for p in pods}
    assert exit_codes == {2}  # rotate's usage error, never restarted in place


def test_a_missing_service_account_keeps_the_pod_waiting(jobs: MiniCluster) -> None:
    jobs.apply(job("orphan", ["--version"], sa="absent"))

    def waiting() -> str | None:
        pods = jobs.pods(NS, "batch.kubernetes.io/job-name=orphan")
        statuses = (pods[0].get("status") or {}).get("containerStatuses") if pods else None
        state = statuses[0]["state"] if statuses else {}
        return (state.get("waiting") or {}).get("message")

    message = eventually(lambda: waiting() if "absent" in (waiting() or "") else None, 15,
                         "the pod to wait for its ServiceAccount")
    assert 'serviceaccount "absent" not found' in message


def test_a_job_must_not_restart_always(jobs: MiniCluster) -> None:
    with pytest.raises(ApiError) as info:
        jobs.apply(job("always", ["--version"], policy="Always"))
    assert info.value.code == 422


@pytest.mark.parametrize(("image", "plays"), [
    ("rotate:latest", True), ("ghcr.io/acme/rotate:1.2", True),
    ("registry:5000/team/rotate@sha256:abc", True), ("rotate", True),
    ("ghcr.io/rotate/other:1", False), ("rotate-helper:1", False)])
def test_which_images_run_rotate(image: str, plays: bool) -> None:
    assert is_rotate_image(image) is plays


def test_mount_paths_translate_to_their_host_directories(tmp_path: Path) -> None:
    mounts = {"/etc/rotate": tmp_path / "chain", "/etc/rotate/schemas": tmp_path / "schemas",
              "/var/lib/rotate": tmp_path / "pvc"}
    assert translate("/etc/rotate/rotate.yaml", mounts) == f"{tmp_path}/chain/rotate.yaml"
    assert translate("/etc/rotate/schemas/a.json", mounts) == f"{tmp_path}/schemas/a.json"
    assert translate("--report-file=/var/lib/rotate/r.json", mounts) == \
        f"--report-file={tmp_path}/pvc/r.json"
    for untouched in ("/etc/rotatex/a", "dragonfly", "/var/lib", "http://x/etc/rotate"):
        assert translate(untouched, mounts) == untouched
    for d in mounts.values():
        d.mkdir()
    (tmp_path / "schemas" / "a.json").write_text("{}")
    link_nested_mounts(mounts)
    assert (tmp_path / "chain" / "schemas" / "a.json").read_text() == "{}"
