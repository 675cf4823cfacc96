"""Failure paths on the lab: a failing readyz (exit 16) resumed then rolled back; a second
concurrent run (exit 4); a kill -9 in the middle of a run followed by resume.

One lab for the module; tests run in file order and each leaves the chain healthy.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import pytest

from tests.e2e.labtools import CONSUMERS, SHOP, Lab
from tests.polling import eventually

pytestmark = pytest.mark.lab


def started_steps(lab: Lab, run_id: str) -> set[str]:
    return {e.get("kind", "") for e in lab.journal_events(run_id) if e.get("event") == "step.start"}


def newest_run(lab: Lab, known: set[str]) -> str | None:
    fresh = [r for r in lab.run_ids() if r not in known]
    return fresh[-1] if fresh else None


def resume_keeps_the_value(lab: Lab, run_id: str, version: int, value: str) -> None:
    """``rotate resume`` succeeds and never writes a second value."""
    res = lab.rotate("resume", run_id, "--confirm")
    assert res.code == 0, res.output
    assert lab.bao_version() == version, "resume must never write a second value"
    assert lab.bao_password() == value


def wait_at_sync_wait(lab: Lab, known: set[str]) -> str:
    """The id of the run just started (not in ``known``), once it waits on a stalled ESO."""
    run_id = eventually(lambda: newest_run(lab, known), 30, "the run's journal")
    eventually(lambda: "sync.wait" in started_steps(lab, run_id) or None, 30,
               "the run to reach sync.wait")
    return run_id


def _report_file(path: Path) -> dict[str, object]:
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    doc = json.loads(path.read_text())
    assert doc["apiVersion"] == "rotate/v1" and doc["kind"] == "run"
    return doc  # type: ignore[no-any-return]


def test_failing_readyz_exits_16_then_resume_then_rollback(lab: Lab, tmp_path: Path) -> None:
    v0 = lab.bao_version()
    old_password = lab.bao_password()
    lab.fault("readyz-fail", "cart")
    try:
        res = lab.rotate("dragonfly", "--confirm", "--timeout", "8s", "-o", "json",
                         "--report-file", str(tmp_path / "run.json"))
    finally:
        lab.fault("readyz-fail", None, clear=True)
    assert res.code == 16, res.output
    report = json.loads(res.stdout)
    assert _report_file(tmp_path / "run.json") == report  # the same document, even failed
    run_id = report["run_id"]
    assert report["status"] == "failed"
    assert report["resume"] == f"rotate resume {run_id} --confirm"
    assert report["rollback"] == f"rotate rollback {run_id} --confirm"
    assert f"rotate resume {run_id} --confirm" in res.stderr
    assert "readyz" in res.stderr and "cart" in res.stderr
    assert lab.bao_version() == v0 + 1
    new_password = lab.bao_password()

    resume_keeps_the_value(lab, run_id, v0 + 1, new_password)
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}

    res = lab.rotate("rollback", run_id, "--confirm", "--report-file",
                     str(tmp_path / "rollback.json"))
    assert res.code == 0, res.output
    rolled = _report_file(tmp_path / "rollback.json")
    assert (rolled["operation"], rolled["of_run"], rolled["exit_code"]) == ("rollback", run_id, 0)
    text = (tmp_path / "rollback.json").read_text() + (tmp_path / "run.json").read_text()
    assert old_password not in text and new_password not in text
    # Version N's data written back as a new version, through the whole chain.
    assert lab.bao_version() == v0 + 2
    assert lab.bao_password() == old_password
    assert lab.secret_value("dragonfly", "dragonfly-password-secret", "password") == old_password
    assert lab.dragonfly_auth(old_password) and not lab.dragonfly_auth(new_password)
    for svc in CONSUMERS:
        assert lab.bootstrap(svc)["value"]["dragonfly"]["password"] == old_password
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}
    runs = lab.rotate("runs", "-o", "json")
    assert runs.code == 0
    statuses = {r["run_id"]: r["status"] for r in json.loads(runs.stdout)["runs"]}
    assert statuses[run_id] == "rolled-back"


def test_second_concurrent_run_exits_4(lab: Lab) -> None:
    known = set(lab.run_ids())
    lab.fault("eso-stall")
    first = lab.spawn_rotate("dragonfly", "--confirm")
    try:
        run_id = wait_at_sync_wait(lab, known)
        second = lab.rotate("dragonfly", "--confirm")
        assert second.code == 4, second.output
        assert "rotate-dragonfly" in second.output and run_id in second.output
    finally:
        lab.fault("eso-stall", None, clear=True)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out + err
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}


def test_kill_9_mid_run_then_resume(lab: Lab) -> None:
    known = set(lab.run_ids())
    v0 = lab.bao_version()
    revs = lab.revisions()
    lab.fault("eso-stall")
    proc = lab.spawn_rotate("dragonfly", "--confirm")
    try:
        run_id = wait_at_sync_wait(lab, known)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        lab.fault("eso-stall", None, clear=True)
    assert lab.bao_version() == v0 + 1
    written = lab.bao_password()

    resume_keeps_the_value(lab, run_id, v0 + 1, written)
    assert lab.secret_value("dragonfly", "dragonfly-password-secret", "password") == written
    assert lab.dragonfly_auth(written)
    after = lab.revisions()
    for svc in CONSUMERS:
        assert after[svc] == revs[svc] + 1
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}


def test_sigint_exits_130_and_the_run_resumes(lab: Lab) -> None:
    known = set(lab.run_ids())
    v0 = lab.bao_version()
    lab.fault("eso-stall")
    proc = lab.spawn_rotate("dragonfly", "--confirm")
    try:
        run_id = wait_at_sync_wait(lab, known)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        lab.fault("eso-stall", None, clear=True)
    assert proc.returncode == 130, out + err
    assert f"rotate resume {run_id} --confirm" in err
    # The lock was released: a resume does not need --take-over-lock.
    res = lab.rotate("resume", run_id, "--confirm")
    assert res.code == 0, res.output
    assert lab.bao_version() == v0 + 1


RELOAD = "secret.reloader.stakater.com/reload"


def test_a_human_rollout_restart_is_not_taken_for_reloaders(lab: Lab) -> None:
    """Issue 10 item 1: Dragonfly annotated for Reloader, no Reloader running, and a human
    `kubectl rollout restart` of Dragonfly after the run noted its baseline but before the
    Secret changed.  The run took that roll for Reloader's, never rolled, and left Dragonfly
    on the old password (exit 15).  Now: no Reloader runs, so no wait and rotate rolls."""
    known = set(lab.run_ids())
    lab.kubectl("annotate", "deployment/dragonfly", "-n", "dragonfly",
                f"{RELOAD}=dragonfly-password-secret", "--overwrite")
    lab.fault("eso-stall")
    try:
        proc = lab.spawn_rotate("dragonfly", "--confirm")
        run_id = wait_at_sync_wait(lab, known)
        lab.kubectl("rollout", "restart", "deployment/dragonfly", "-n", "dragonfly")
        lab.kubectl("rollout", "status", "deployment/dragonfly", "-n", "dragonfly",
                    "--timeout=60s")
    finally:
        lab.fault("eso-stall", None, clear=True)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        lab.kubectl("annotate", "deployment/dragonfly", "-n", "dragonfly", f"{RELOAD}-")
    assert proc.returncode == 0, out + err
    done = [e for e in lab.journal_events(run_id)
            if e.get("event") == "step.done" and e.get("kind") == "provider.restart"]
    assert done and str(done[0]["data"].get("detail", "")).startswith("restartedAt="), done
    written = lab.bao_password()
    assert lab.dragonfly_auth(written)
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}
