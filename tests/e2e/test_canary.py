"""Waves and a canary in the lab, with a real Prometheus (``--with prometheus``), and a
run's notifications to the lab's real Pushgateway (``--with pushgateway``): one lab.

The chain file is the lab's own with the ``dragonfly`` credential (overlap, redis-acl) in
waves ``[[cart], [order, user]]`` behind the canary ``cart``, whose bake also asks the lab's
Prometheus for ``cart``'s readyz failures.  A readyz fault switched on while the canary
bakes stops the run with exit 19 before the next wave: ``order`` and ``user`` keep their
Deployment generation, pod template and document; the rollback restores the canary and the
chain is closed again.  Then a short bake with every signal good moves every wave.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.labtools import Lab
from tests.support.polling import eventually
from tests.support.webhook_receiver import webhook_receiver

pytestmark = pytest.mark.lab

LATER = ("order", "user")
ANCHOR = "        apply: redis-acl\n        user: default\n"


def _chain(lab: Lab, name: str, bake: str, query_max: float) -> Path:
    """A copy of the lab's chain directory whose ``dragonfly`` moves in waves behind a
    canary (the copy keeps the schemas beside the file)."""
    src = Path(lab.env["ROTATE_CHAIN"])
    dst = lab.dir / f"chain-{name}"
    if not dst.exists():
        shutil.copytree(src.parent, dst)
    text = src.read_text()
    assert ANCHOR in text
    added = ("    waves: [[cart], [order, user]]\n"
             f"    canary:\n      consumers: [cart]\n      bake: {bake}\n"
             "      query:\n        prometheus: {urlEnv: PROMETHEUS_URL}\n"
             "        expr: 'sum(lab_readyz_failures_total{service=\"cart\"})'\n"
             f"        max: {query_max}\n")
    path = dst / src.name
    path.write_text(text.replace(ANCHOR, ANCHOR + added, 1))
    return path


def _shape(lab: Lab, name: str) -> tuple[int, dict[str, Any]]:
    """A Deployment's generation and pod template annotations: what a restart changes."""
    d = lab.kjson("get", "deployment", "-n", "shop", name)
    return (int(d["metadata"]["generation"]),
            dict(d["spec"]["template"]["metadata"].get("annotations") or {}))


def _bake_started(lab: Lab, run_id: str | None) -> bool:
    return any(e.get("event") == "step.start" and e.get("kind") == "canary.bake"
               for e in lab.journal_events(run_id))


def test_prometheus_scrapes_the_shop(prometheus_lab: Lab) -> None:
    url = prometheus_lab.env["PROMETHEUS_URL"]
    assert url.startswith("http://127.0.0.1:")

    def scraped() -> bool:
        body = httpx.get(f"{url}/api/v1/query", params={
            "query": 'lab_readyz_failures_total{service="cart"}'}, timeout=5).json()
        return bool(body["data"]["result"])

    eventually(scraped, 30, "Prometheus to scrape cart's /metrics")
    part = prometheus_lab.status()["parts"]["prometheus"]
    assert part["healthy"] and part["url"] == url
    cmdline = Path(f"/proc/{part['pid']}/cmdline").read_bytes()  # the pid `down` stops
    assert b"prometheus" in cmdline and str(prometheus_lab.dir).encode() in cmdline


def test_a_canary_fault_stops_before_the_later_waves(prometheus_lab: Lab) -> None:
    lab = prometheus_lab
    chain = _chain(lab, "fault", "30s", 1e9)
    before = {name: _shape(lab, name) for name in LATER}
    docs = {name: lab.bootstrap(name)["version"] for name in LATER}
    known = set(lab.run_ids())
    proc = lab.spawn_rotate("dragonfly", "--confirm", "--chain", str(chain))
    try:
        run_id = eventually(lambda: next(iter(set(lab.run_ids()) - known), None), 60,
                            "the run's journal")
        eventually(lambda: _bake_started(lab, run_id), 120, "the canary's bake to start")
        lab.fault("readyz-fail", "cart")
        _, err = proc.communicate(timeout=60)
    finally:
        lab.fault("readyz-fail", None, clear=True)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 19, err
    assert "the canary cart failed its bake" in err
    assert "later waves (order, user" in err
    assert f"rotate rollback {run_id} --confirm" in err
    assert f"rotate resume {run_id} --confirm" in err
    assert lab.bao_password() not in err
    for name in LATER:  # untouched: no restart, no document written
        assert _shape(lab, name) == before[name], name
        assert lab.bootstrap(name)["version"] == docs[name], name

    res = lab.rotate("rollback", run_id, "--confirm", "--chain", str(chain))
    assert res.code == 0, res.output
    for name in LATER:
        assert _shape(lab, name) == before[name], name
    assert lab.readyz("cart") == 200
    status = lab.rotate("status", "dragonfly", "-o", "json", "--chain", str(chain))
    assert status.code == 0, status.output
    assert json.loads(status.stdout)


def test_a_good_canary_bakes_then_every_wave_moves(prometheus_lab: Lab) -> None:
    lab = prometheus_lab
    chain = _chain(lab, "good", "2s", 1e9)
    before = {name: _shape(lab, name) for name in ("cart", *LATER)}
    res = lab.rotate("dragonfly", "--confirm", "--chain", str(chain), "-o", "json")
    assert res.code == 0, res.output
    report = json.loads(res.stdout)
    kinds = [s["kind"] for s in report["steps"]]
    assert "canary.bake" in kinds
    for name in ("cart", *LATER):
        assert _shape(lab, name)[0] > before[name][0], name


def _notify_chain(lab: Lab, hook_url: str) -> Path:
    """A copy of the lab's chain directory whose ``notify`` pushes to the lab's Pushgateway
    (``PUSHGATEWAY_URL``, from the lab's env file) and posts to ``hook_url``."""
    src = Path(lab.env["ROTATE_CHAIN"])
    dst = lab.dir / "chain-notify"
    shutil.copytree(src.parent, dst)
    text = src.read_text()
    assert "\ncredentials:\n" in text
    added = ("notify:\n  pushgateway: {urlEnv: PUSHGATEWAY_URL}\n"
             f"  webhooks:\n    - {{url: '{hook_url}'}}\n  timeout: 10s\n")
    path = dst / src.name
    path.write_text(text.replace("\ncredentials:\n", f"\n{added}credentials:\n", 1))
    return path


def _hashes(node: Any) -> set[str]:
    """Every fingerprint hash in a journal record (operator-supplied values have one)."""
    if isinstance(node, dict):
        found = {str(node["hash"])} if "hash" in node and "salt" in node else set()
        return found.union(*(_hashes(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_hashes(v) for v in node))
    return set()


def test_a_run_notifies_the_pushgateway_and_a_webhook(prometheus_lab: Lab) -> None:
    lab = prometheus_lab
    gateway = lab.env["PUSHGATEWAY_URL"]
    part = lab.status()["parts"]["pushgateway"]
    assert part["healthy"] and part["url"] == gateway
    assert b"pushgateway" in Path(f"/proc/{part['pid']}/cmdline").read_bytes()
    old = lab.bao_password()
    with webhook_receiver() as hook:
        chain = _notify_chain(lab, hook.url)
        res = lab.rotate("dragonfly", "--confirm", "--chain", str(chain), "-o", "json")
        assert res.code == 0, res.output
        run_id = json.loads(res.stdout)["run_id"]
        eventually(lambda: len(hook.bodies) >= 2, 15, "the webhook's start and end")
        bodies = [body.decode() for body in hook.bodies]
    new = lab.bao_password()
    assert new != old
    docs = [json.loads(body) for body in bodies]
    assert [(d["event"], d["outcome"]) for d in docs] == [("run.start", "running"),
                                                         ("run.end", "succeeded")]
    assert {d["run_id"] for d in docs} == {run_id}
    assert {d["credential"] for d in docs} == {"dragonfly"}

    group = '{credential="dragonfly",instance="",job="rotate"}'
    metrics = httpx.get(f"{gateway}/metrics", timeout=5).text
    for name in ("rotate_last_run_duration_seconds", "rotate_last_success_timestamp_seconds",
                 "rotate_value_age_seconds", "rotate_value_written_timestamp_seconds"):
        assert f"{name}{group} " in metrics, name
    assert 'rotate_last_run_success{credential="dragonfly",instance="",job="rotate",' \
           'operation="rotate"} 1' in metrics
    assert f'run_id="{run_id}"' in metrics and 'status="succeeded"' in metrics
    stages = [line for line in metrics.splitlines()
              if line.startswith("rotate_last_run_stage_duration_seconds{")]
    assert len(stages) >= 2 and all('credential="dragonfly"' in line for line in stages)

    fingerprints = set().union(*(_hashes(e) for e in lab.journal_events(run_id)))
    for needle in (old, new, *fingerprints):
        assert needle not in metrics
        assert all(needle not in body for body in bodies)
