"""The overlap strategy on the fakes: step order, zero cut-off, resume, rollback, preflight.

``OverlapWorld`` extends the fake shop so the provider accepts *two* values (the Secret's
``password`` and ``password_previous``, as a Redis ACL user with two passwords does) and
records every moment a consumer runs with a value the provider no longer accepts — the
failure the strategy exists to prevent.  The same world run with ``--strategy restart``
shows such a cut-off, so the check can tell the strategies apart.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rotate.chain.model import OverlapConfig, Strategy
from rotate.core.errors import PermanentError, PreflightFailed, UsageError
from rotate.core.secret import Secret
from rotate.core.waiting import CancelToken
from rotate.engine.targets import backend_target
from tests.fakes import CONSUMERS, FakeKube, World, make_chain
from tests.fakes.overlap import OLD, PATH, PREV, OverlapWorld
from tests.support.engine import RecordingObserver, journal_lines, options, resume, rollback

PHASE_1 = ["preflight", "backend.write", "sync.trigger", "sync.wait", "provider.restart",
           "provider.wait", *["token.mint"] * 3, "config.harvest", *["config.write"] * 3,
           *["consumer.restart"] * 3, *["consumer.wait"] * 3, *["readyz.check"] * 3]
PHASE_2 = ["backend.retire", "sync.wait", "provider.restart", "provider.wait"]


def _overlap_chain(tmp_path: Path, *, strategy: Strategy = "overlap",
                   previous_key: str | None = PREV) -> Any:
    chain = make_chain(tmp_path)
    cred = dataclasses.replace(
        chain.credentials["dragonfly"], strategy=strategy,
        overlap=OverlapConfig(previous_key) if previous_key else None)
    return dataclasses.replace(chain, credentials={"dragonfly": cred})


@pytest.fixture(name="ow")
def overlap_world(tmp_path: Path) -> Iterator[OverlapWorld]:
    w = OverlapWorld(_overlap_chain(tmp_path))
    w.setup()
    yield w
    w.kube.close()


def _run(w: World, tmp_path: Path, obs: RecordingObserver | None = None, **kw: Any) -> Any:
    return w.engine().run(options(tmp_path, **kw), "dragonfly", obs or RecordingObserver(),
                   CancelToken())


def _assert_finished_on(ow: OverlapWorld, value: str) -> None:
    """Backend, Secret, provider and every consumer on ``value`` and on nothing else."""
    assert ow.vault.current(PATH, "password") == value
    assert ow.vault.current(PATH, PREV) == value
    assert ow.kube.secret_value("dragonfly", "dragonfly-password-secret", PREV) == value
    assert ow.accepted() == {value}
    for name in CONSUMERS:
        assert ow.running[name] == value
        assert ow.cc.docs[(name, "bootstrap")][-1]["dragonfly"]["password"] == value


def test_overlap_order_and_nobody_is_cut_off(ow: OverlapWorld, tmp_path: Path) -> None:
    report = _run(ow, tmp_path)
    assert report.status == "succeeded", report.message
    assert [s.kind for s in report.steps] == [*PHASE_1, *PHASE_2, *["token.revoke"] * 3,
                                              "backend.confirm"]
    assert ow.cut_off == []
    new = ow.vault.current(PATH, "password")
    assert new != OLD
    # phase 1 kept the old value valid; phase 2 made a version where it is valid nowhere
    phase1 = ow.vault.versions[PATH][-2]
    assert phase1["password"] == new and phase1[PREV] == OLD
    _assert_finished_on(ow, new)
    assert ow.rollouts.count("dragonfly/dragonfly") == 2
    retire = next(s for s in report.steps if s.kind == "backend.retire")
    assert "v3 → v4" in retire.detail
    assert new not in json.dumps(journal_lines(tmp_path, report.run_id))


def test_the_same_world_with_restart_cuts_consumers_off(ow: OverlapWorld,
                                                        tmp_path: Path) -> None:
    report = _run(ow, tmp_path, strategy="restart")
    assert report.status == "succeeded", report.message
    assert "backend.retire" not in [s.kind for s in report.steps]
    assert ow.cut_off  # the provider dropped the old value before the consumers moved
    # a hard cut-over leaves no stale previous value valid either
    _assert_finished_on(ow, ow.vault.current(PATH, "password"))


def test_plan_lists_phase_two_as_its_own_phase(ow: OverlapWorld, tmp_path: Path) -> None:
    plan = ow.engine().plan(options(tmp_path), "dragonfly")
    assert plan.ok and plan.strategy == "overlap"
    kinds = [s.kind for s in plan.steps]
    assert kinds[kinds.index("backend.retire"):] == [*PHASE_2, *["token.revoke"] * 3,
                                                     "backend.confirm"]
    keys = [(s.kind, s.phase, s.subject) for s in plan.steps]
    assert len(set(keys)) == len(keys)  # phase 2 never shares a key with phase 1
    retire = plan.steps[kinds.index("backend.retire") + 1:][:3]
    assert [(s.kind, s.phase) for s in retire] == [
        ("sync.wait", "retire"), ("provider.restart", "retire"), ("provider.wait", "retire")]
    assert all(":" not in s.subject for s in plan.steps)  # no phase spelled in a subject
    assert any(c.check == "externalsecret.previous-key" and c.ok for c in plan.preflight)
    assert ow.vault.writes == 0


def test_preflight_refuses_when_the_secret_would_not_carry_the_previous_key(
    ow: OverlapWorld, tmp_path: Path
) -> None:
    es = ow.kube.raw("ExternalSecret", "dragonfly", "dragonfly-password")
    es["spec"]["data"] = es["spec"]["data"][:1]
    with pytest.raises(PreflightFailed) as exc:
        _run(ow, tmp_path)
    assert exc.value.exit_code == 3
    assert "externalsecret.previous-key" in exc.value.message
    assert ow.vault.writes == 0


def test_overlap_without_previous_key_on_a_rollout_provider_is_a_usage_error(
        tmp_path: Path) -> None:
    """The strategy rule (chain.strategy_rules.strategy_problem) at run time: exit 2, naming the
    credential, before anything is read or written."""
    w = OverlapWorld(_overlap_chain(tmp_path, strategy="restart", previous_key=None))
    w.setup()
    try:
        with pytest.raises(UsageError) as exc:
            _run(w, tmp_path, strategy="overlap")
        assert exc.value.exit_code == 2
        assert "overlap.previousKey" in exc.value.message and "'dragonfly'" in exc.value.message
        assert w.vault.writes == 0
    finally:
        w.kube.close()


def test_resume_after_a_phase_two_failure_rolls_the_provider_again(
    ow: OverlapWorld, tmp_path: Path
) -> None:
    obs = RecordingObserver()
    # phase 2's provider rollout never completes; phase 1's did
    obs.on_start["backend.retire"] = lambda step: ow.stuck.add("dragonfly")
    report = _run(ow, tmp_path, obs, timeout=0.4)
    assert report.status == "failed" and report.exit_code == 12
    failed = [s for s in report.steps if s.status == "failed"]
    assert [(s.kind, s.index) for s in failed] == [("provider.wait", len(PHASE_1) + 3)]
    assert "overlap not retired yet" not in report.message  # the backend retired it
    assert ow.vault.writes == 2
    ow.kick("dragonfly", "dragonfly")
    resumed = resume(ow, tmp_path, report.run_id)
    assert resumed.status == "succeeded", resumed.message
    assert ow.vault.writes == 2  # neither the value nor the retirement is written twice
    restart2 = [s for s in resumed.steps if s.kind == "provider.restart"][1]
    assert "generation" in restart2.detail
    assert ow.cut_off == []
    _assert_finished_on(ow, ow.vault.current(PATH, "password"))


def test_crash_after_the_retire_write_is_observed_not_rewritten(
    ow: OverlapWorld, tmp_path: Path
) -> None:
    obs = RecordingObserver()
    # set_custom_metadata: phase 1 calls it twice; the retire's second call fails after the
    # write landed — the process "dies" before the journal says done
    obs.on_start["backend.retire"] = lambda step: ow.vault.faults.arm(
        "set_custom_metadata", PermanentError("vault", "metadata", "refused"), skip=1)
    report = _run(ow, tmp_path, obs)
    assert report.exit_code == 10
    assert ow.vault.writes == 2
    resumed = resume(ow, tmp_path, report.run_id)
    assert resumed.status == "succeeded", resumed.message
    assert ow.vault.writes == 2
    retire = next(s for s in resumed.steps if s.kind == "backend.retire")
    assert "not written again" in retire.detail
    _assert_finished_on(ow, ow.vault.current(PATH, "password"))


def test_rollback_of_an_overlap_run_is_an_overlap_too(ow: OverlapWorld,
                                                      tmp_path: Path) -> None:
    report = _run(ow, tmp_path)
    assert report.status == "succeeded", report.message
    new = ow.vault.current(PATH, "password")
    ow.cut_off.clear()
    rb = rollback(ow, tmp_path, report.run_id)
    assert rb.status == "succeeded", rb.message
    kinds = [s.kind for s in rb.steps]
    assert kinds[-8:-4] == PHASE_2 and kinds[-4:] == [*["token.revoke"] * 3, "backend.confirm"]
    # the restore kept the replaced value valid while the consumers moved back
    restored = ow.vault.versions[PATH][-2]
    assert restored["password"] == OLD and restored[PREV] == new
    assert ow.cut_off == []
    _assert_finished_on(ow, OLD)
    assert ow.engine().show(options(tmp_path), report.run_id).status == "rolled-back"


def _by_hand(ow: OverlapWorld, **data: str) -> int:
    """A human's write of the path (``bao kv patch``: the keys not given are kept)."""
    vs = ow.vault.versions[PATH]
    kept = {**vs[-1], **data}
    return ow.vault.write(PATH, {k: Secret(v) for k, v in kept.items()}, cas=len(vs))


def test_adopt_under_overlap_cuts_nobody_off_and_retires_the_chain_value(
        ow: OverlapWorld, tmp_path: Path) -> None:
    assert _run(ow, tmp_path).status == "succeeded"
    held = ow.vault.current(PATH, "password")
    hand = "adopted-by-hand-0123456789abcdefghijkl"
    m = _by_hand(ow, password=hand)  # the previous key still holds the chain's value
    ow.cut_off.clear()
    report = _run(ow, tmp_path, adopt=True)
    assert report.status == "succeeded", report.message
    kinds = [s.kind for s in report.steps]
    assert kinds[1] == "backend.adopt" and "backend.write" not in kinds
    assert "backend.retire" in kinds
    assert ow.cut_off == []
    assert len(ow.vault.versions[PATH]) == m + 1  # the retire's version, nothing else
    _assert_finished_on(ow, hand)
    back = rollback(ow, tmp_path, report.run_id)
    assert back.status == "succeeded", back.message
    assert ow.cut_off == []
    _assert_finished_on(ow, held)


def test_adopt_under_overlap_needs_the_chain_value_as_the_previous_key(
        ow: OverlapWorld, tmp_path: Path) -> None:
    assert _run(ow, tmp_path).status == "succeeded"
    _by_hand(ow, password="adopted-by-hand-0123456789abcdefghijkl",
             password_previous="something-else-0123456789abcdefghijk")
    with pytest.raises(PreflightFailed, match="must hold the chain's value") as caught:
        _run(ow, tmp_path, adopt=True)
    assert "as password_previous" in caught.value.message
    assert "--strategy restart" in str(caught.value.hint)
    assert "adopted-by-hand" not in caught.value.message
    # a hard cut-over instead: the previous key must repeat the adopted value
    with pytest.raises(PreflightFailed, match="must hold the adopted value too"):
        _run(ow, tmp_path, adopt=True, strategy="restart")
    hand = _by_hand(ow, password_previous="adopted-by-hand-0123456789abcdefghijkl")
    report = _run(ow, tmp_path, adopt=True, strategy="restart")
    assert report.status == "succeeded", report.message
    assert len(ow.vault.versions[PATH]) == hand
    assert ow.accepted() == {"adopted-by-hand-0123456789abcdefghijkl"}


class CopiedOverlapWorld(OverlapWorld):
    """A further ExternalSecret of the path, ``reports/copy``, maps both keys into Secret
    ``reports/copy-secret`` (its ESO refreshes only when forced, as with a long interval)."""

    def setup(self, password: str = OLD) -> None:
        super().setup(password)
        self.kube.put({"kind": "ExternalSecret", "apiVersion": "external-secrets.io/v1",
                       "metadata": {"name": "copy", "namespace": "reports"},
                       "spec": {"target": {"name": "copy-secret"}, "data": [
                           {"secretKey": k, "remoteRef": {"key": PATH, "property": k}}
                           for k in ("password", PREV)]},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        self.kube.create_secret("reports", "copy-secret", {k: Secret(password)
                                                            for k in ("password", PREV)})

    def _eso(self, kube: FakeKube, kind: str, ns: str, name: str) -> None:
        super()._eso(kube, kind, ns, name)
        if (kind, ns, name) == ("ExternalSecret", "reports", "copy") and self.eso_mode == "ok":
            for key in ("password", PREV):
                kube.write_secret_key("reports", "copy-secret", key,
                                      Secret(self.vault.current(PATH, key)))


def test_phase_two_syncs_every_external_secret_of_the_path_again(tmp_path: Path) -> None:
    """The retire's new version reaches every copy of the path: a further ExternalSecret is
    forced and proven in phase 2 too, so its Secret's previous key no longer holds the old
    value; a rollback does the same."""
    chain = _overlap_chain(tmp_path)
    from rotate.chain.sections import WorkloadConsumers
    w = CopiedOverlapWorld(dataclasses.replace(chain, workload_consumers=WorkloadConsumers(
        ("reports",))))
    w.setup()
    try:
        report = _run(w, tmp_path)
        assert report.status == "succeeded", report.message
        kinds = [s.kind for s in report.steps if s.target == "reports/copy"]
        assert kinds == ["sync.trigger", "sync.wait", "sync.wait"], kinds  # phase 1, phase 2
        order = [(s.kind, s.target) for s in report.steps]
        assert len(order) - 1 - order[::-1].index(("sync.wait", "reports/copy")) > order.index(
            ("backend.retire", backend_target(chain, chain.credentials["dragonfly"])))
        new = w.vault.current(PATH, "password")
        assert w.kube.secret_value("reports", "copy-secret", PREV) == new
        back = rollback(w, tmp_path, report.run_id)
        assert back.status == "succeeded", back.message
        assert w.kube.secret_value("reports", "copy-secret", PREV) == OLD
        assert w.kube.secret_value("reports", "copy-secret", "password") == OLD
    finally:
        w.kube.close()
