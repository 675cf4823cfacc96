"""The fault matrix's cases come from the plans, not from a list kept in the harness."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from bench.fault_matrix import (
    INTO_MS,
    READ_ONLY,
    Outcome,
    Spec,
    matrix,
    outcomes_of,
    paired,
    plan_kinds,
    select,
    table,
)


def _plan(*kinds: str) -> dict[str, Any]:
    return {"kind": "plan", "steps": [{"index": i, "kind": k} for i, k in enumerate(kinds, 1)]}


LIVE = _plan("backend.write", "sync.trigger", "sync.wait", "config.harvest", "config.write",
             "config.write", "token.mint", "consumer.restart", "provider.apply",
             "provider.verify", "consumer.wait", "readyz.check", "token.revoke")
ROLLED = _plan("backend.write", "sync.trigger", "sync.wait", "provider.restart",
               "provider.wait", "config.harvest", "config.write", "token.mint",
               "consumer.restart", "consumer.wait", "readyz.check", "backend.retire",
               "sync.wait", "provider.restart", "provider.wait", "token.revoke")


def test_plan_kinds_are_distinct_in_run_order() -> None:
    assert plan_kinds(LIVE)[:5] == ["backend.write", "sync.trigger", "sync.wait",
                                    "config.harvest", "config.write"]
    assert plan_kinds(LIVE).count("config.write") == 1


def test_every_plan_kind_is_signalled_with_both_recoveries() -> None:
    specs = matrix({"a": LIVE, "b": ROLLED}, "a", "b")
    for kind in plan_kinds(LIVE):
        for sig in ("kill", "term"):
            hows = {s.recovery for s in specs if s.disturbance == "signal"
                    and s.credential == "a" and s.kind == kind and s.sig == sig
                    and s.delay_ms == 0}
            assert hows == {"resume", "rollback"}, (kind, sig)


def test_only_state_changing_kinds_are_signalled_into_the_step() -> None:
    specs = matrix({"a": LIVE, "b": ROLLED}, "a", "b")
    into = {s.kind for s in specs if s.delay_ms == INTO_MS}
    assert {"backend.write", "provider.apply", "token.revoke"} <= into
    assert not into & {"sync.wait", "provider.verify", "consumer.wait", "readyz.check"}


def test_a_new_kind_in_the_plan_is_in_the_matrix_without_a_harness_change() -> None:
    specs = matrix({"a": _plan("backend.write", "brand.new"), "b": ROLLED}, "a", "b")
    assert {s.delay_ms for s in specs if s.kind == "brand.new"} == {0, INTO_MS}


def test_the_other_credential_covers_the_kinds_the_first_lacks() -> None:
    specs = matrix({"a": LIVE, "b": ROLLED}, "a", "b")
    other = {s.kind for s in specs if s.credential == "b" and s.disturbance == "signal"}
    assert other == {"provider.restart", "provider.wait", "backend.retire"}


def test_every_lab_fault_before_and_during_with_both_recoveries() -> None:
    specs = matrix({"a": LIVE, "b": ROLLED}, "a", "b")
    faults = {(s.fault, s.disturbance, s.recovery) for s in specs if s.fault}
    assert len(faults) == 8 * 2 * 2 + 2  # seven lab faults and portforward-drop, then
    # list-forbidden, before the run only (discovery is preflight's)
    assert ("list-forbidden", "fault-during", "resume") not in faults
    assert all(s.kind in plan_kinds(LIVE) for s in specs if s.disturbance == "fault-during")


def test_shared_provider_and_human_restarts_are_in_the_matrix() -> None:
    names = [s.name for s in matrix({"a": LIVE, "b": ROLLED}, "a", "b")]
    assert any("both credentials at once" in n for n in names)
    assert any("human restart shop/cart" in n for n in names)


def test_a_backend_write_after_the_sync_and_an_oversized_value_are_in_the_matrix() -> None:
    names = [s.name for s in matrix({"a": LIVE, "b": ROLLED}, "a", "b")]
    assert "backend write after sync.wait (at provider.apply) → resume" in names
    assert "backend write after sync.wait (at provider.apply) → rollback" in names
    assert "oversized value (--value-stdin, 64 KiB) → resume" in names
    rolled_only = [s.name for s in matrix({"a": ROLLED, "b": ROLLED}, "a", "b")]
    assert not any("backend write" in n or "oversized" in n for n in rolled_only)


def test_shards_partition_the_selection() -> None:
    specs = matrix({"a": LIVE, "b": ROLLED}, "a", "b")
    one, two = select(specs, None, (1, 2)), select(specs, None, (2, 2))
    assert sorted(map(str, one + two)) == sorted(map(str, specs))
    assert all("kill" in s.name for s in select(specs, ["kill"], (1, 1)))


def test_table_names_the_inconsistent_cases() -> None:
    good = Outcome(Spec("signal", "a", "resume", kind="k", sig="kill").name, [-9, 0])
    bad = Outcome("x", [1], problems=["Secret differs from OpenBao"])
    text = table([good, bad])
    assert "| kill at k → resume | -9, 0 |" in text
    assert text.endswith("1/2 consistent; inconsistent: x")


def test_a_written_outcome_reads_back_for_merging_shards() -> None:
    bad = Outcome("x", [-9, 0], "step.start k#3", ["Secret differs from OpenBao"], 12.0)
    doc = {"cases": [{**asdict(bad), "consistent": bad.consistent}]}
    assert outcomes_of(json.loads(json.dumps(doc))) == [bad]


def test_merged_shards_put_resume_and_rollback_of_a_disturbance_together() -> None:
    names = ["kill at a → resume", "kill at b → resume", "kill at a → rollback",
             "kill at b → rollback"]
    assert [o.name for o in paired([Outcome(n) for n in names])] == [
        "kill at a → resume", "kill at a → rollback", "kill at b → resume",
        "kill at b → rollback"]


def test_torn_journals_and_lock_take_overs_come_from_the_plan() -> None:
    specs = matrix({"a": LIVE, "b": ROLLED}, "a", "b")
    torn = {(s.kind, s.recovery) for s in specs if s.disturbance == "torn"}
    assert {k for k, _ in torn} == {k for k in plan_kinds(LIVE) if k not in READ_ONLY}
    assert {h for _, h in torn} == {"resume", "rollback"}
    taken = {(s.kind, s.recovery) for s in specs if s.disturbance == "takeover"}
    assert taken == {(k, h) for k in ("provider.verify", "readyz.check")
                     for h in ("resume", "rollback")}
    names = [s.name for s in specs]
    assert "kill at backend.write + torn journal record → rollback" in names
    assert "lock taken over at readyz.check → resume" in names
    assert len(names) == len(set(names))


def test_credentials_sharing_consumers_and_a_human_edit_are_in_the_matrix() -> None:
    plans = {"a": LIVE, "b": ROLLED, "pg": _plan("backend.write", "config.write")}
    names = [s.name for s in matrix(plans, "a", "b", sharing="pg")]
    assert "a and pg sharing consumers, at once → resume" in names
    assert "a and pg sharing consumers, pg 150 ms later → resume" in names
    assert "a and pg sharing consumers, pg 500 ms later → resume" in names
    assert "human edit of order's document at backend.write → resume" in names
    assert "human edit of order's document at backend.write → rollback" in names
    assert not [n for n in matrix({"a": LIVE, "b": ROLLED}, "a", "b") if "sharing" in n.name]


def test_values_rotate_did_not_write_are_in_the_matrix() -> None:
    """--adopt with nothing to adopt, --adopt after a bao kv put killed at two kinds, and a
    Secret edited by hand at two kinds — the last two recovered both ways."""
    names = [s.name for s in matrix({"a": LIVE, "b": ROLLED}, "a", "b")]
    assert "--adopt with nothing to adopt → resume" in names
    for kind in ("sync.trigger", "provider.apply"):
        for how in ("resume", "rollback"):
            assert f"kill at {kind} of --adopt after a bao kv put → {how}" in names
    for kind in ("sync.wait", "provider.apply"):
        for how in ("resume", "rollback"):
            assert f"Secret edited by hand at {kind} → {how}" in names
    assert len(set(names)) == len(names)
