"""Two credentials sharing consumers on the lab, from outside the tool (issue 29).

``dragonfly`` and ``postgres`` both feed ``order`` and ``user``: each run writes only the
pointers its credential owns of a shared document and merges onto the other's version on
412; the newest machine token wins.  Started together or at an offset, both runs succeed and
every consumer ends with both new values, readyz 200 and one live token.  A human edit of an
owned pointer between preflight and ``config.write`` stops the run (exit 13) without losing
the edit; rollback refuses without ``--force`` and with it restores only owned pointers.

Rotated as one run (``rotate dragonfly postgres --confirm``, rotate.engine.several), each
consumer rolls exactly once — a shared one too — and a run killed mid-way resumes, and rolls
back, as one unit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.labtools import SHOP, Lab, newest_run
from tests.support.polling import eventually

pytestmark = pytest.mark.lab

DF_CONSUMERS = ("cart", "order", "user")
PG_CONSUMERS = ("inventory", "order", "payment", "user")
BOTH = tuple(sorted({*DF_CONSUMERS, *PG_CONSUMERS}))


def _pg_login(lab: Lab) -> dict[str, str]:
    return dict(lab.bao("GET", "secret/data/infra/postgres").json()["data"]["data"])


def _live_tokens(lab: Lab, svc: str) -> list[str]:
    data = lab.cc("GET", f"/v1/services/{svc}/tokens").json()
    items = data.get("tokens", []) if isinstance(data, dict) else data
    return [t["id"] for t in items if not t.get("revoked")]


def _problems(lab: Lab) -> list[str]:
    """Every inconsistency between OpenBao and the consumers' documents and tokens."""
    df, pg = lab.bao_password(), _pg_login(lab)
    out = []
    for svc in DF_CONSUMERS:
        if lab.bootstrap(svc)["value"]["dragonfly"]["password"] != df:
            out.append(f"{svc}: dragonfly password differs from OpenBao")
    for svc in PG_CONSUMERS:
        section = lab.bootstrap(svc)["value"]["postgres"]
        if (section["user"], section["password"]) != (pg["username"], pg["password"]):
            out.append(f"{svc}: postgres login differs from OpenBao")
    for svc in sorted({*DF_CONSUMERS, *PG_CONSUMERS}):
        if len(live := _live_tokens(lab, svc)) != 1:
            out.append(f"{svc}: {len(live)} live tokens")
    return out


def _settled(lab: Lab) -> None:
    problems = _problems(lab)
    assert not problems, problems
    eventually(lambda: all(lab.readyz(s) == 200 for s in SHOP), 120,
               "every shop service's readyz to answer 200")


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out + err


@pytest.mark.parametrize(("first", "offset"), [
    ("dragonfly", 0.0), ("dragonfly", 0.15), ("postgres", 0.15), ("dragonfly", 0.5)])
def test_two_credentials_sharing_consumers_both_end_consistent(
    lab: Lab, first: str, offset: float
) -> None:
    second = "postgres" if first == "dragonfly" else "dragonfly"
    df0, pg0 = lab.bao_password(), _pg_login(lab)["password"]
    a = lab.spawn_rotate(first, "--confirm")
    if offset:
        time.sleep(offset)  # the offset between the two starts is the case, not a wait
    b = lab.spawn_rotate(second, "--confirm")
    (code_a, out_a), (code_b, out_b) = _finish(a), _finish(b)
    assert code_a == 0, out_a
    assert code_b == 0, out_b
    assert lab.bao_password() != df0 and _pg_login(lab)["password"] != pg0
    _settled(lab)


def _journal(lab: Lab, run_id: str) -> Path:
    return Path(lab.env["ROTATE_STATE_DIR"]) / "runs" / run_id / "journal.jsonl"


def _frozen_at(lab: Lab, proc: subprocess.Popen[str], known: set[str], kind: str) -> str:
    """SIGSTOP the run the moment its journal shows step.start of ``kind``; its run id.
    Polled every millisecond (a step can take less than that), with a deadline."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {kind}: {proc.communicate()}")
        run_id = newest_run(lab, known)
        path = _journal(lab, run_id) if run_id else None
        if run_id and path and path.exists():
            for line in path.read_text().splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a line being written
                if rec.get("event") == "step.start" and rec.get("kind") == kind:
                    os.kill(proc.pid, signal.SIGSTOP)
                    return run_id
        time.sleep(0.001)  # polling the journal file, bounded by the deadline above
    raise AssertionError(f"the run never started {kind} within 120 s")


def _human_edit(lab: Lab, svc: str, password: str) -> dict[str, Any]:
    """A human's PUT: an owned pointer (the password) and one no credential owns (the host,
    spelled another way that resolves the same: DNS names are case-insensitive)."""
    cur = lab.bootstrap(svc)
    section = cur["value"]["dragonfly"]
    doc = {**cur["value"], "dragonfly": {**section, "password": password,
                                         "host": section["host"].capitalize()}}
    r = httpx.put(f"{lab.env['CONFIG_CENTER_URL']}/v1/services/{svc}/keys/bootstrap",
                  json={"value": doc}, timeout=10,
                  headers={"Authorization": f"Bearer {lab.env['CONFIG_CENTER_TOKEN']}",
                           "If-Match": f'"{cur["version"]}"'})
    assert r.status_code == 200, r.text
    return doc


def test_a_human_edit_before_config_write_is_never_lost(lab: Lab) -> None:
    known = set(lab.run_ids())
    proc = lab.spawn_rotate("dragonfly", "--confirm")
    # backend.write: after preflight read the documents' versions, well before the writes
    # (they run in parallel, a few ms later: a freeze at config.write may land too late)
    run_id = _frozen_at(lab, proc, known, "backend.write")
    try:
        edited = _human_edit(lab, "order", "h" * 40)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    code, out = _finish(proc)
    assert code == 13, out
    assert "order/bootstrap: /dragonfly/password" in out and "nothing written" in out
    assert lab.bootstrap("order")["value"] == edited
    again = lab.rotate("resume", run_id, "--confirm")
    assert again.code == 13 and "/dragonfly/password" in again.output, again.output
    refused = lab.rotate("rollback", run_id, "--confirm")
    assert refused.code == 3 and "order/bootstrap" in refused.output, refused.output
    assert lab.bootstrap("order")["value"] == edited  # still the human's
    forced = lab.rotate("rollback", run_id, "--confirm", "--force")
    assert forced.code == 0, forced.output
    doc = lab.bootstrap("order")["value"]
    assert doc["dragonfly"]["host"] == edited["dragonfly"]["host"]  # not owned: kept
    assert doc["dragonfly"]["password"] == lab.bao_password()
    _settled(lab)


def _revisions(lab: Lab) -> dict[str, int]:
    """Each consumer's Deployment revision: one more per rollout."""
    return {svc: lab.revision("shop", svc) for svc in BOTH}


def _rolled_once(lab: Lab, before: dict[str, int]) -> None:
    after = _revisions(lab)
    assert after == {svc: rev + 1 for svc, rev in before.items()}, (before, after)


def test_a_run_killed_mid_way_resumes_and_rolls_back_as_one_unit(lab: Lab) -> None:
    """One run of both (one journal naming both), killed (SIGKILL) once the consumers'
    rollouts began: before the restart credential's switch, after the overlap one's
    provider took both values.  The resume finishes every credential and still rolls each
    consumer — a shared one too — exactly once; the rollback puts both values back, rolling
    each consumer once more.  (One case for the three: a lab run costs a minute.)"""
    known = set(lab.run_ids())
    df0, pg0 = lab.bao_password(), _pg_login(lab)["password"]
    before = _revisions(lab)
    proc = lab.spawn_rotate("dragonfly", "postgres", "--confirm")
    run_id = _frozen_at(lab, proc, known, "consumer.restart")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert "+" in run_id
    start = lab.journal_events(run_id)[0]
    assert [m["credential"] for m in start["data"]["members"]] == ["dragonfly", "postgres"]
    resumed = lab.rotate("resume", run_id, "--confirm", "-o", "json")
    assert resumed.code == 0, resumed.output
    doc = json.loads(resumed.stdout)
    assert (doc["credential"], doc["credentials"]) == ("dragonfly+postgres",
                                                      ["dragonfly", "postgres"])
    assert all(m["backend"]["version"] for m in doc["members"])
    restarts = [s["target"] for s in doc["steps"] if s["kind"] == "consumer.restart"]
    assert sorted(restarts) == [f"deployment/shop/{svc}" for svc in BOTH]  # once each
    assert lab.bao_password() != df0 and _pg_login(lab)["password"] != pg0
    _rolled_once(lab, before)
    _settled(lab)
    rolled = _revisions(lab)
    back = lab.rotate("rollback", run_id, "--confirm")
    assert back.code == 0, back.output
    assert lab.bao_password() == df0 and _pg_login(lab)["password"] == pg0
    _rolled_once(lab, rolled)
    _settled(lab)
    assert json.loads(lab.rotate("show", run_id, "-o", "json").stdout)["status"] == "rolled-back"
