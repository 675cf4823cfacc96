"""A run writes only the JSON pointers its credential owns (rotate.stages.documents).

On the fakes, "another credential's run" is another writer changing pointers dragonfly does
not own (``/postgres/...``, ``/note``) between preflight and the run's document write, or at
the very moment of it (a 412): the run merges onto that version.  A change to a pointer
dragonfly owns stops the step instead (exit 13), and its resume says what blocks it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rotate.stages import documents
from tests.fakes import World
from tests.support.engine import journal_lines, resume, rollback, run

KEY = ("order", "bootstrap")


def _other_writer(world: World, change: dict[str, Any]) -> None:
    """Write ``change`` over order's document (If-Match), keeping everything else."""
    cur = world.cc.get_key(*KEY)
    world.cc.put_key(*KEY, {**cur.value, **change}, if_match=cur.version)


def _at_put(world: World, act: Any) -> None:
    """Run ``act`` once, just before the run's first PUT of order's document lands."""
    put = world.cc.put_key
    fired: list[bool] = []

    def racing(service: str, key: str, value: Any, *, if_match: int | None) -> int:
        if (service, key) == KEY and not fired:
            fired.append(True)
            act()
        return put(service, key, value, if_match=if_match)

    world.cc.put_key = racing  # type: ignore[method-assign]


def test_owned_pointers_follow_the_templates(world: World) -> None:
    svc, cred = world.chain.services["order"], world.chain.credentials["dragonfly"]
    assert documents.owned_pointers(svc, cred.secret) == ("/dragonfly/password",
                                                          "/dragonfly/url")


def test_a_412_from_another_credentials_write_is_merged(world: World, tmp_path: Path) -> None:
    """The other writer lands between the run's read and its PUT: the PUT answers 412, the
    run reads again, finds only pointers it does not own moved, and merges."""
    _at_put(world, lambda: _other_writer(world, {"postgres": {"password": "p" * 40}}))
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    doc = world.cc.get_key(*KEY).value
    assert doc["postgres"] == {"password": "p" * 40}  # theirs kept
    new = world.vault.current("infra/dragonfly", "password")
    assert doc["dragonfly"]["password"] == new and new in doc["dragonfly"]["url"]
    step = next(s for s in report.steps
                if s.kind == "config.write" and s.target.startswith("shop/order"))
    assert "merged" in step.detail


def test_the_journal_holds_pointers_and_versions_never_values(world: World,
                                                             tmp_path: Path) -> None:
    report = run(world, tmp_path)
    lines = journal_lines(tmp_path, report.run_id)
    indexes = {s.index for s in report.steps if s.kind == "config.write"}
    writes = [ln for ln in lines if ln.get("index") in indexes and ln["event"] == "step.done"]
    assert writes and all(ln["data"]["pointers"] == ["/dragonfly/password", "/dragonfly/url"]
                          for ln in writes)
    text = json.dumps(lines)
    assert world.vault.current("infra/dragonfly", "password") not in text


def test_an_owned_pointer_moved_stops_the_write_and_resume_says_why(
    world: World, tmp_path: Path
) -> None:
    """A human changed /dragonfly/password after preflight: nothing is written to that
    document, exit 13; resume stops at the same place saying what blocks it, and goes on
    once the pointer holds what the run read again."""
    before = world.cc.get_key(*KEY)
    human = {"dragonfly": {**before.value["dragonfly"], "password": "h" * 40}}
    _at_put(world, lambda: _other_writer(world, human))
    report = run(world, tmp_path)
    assert report.exit_code == 13, report.message
    assert "order/bootstrap: /dragonfly/password" in report.message
    assert "nothing written" in report.message and "rotate resume" in report.message
    assert "put them back" in report.message and "--force" in report.message
    assert world.cc.get_key(*KEY).value["dragonfly"]["password"] == "h" * 40  # kept
    again = resume(world, tmp_path, report.run_id)
    assert again.exit_code == 13 and "/dragonfly/password" in again.message
    _other_writer(world, {"dragonfly": before.value["dragonfly"]})  # put back as it was
    done = resume(world, tmp_path, report.run_id)
    assert done.status == "succeeded", done.message
    new = world.vault.current("infra/dragonfly", "password")
    assert world.cc.get_key(*KEY).value["dragonfly"]["password"] == new


def test_rollback_after_a_refused_write_refuses_then_force_restores_only_owned(
    world: World, tmp_path: Path
) -> None:
    """Issue 29's data loss: the run's write was refused (a human changed an owned pointer);
    a rollback without --force refuses (the human's value is not the run's to drop);
    --force restores the owned pointers only, keeping the human's other edits."""
    from rotate.core.errors import PreflightFailed
    from rotate.core.waiting import CancelToken
    from tests.support.engine import RecordingObserver, options

    before = world.cc.get_key(*KEY)
    human = {"dragonfly": {**before.value["dragonfly"], "password": "h" * 40}, "note": "human"}
    _at_put(world, lambda: _other_writer(world, human))
    report = run(world, tmp_path)
    assert report.exit_code == 13
    try:
        rollback(world, tmp_path, report.run_id)
        raise AssertionError("the rollback should have refused")
    except PreflightFailed as exc:
        assert "order/bootstrap" in exc.message and "/dragonfly/password" in exc.message
    assert world.cc.get_key(*KEY).value["dragonfly"]["password"] == "h" * 40
    forced = world.engine().rollback(options(tmp_path, force=True), report.run_id,
                                     RecordingObserver(), CancelToken())
    assert forced.status == "succeeded", forced.message
    doc = world.cc.get_key(*KEY).value
    assert doc["dragonfly"] == before.value["dragonfly"] and doc["note"] == "human"


def test_rollback_of_a_run_merged_with_another_restores_only_its_pointers(
    world: World, tmp_path: Path
) -> None:
    """Both runs succeeded on order's document; rolling back the first puts its pointers back
    and keeps the other credential's value, with no --force."""
    _at_put(world, lambda: _other_writer(world, {"postgres": {"password": "p" * 40}}))
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    _other_writer(world, {"postgres": {"password": "q" * 40}})  # the other run, later
    rb = rollback(world, tmp_path, report.run_id)
    assert rb.status == "succeeded", rb.message
    doc = world.cc.get_key(*KEY).value
    old = world.vault.current("infra/dragonfly", "password")
    assert doc["postgres"] == {"password": "q" * 40}
    assert doc["dragonfly"]["password"] == old and old in doc["dragonfly"]["url"]


def test_patched_sets_and_removes_only_the_owned_pointers() -> None:
    doc = {"a": {"x": 1, "y": 2}, "b": 3}
    out = documents.patched(doc, {"/a/x": 9, "/c/z": 4}, ["/a/x", "/b", "/c/z"])
    assert out == {"a": {"x": 9, "y": 2}, "c": {"z": 4}}
    assert doc == {"a": {"x": 1, "y": 2}, "b": 3}  # not changed in place


def test_an_owned_edit_before_the_write_is_not_taken_for_the_runs(
    world: World, tmp_path: Path
) -> None:
    """The human's edit lands after preflight and before the run reads the document (no PUT
    was ever tried): the rollback must not take that edit for the run's own write."""
    from rotate.core.errors import PreflightFailed

    before = world.cc.get_key(*KEY)
    human = {"dragonfly": {**before.value["dragonfly"], "password": "h" * 40}}
    write = world.vault.write
    fired: list[bool] = []

    def edit_then_write(*a: Any, **kw: Any) -> int:
        if not fired:
            fired.append(True)
            _other_writer(world, human)
        return write(*a, **kw)

    world.vault.write = edit_then_write  # type: ignore[method-assign]
    report = run(world, tmp_path)
    assert report.exit_code == 13
    try:
        rollback(world, tmp_path, report.run_id)
        raise AssertionError("the rollback should have refused")
    except PreflightFailed as exc:
        assert "not by the run" in exc.message


def test_preflight_waits_for_a_shared_consumer_another_run_is_rolling(world: World) -> None:
    """A consumer mid-rollout under another run that holds its Lease (a credential sharing
    it) is waited for, not refused; without that run's Lease it is not healthy."""
    from datetime import UTC, datetime

    from rotate.core.refs import ObjectRef
    from rotate.engine.preflight_workloads import _after_shared_rollout
    from rotate.stages.rollout import RUN_ID_ANNOTATION

    other = "20261205T000000Z-postgres-abcd"
    ref = ObjectRef("Deployment", "shop", "order")
    rolling = world.kube.get("Deployment", "shop", "order")
    rolling["metadata"].setdefault("annotations", {})[RUN_ID_ANNOTATION] = other
    rolling["metadata"]["generation"] = rolling["metadata"].get("generation", 1) + 1
    assert _after_shared_rollout(world.chain, world.kube, ref, rolling, "rolling")[0] is False
    world.kube.put({"kind": "Lease", "metadata": {"name": "rotate-postgres",
                                                  "namespace": "rotate-system"},
                    "spec": {"holderIdentity": f"someone@host/{other}",
                             "renewTime": datetime.now(UTC).isoformat()}})
    # the stored object finished its rollout meanwhile: the wait sees it complete
    done, message = _after_shared_rollout(world.chain, world.kube, ref,
                                          {**rolling, "metadata": {**rolling["metadata"],
                                                                   "generation": 1}},
                                          "rolling")
    assert done and other in message
