"""Waves and a canary in the lab, with a real Prometheus (``--with prometheus``): one lab.

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
