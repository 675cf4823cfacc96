"""``rotate watch`` in the lab: examples/in-cluster/watch.yaml's two replicas, one leader.

Set up as docs/in-cluster.md says (tests/support/incluster.py, RBAC with ``--watch``).  Then:

1. a ``bao kv put`` of a new dragonfly value by hand opens the chain (``rotate status``: exit
   20 naming the Secret link); ESO's refresh changes the target Secret (forced here by the
   ``force-sync`` annotation an ESO refresh stands for); the leader sees the change within
   seconds and adopts the value: ``status`` exits 0 with the backend version unchanged;
2. a second put by hand; the moment the leader's adopt run starts ``provider.apply`` both
   replicas are frozen (SIGSTOP) and the leader is killed (SIGKILL, its run with it); the
   other replica takes the leader Lease, finds the run unfinished in the cluster journal
   with its holder gone, resumes it, and the chain closes — the same run, no new backend
   version.

No Secret value in the pods' logs, no annotation written to the Secret by kopf, and the
metrics name the adopt and the resume.  One lab; the seed rotation is the module's only
full rotation besides the two adopt runs.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.incluster import NS, rendered, set_up
from tests.support.labtools import Lab, scan
from tests.support.polling import eventually

pytestmark = pytest.mark.lab

PATH = "secret/data/infra/dragonfly"
FIRST = "put-by-hand-for-the-watcher-0123456789ab"
SECOND = "put-by-hand-leader-killed-0123456789abcd"
LABEL = "app.kubernetes.io/name=rotate-watch"


def rendered_watch(lab: Lab, examples: Path) -> dict[str, Any]:
    deployment = rendered(lab, examples / "watch.yaml")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    # a dead leader replaced within seconds; changes found by events, not by the resync
    container["args"] = [a for a in container["args"]
                         if not a.startswith(("--lease-seconds", "--resync"))]
    container["args"] += ["--lease-seconds=5", "--resync=600"]
    return deployment


def pods(lab: Lab) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = lab.kjson("get", "pods", "-n", NS, "-l", LABEL)["items"]
    return items


def both_ready(lab: Lab) -> bool | None:
    ready = [p for p in pods(lab) if any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (p.get("status") or {}).get("conditions", []))]
    return True if len(ready) == 2 else None


def leader(lab: Lab) -> str | None:
    lease = lab.kjson("get", "lease", "-n", NS, "rotate-watch")
    return (lease.get("spec") or {}).get("holderIdentity") or None


def put(lab: Lab, password: str) -> None:
    """``bao kv put`` of the path by hand, every key given."""
    data = lab.bao("GET", PATH).json()["data"]["data"]
    res = lab.bao("POST", PATH, json={"data": {**data, "password": password}})
    assert res.status_code == 200, res.text


def refresh(lab: Lab, n: int) -> None:
    """ESO's refresh of the ExternalSecret, brought forward."""
    lab.kubectl("annotate", "externalsecret", "-n", "dragonfly", "dragonfly-password",
                "--overwrite", f"force-sync=refresh-{n}")


def closed(lab: Lab) -> bool | None:
    return True if lab.rotate("status", "dragonfly").code == 0 else None


def settled(lab: Lab, timeout: float, what: str) -> None:
    """The chain closed within ``timeout``; else the replicas' logs say why (no value)."""
    try:
        eventually(lambda: closed(lab), timeout, what)
    except AssertionError as exc:
        logs = "\n".join(f"--- {p['metadata']['name']}\n" + lab.kubectl(
            "logs", "-n", NS, p["metadata"]["name"], "--tail=60", check=False) for p in pods(lab))
        raise AssertionError(f"{exc}\n{logs}") from None


def at_step(lab: Lab, known: set[str], kind: str) -> str | None:
    """A new run whose journal — in a replica's state directory, the pod's emptyDir on this
    host — shows ``step.start`` of ``kind``."""
    for journal in (lab.dir / "pods").glob("rotate-system_rotate-watch-*/**/runs/*/journal.jsonl"):
        run_id = journal.parent.name
        if run_id in known:
            continue
        lines = [json.loads(line) for line in journal.read_text().splitlines()
                 if line.strip().endswith("}")]
        if any(e.get("event") == "step.start" and e.get("kind") == kind for e in lines):
            return run_id
    return None


def watch_runs(lab: Lab) -> list[dict[str, Any]]:
    res = lab.rotate("runs", "-o", "json")
    assert res.code == 0, res.output
    doc = json.loads(res.stdout)
    runs: list[dict[str, Any]] = doc["runs"] if isinstance(doc, dict) else doc
    return runs


def test_two_replicas_adopt_a_hand_put_and_survive_their_leader_killed_mid_run(
        lab: Lab, tmp_path: Path, repo_root: Path) -> None:
    set_up(lab, tmp_path, watch=True)
    lab.kubectl_apply(rendered_watch(lab, repo_root / "examples" / "in-cluster"))
    # while the replicas start: the rotation that sets rotate-version (the chain's value)
    assert lab.rotate("dragonfly", "--confirm").code == 0
    eventually(lambda: both_ready(lab), 180, "both watch replicas ready")
    eventually(lambda: leader(lab), 30, "a leader")
    before = lab.bao_password()

    # 1. a hand put: status names the Secret link; the watcher adopts on the Secret's change
    put(lab, FIRST)
    version = lab.bao_version()
    opened = lab.rotate("status", "dragonfly")
    assert opened.code == 20, opened.output
    assert "secret dragonfly/dragonfly-password-secret#password" in opened.stderr
    refresh(lab, 1)
    settled(lab, 300, "the watcher to close the chain")
    assert lab.bao_version() == version and lab.bao_password() == FIRST
    assert lab.dragonfly_auth(FIRST) and not lab.dragonfly_auth(before)

    # 2. the leader killed mid-run: the other replica resumes the same run
    known = {r["run_id"] for r in watch_runs(lab)}
    put(lab, SECOND)
    version = lab.bao_version()
    refresh(lab, 2)
    run_id = eventually(lambda: at_step(lab, known, "provider.apply"), 90,
                        "the leader's adopt run to reach provider.apply")
    pids = [int(p["status"]["containerStatuses"][0]["containerID"].rpartition("/")[2])
            for p in pods(lab)]
    for pid in pids:  # both frozen (each with its child run) while the Lease names the leader
        os.killpg(pid, signal.SIGSTOP)
    killed = leader(lab)
    assert killed is not None
    os.killpg(int(killed.rpartition("/")[2]), signal.SIGKILL)
    for pid in pids:
        if str(pid) != killed.rpartition("/")[2]:
            os.killpg(pid, signal.SIGCONT)
    eventually(lambda: (leader(lab) or killed) != killed or None, 30, "a new leader")
    settled(lab, 300, "the new leader to resume the run and close the chain")
    assert lab.bao_version() == version and lab.bao_password() == SECOND
    assert lab.dragonfly_auth(SECOND) and not lab.dragonfly_auth(FIRST)
    report = json.loads(lab.rotate("show", run_id, "-o", "json").stdout)
    assert report["status"] == "succeeded", report["status"]
    assert "backend.adopt" in json.dumps(report["steps"])
    assert {r["run_id"] for r in watch_runs(lab)} - known == {run_id}  # resumed, not new

    # what the replicas left: no value in their logs, nothing written to the Secret
    logs = "".join(lab.kubectl("logs", "-n", NS, p["metadata"]["name"]) for p in pods(lab))
    assert "resum" in logs, logs
    assert not scan([("watch logs", logs)], [FIRST, SECOND, before])
    secret = lab.kjson("get", "secret", "-n", "dragonfly", "dragonfly-password-secret")
    annotations = secret["metadata"].get("annotations") or {}
    assert not [k for k in annotations if "kopf" in k or "last-handled" in k], annotations
    metrics = ""
    for p in pods(lab):
        ip = p["status"]["podIP"]
        metrics += httpx.get(f"http://{ip}:8080/metrics", timeout=5).text
        assert httpx.get(f"http://{ip}:8080/healthz", timeout=5).status_code == 200
    # the resume, counted by the replica that leads now (a killed one's counters are gone)
    assert 'rotate_watch_actions_total{action="resume",code="0",credential="dragonfly"} 1.0' \
        in metrics, metrics
    assert metrics.count("rotate_watch_leader 1.0") == 1, metrics
