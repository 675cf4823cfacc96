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
metrics name the adopt and the resume.  Then (the second test, on the replicas the first
left):

3. the chain ConfigMap gets a ``maxAge`` the current value has reached and the Deployment
   is restarted with ``--resync=3``: at a resync the new leader finds dragonfly due and runs
   ``rotate due dragonfly --confirm`` — one rotation, its journal a replica's, one new backend
   version, the chain closed, no value in the logs.  The Deployment is then scaled to 0, so
   nothing rotates until the lab stops.

One lab; the seed rotation and the due one are the module's only full rotations besides the
two adopt runs.
"""

from __future__ import annotations

import json
import math
import os
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from rotate.core.timestamps import parse_rfc3339
from tests.support.incluster import NS, chain_configmap, rendered, set_up
from tests.support.labtools import Lab, scan
from tests.support.polling import eventually

pytestmark = pytest.mark.lab

PATH = "secret/data/infra/dragonfly"
FIRST = "put-by-hand-for-the-watcher-0123456789ab"
SECOND = "put-by-hand-leader-killed-0123456789abcd"
LABEL = "app.kubernetes.io/name=rotate-watch"


def rendered_watch(lab: Lab, examples: Path, resync: int = 600) -> dict[str, Any]:
    """watch.yaml with a dead leader replaced within seconds; changes found by events, not
    by the resync, unless ``resync`` is short (its schedules)."""
    deployment = rendered(lab, examples / "watch.yaml")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [a for a in container["args"]
                         if not a.startswith(("--lease-seconds", "--resync"))]
    container["args"] += ["--lease-seconds=5", f"--resync={resync}"]
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


def version_age(lab: Lab) -> float:
    """Seconds since OpenBao's current dragonfly version was written: the age ``maxAge``
    is measured against (rotate.engine.due)."""
    meta = lab.bao("GET", "secret/metadata/infra/dragonfly").json()["data"]
    created = meta["versions"][str(meta["current_version"])]["created_time"]
    return (datetime.now(UTC) - parse_rfc3339(created)).total_seconds()


def due_acted(lab: Lab) -> str | None:
    """The /metrics of the replica whose ``rotate due`` child ended (HTTP: cheap to poll)."""
    for p in pods(lab):
        ip = (p.get("status") or {}).get("podIP")
        try:
            text = httpx.get(f"http://{ip}:8080/metrics", timeout=5).text if ip else ""
        except httpx.HTTPError:
            continue  # a replica starting or stopping
        if 'rotate_watch_actions_total{action="due"' in text:
            return text
    return None


def watch_logs(lab: Lab) -> str:
    return "".join(lab.kubectl("logs", "-n", NS, p["metadata"]["name"], check=False)
                   for p in pods(lab))


def ended(logs: str) -> str | None:
    """``logs`` once they hold the line the watcher writes after its due run's count."""
    return logs if "due: ended with exit" in logs else None


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


def test_the_leader_rotates_what_is_due_at_its_resync(lab: Lab, repo_root: Path) -> None:
    """On the replicas the test above left: ``maxAge`` in the chain ConfigMap, the
    Deployment restarted with ``--resync=3`` (new pods read the chain at start)."""
    before, version = lab.bao_password(), lab.bao_version()
    known = {r["run_id"] for r in watch_runs(lab)}
    # due by the time the new leader's first resync comes; its own new value not due for
    # at least 30 s, time enough to stop the replicas before a second rotation
    max_age = max(math.ceil(version_age(lab)) + 2, 30)
    lab.kubectl_apply(chain_configmap(max_age=f"{max_age}s"))
    restarted = rendered_watch(lab, repo_root / "examples" / "in-cluster", resync=3)
    restarted["spec"]["strategy"] = {  # both new replicas at once, the old ones until ready
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": 0}}
    lab.kubectl_apply(restarted)
    try:
        metrics = eventually(lambda: due_acted(lab), 120, "the leader's due rotation to end")
        run_id = eventually(lambda: at_step(lab, known, "backend.write"), 30,
                            "the due run's journal in a replica's emptyDir")
        logs = eventually(lambda: ended(watch_logs(lab)), 30, "the `due:` end in the logs")
    finally:  # nothing rotates again until the lab stops
        lab.kubectl("scale", "deployment", "-n", NS, "rotate-watch", "--replicas=0")
    assert 'rotate_watch_actions_total{action="due",code="0",credential="dragonfly"} 1.0' \
        in metrics, metrics
    assert "due: dragonfly: rotate due dragonfly --confirm" in logs, logs
    assert "due: ended with exit 0" in logs, logs
    eventually(lambda: True if not pods(lab) else None, 90, "the replicas to stop")

    # one rotation, the watcher's child: a new backend version, the chain closed
    new = [r for r in watch_runs(lab) if r["run_id"] not in known]
    assert [(r["run_id"], r["status"]) for r in new] == [(run_id, "succeeded")], new
    report = json.loads(lab.rotate("show", run_id, "-o", "json").stdout)
    assert report["operation"] == "rotate", report
    assert "backend.adopt" not in json.dumps(report["steps"]), report["steps"]
    assert (report["backend"]["previous_version"], report["backend"]["version"]) \
        == (version, version + 1), report["backend"]
    assert lab.bao_version() == version + 1
    status = lab.rotate("status", "dragonfly")
    assert status.code == 0, status.output
    after = lab.bao_password()
    assert lab.dragonfly_auth(after) and not lab.dragonfly_auth(before)
    assert not scan([("watch logs", logs)], [before, after])
