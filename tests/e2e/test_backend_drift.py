"""On the lab: a run proves at its end that OpenBao still holds its version (exit 17 when
someone wrote the path meanwhile), a value the provider cannot take is refused before
anything changes (exit 2), ``rotate status`` proves the chain closed after a rotation,
then names the Secret link (exit 20) after a hand ``bao kv put`` — writing nothing —,
and a value written by hand is adopted with ``--adopt`` (no new version), closing the
chain as ``status`` proves, and rolled back to the value it replaced.  First, ``rotate due``
lists Dragonfly due (a chain variant with a short ``maxAge``) and ``rotate due --confirm``
rotates it: then it is no longer due (nor by a ``schedule`` that fired before that run) and
``status`` proves the chain closed.

The write comes from outside, through OpenBao's HTTP API, while the run is frozen (SIGSTOP)
at ``provider.apply`` — after ``sync.wait`` proved the Secret — as a ``bao kv put`` typed
then would land.  One lab for the module; each test leaves the chain consistent.
"""

from __future__ import annotations

import json
import os
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.labtools import CONSUMERS, SHOP, Lab, newest_run
from tests.support.polling import eventually

pytestmark = pytest.mark.lab

PATH = "secret/data/infra/dragonfly"
OTHER = "put-by-hand-while-rotate-ran-0123456789"
BY_HAND = "put-by-hand-to-adopt-0123456789abcdefgh"


def _at_step(lab: Lab, run_id: str, kind: str) -> bool:
    return any(e.get("event") == "step.start" and e.get("kind") == kind
               for e in lab.journal_events(run_id))


def _put(lab: Lab, data: dict[str, str]) -> None:
    """``bao kv put`` of the path (every key given), from outside the tool."""
    res = lab.bao("POST", PATH, json={"data": data})
    assert res.status_code == 200, res.text


def _consistent(lab: Lab) -> None:
    value = lab.bao_password()
    assert lab.secret_value("dragonfly", "dragonfly-password-secret", "password") == value
    assert lab.dragonfly_auth(value)
    for svc in CONSUMERS:
        assert lab.bootstrap(svc)["value"]["dragonfly"]["password"] == value
    assert eventually(lambda: all(lab.readyz(s) == 200 for s in SHOP) or None, 90,
                      "every shop service ready")


def _chain_with(lab: Lab, name: str, line: str) -> str:
    """The lab's chain file with ``line`` added to Dragonfly's credential, in the lab DIR with
    the schemas it names beside it."""
    original = Path(lab.env["ROTATE_CHAIN"])
    folder = lab.dir / name
    folder.mkdir(exist_ok=True)
    if not (folder / "schemas").exists():
        (folder / "schemas").symlink_to(original.parent / "schemas")
    text = original.read_text()
    assert "\n  dragonfly:\n" in text
    copy = folder / "rotate.yaml"
    copy.write_text(text.replace("\n  dragonfly:\n", f"\n  dragonfly:\n    {line}\n", 1))
    return str(copy)


def test_due_lists_dragonfly_due_then_confirm_rotates_it_and_status_proves_it(lab: Lab
                                                                            ) -> None:
    # maxAge: 1s — the value is older: due, and --exit-code says so (read-only)
    short = _chain_with(lab, "due-max-age", "maxAge: 1s")
    aged = lab.rotate("due", "dragonfly", "--exit-code", "-o", "json", "--chain", short)
    assert aged.code == 21, aged.output
    (found,) = json.loads(aged.stdout)["credentials"]
    assert (found["due"], found["triggers"]) == (True, ["maxAge"]), found
    assert found["backend"]["version"] == lab.bao_version()
    listed = lab.rotate("due", "--chain", short)
    assert listed.code == 0, listed.output
    assert f"Rotate it: rotate due --confirm --chain {short}" in listed.stdout
    rows = listed.stdout.split("\n\n")[0].splitlines()[1:]  # the table, its header off
    due = [row for row in rows if row.split()[1] == "DUE"]
    assert len(due) == 1 and due[0].startswith("dragonfly "), listed.stdout  # only it
    v = lab.bao_version()
    runs = set(lab.run_ids())
    fired = datetime.now(UTC).replace(second=0, microsecond=0)  # a fire before the run
    rotated = lab.rotate("due", "--confirm", "-o", "json", "--chain", short)
    assert rotated.code == 0, rotated.output
    report = json.loads(rotated.stdout)
    assert (report["kind"], report["status"]) == ("run", "succeeded"), report
    assert newest_run(lab, runs) == report["run_id"] and lab.bao_version() == v + 1
    # afterwards: an hour's maxAge, and a yearly schedule that fired before the run, which
    # the run handled (its end read from the journals): nothing is due
    handled = _chain_with(lab, "due-handled", f"maxAge: 1h\n    schedule: \"{fired.minute} "
                                              f"{fired.hour} {fired.day} {fired.month} *\"")
    after = lab.rotate("due", "dragonfly", "--exit-code", "-o", "json", "--chain", handled)
    assert after.code == 0, after.output
    (found,) = json.loads(after.stdout)["credentials"]
    assert (found["due"], found["backend"]["version"]) == (False, v + 1), found
    assert found["last_run"] is not None and found["schedule"], found
    nothing = lab.rotate("due", "--confirm", "--chain", handled)
    assert nothing.code == 0 and "Nothing is due." in nothing.stdout, nothing.output
    assert lab.bao_version() == v + 1
    status = lab.rotate("status", "dragonfly")
    assert status.code == 0, status.output


def test_a_bao_kv_put_during_provider_apply_exits_17_then_resume_after_rollback(
        lab: Lab) -> None:
    known = set(lab.run_ids())
    v0 = lab.bao_version()
    proc = lab.spawn_rotate("dragonfly", "--confirm")
    try:
        run_id = eventually(lambda: newest_run(lab, known), 30, "the run's journal")
        eventually(lambda: _at_step(lab, run_id, "provider.apply") or None, 60,
                   "the run to reach provider.apply")
        os.kill(proc.pid, signal.SIGSTOP)
        data = lab.bao("GET", PATH).json()["data"]["data"]
        _put(lab, {**data, "password": OTHER})
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 17, out + err
    assert lab.bao_version() == v0 + 2
    assert f"this run wrote v{v0 + 1}" in err and f"current version is v{v0 + 2}" in err
    assert f"bao kv rollback -mount=secret -version={v0 + 1} infra/dragonfly" in err
    assert OTHER not in out + err
    ours = lab.bao_password(v0 + 1)
    # the provider and the documents kept the run's value: nothing was undone
    assert lab.dragonfly_auth(ours)
    assert all(lab.bootstrap(svc)["value"]["dragonfly"]["password"] == ours
               for svc in CONSUMERS)
    # the way out the message names: the run's version back as the current one, resume
    _put(lab, lab.bao("GET", f"{PATH}?version={v0 + 1}").json()["data"]["data"])
    res = lab.rotate("resume", run_id, "--confirm")
    assert res.code == 0, res.output
    assert lab.bao_version() == v0 + 3 and lab.bao_password() == ours
    _consistent(lab)


def test_an_oversized_value_is_refused_before_anything_changes(lab: Lab) -> None:
    v0 = lab.bao_version()
    runs = set(lab.run_ids())
    res = lab.rotate("dragonfly", "--confirm", "--value-stdin", stdin="x" * 65536 + "\n")
    assert res.code == 2, res.output
    assert "deployment/dragonfly/dragonfly (redis-acl)" in res.output
    assert "at most 16384 bytes" in res.output
    assert lab.bao_version() == v0 and set(lab.run_ids()) == runs
    _consistent(lab)


def _writes(lab: Lab) -> dict[tuple[str, str], int]:
    """The requests rotate made to the API server that are not reads, by verb and resource."""
    counted = lab.status()["api_requests"]["requests"]
    return {(r["verb"], r["resource"]): r["count"] for r in counted
            if r["client"] == "rotate" and r["verb"] not in ("get", "list", "watch")}


def _untouched(lab: Lab) -> dict[str, Any]:
    return {"backend": lab.bao_version(), "api": _writes(lab),
            "docs": {svc: lab.bootstrap(svc)["version"] for svc in CONSUMERS},
            "tokens": {svc: lab.cc("GET", f"/v1/services/{svc}/tokens").json()
                       for svc in CONSUMERS}}


def test_status_closed_after_a_rotation_then_the_secret_link_after_a_hand_put(
        lab: Lab) -> None:
    res = lab.rotate("dragonfly", "--confirm")
    assert res.code == 0, res.output
    before = _untouched(lab)
    closed = lab.rotate("status", "dragonfly", "-o", "json")
    assert closed.code == 0, closed.output
    doc = json.loads(closed.stdout)
    assert (doc["apiVersion"], doc["kind"], doc["closed"]) == ("rotate/v1", "status", True)
    (cred,) = doc["credentials"]
    assert cred["backend"]["version"] == before["backend"]
    assert len(cred["backend"]["fingerprint"]) == 16 and cred["broken"] is None
    proven = {link["link"] for link in cred["links"] if link["ok"]}
    assert proven >= {"backend", "secret", "externalsecret", "provider", "provider.retired",
                      "consumer.document", "consumer.pods", "consumer.readyz",
                      "consumer.token", "reader.pods", "value.age"}, cred["links"]

    data = lab.bao("GET", PATH).json()["data"]["data"]
    _put(lab, {**data, "password": OTHER})
    opened = lab.rotate("status", "dragonfly", "-o", "yaml")
    assert opened.code == 20, opened.output
    from ruamel.yaml import YAML

    doc = YAML(typ="safe").load(opened.stdout)
    assert (doc["apiVersion"], doc["kind"], doc["closed"], doc["exit_code"]) == (
        "rotate/v1", "status", False, 20)
    (cred,) = doc["credentials"]
    assert cred["broken"]["link"] == "secret"
    assert cred["broken"]["target"] == "dragonfly/dragonfly-password-secret#password"
    assert cred["command"] == "rotate dragonfly --adopt --confirm"
    assert ("the chain of dragonfly is not closed: secret "
            "dragonfly/dragonfly-password-secret#password") in opened.stderr
    assert "rotate dragonfly --adopt --confirm" in opened.stderr
    assert OTHER not in opened.output and data["password"] not in opened.output + closed.output
    # read-only: no backend write but the hand put, no write to the API server or the
    # Config Center from the two status commands
    after = _untouched(lab)
    assert after == {**before, "backend": before["backend"] + 1}

    _put(lab, data)  # the value put back: every link holds it again
    back = lab.rotate("status", "dragonfly")
    assert back.code == 0, back.output
    assert back.stdout.startswith("dragonfly: closed"), back.stdout


def test_adopt_closes_the_chain_on_a_hand_written_value_and_rolls_back(lab: Lab) -> None:
    meta = lab.bao("GET", "secret/metadata/infra/dragonfly").json()["data"]
    if "rotate-version" not in (meta.get("custom_metadata") or {}):  # run alone: seeded
        assert lab.rotate("dragonfly", "--confirm").code == 0
    before, v = lab.bao_password(), lab.bao_version()
    _put(lab, {**lab.bao("GET", PATH).json()["data"]["data"], "password": BY_HAND})
    # the plan says what adopt would do, and changes nothing
    res = lab.rotate("dragonfly", "--adopt", "-o", "json")
    assert res.code == 0, res.output
    plan = json.loads(res.stdout)
    # the chain's version: the last one rotate wrote (after a drift put back by hand, an
    # earlier one holding the same value)
    assert plan["adopt"]["version"] == v + 1 and not plan["adopt"]["noop"]
    assert lab.bao_password(plan["adopt"]["chain_version"]) == before
    kinds = [s["kind"] for s in plan["steps"]]
    assert kinds[0] == "backend.adopt" and "backend.write" not in kinds
    assert lab.dragonfly_auth(before) and not lab.dragonfly_auth(BY_HAND)
    runs = set(lab.run_ids())
    res = lab.rotate("dragonfly", "--adopt", "--confirm")
    assert res.code == 0, res.output
    assert lab.bao_version() == v + 1  # no new version
    assert lab.dragonfly_auth(BY_HAND) and not lab.dragonfly_auth(before)
    _consistent(lab)  # the Secret, every document, readyz 200: all on the adopted value
    assert BY_HAND not in res.output
    closed = lab.rotate("status", "dragonfly")  # the loop is closed again, proven link by link
    assert closed.code == 0, closed.output
    run_id = newest_run(lab, runs)
    assert run_id is not None
    # the backend now holds what the chain holds: nothing to adopt, exit 0
    again = lab.rotate("dragonfly", "--adopt", "--confirm")
    assert again.code == 0 and "Nothing to adopt" in again.output, again.output
    assert lab.bao_version() == v + 1
    # rollback restores the value adopt replaced, through the whole chain
    res = lab.rotate("rollback", run_id, "--confirm")
    assert res.code == 0, res.output
    assert lab.bao_version() == v + 2 and lab.bao_password() == before
    assert lab.dragonfly_auth(before) and not lab.dragonfly_auth(BY_HAND)
    _consistent(lab)
