"""``rotate CREDENTIAL --adopt``: the backend holds a value no rotate run wrote (a ``bao kv
put`` by hand); the run carries it through the chain with no new version, and its rollback
puts back the value the chain held before (cli.md, rotate.engine.adoption)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rotate.chain.model import AdminAuth, ProviderApply, ProviderConnection, ServicePortRef
from rotate.clients.seams import ReadyzTarget
from rotate.core.errors import NothingToAdopt, PreflightFailed, UsageError
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from rotate.core.strategy import Strategy
from rotate.core.waiting import CancelToken
from rotate.engine.model import PlannedStep, RunReport
from tests.fakes import World, make_chain
from tests.fakes.providers import FakeAclUser
from tests.support.engine import (
    RecordingObserver,
    journal_lines,
    options,
    resume,
    rollback,
    run,
)

PATH = "infra/dragonfly"
BY_HAND = "written-by-hand-0123456789abcdefghijklmn"
DRAGONFLY = ObjectRef("Deployment", "dragonfly", "dragonfly")


def _adopt(world: World, tmp_path: Path, observer: RecordingObserver | None = None,
           **kw: object) -> RunReport:
    return world.engine().run(options(tmp_path, adopt=True, **kw), "dragonfly",
                              observer or RecordingObserver(), CancelToken())


def _by_hand(world: World, value: str = BY_HAND, **more: str) -> int:
    """A ``bao kv put`` of the path (its other keys kept, as ``bao kv patch``): the new
    version."""
    vs = world.vault.versions[PATH]
    data = {**{k: Secret(v) for k, v in vs[-1].items()}, "password": Secret(value),
            **{k: Secret(v) for k, v in more.items()}}
    return world.vault.write(PATH, data, cas=len(vs))


def _holds(world: World, value: str) -> None:
    """The Secret, the provider and every consumer hold ``value``."""
    assert world.kube.secret_value("dragonfly", "dragonfly-password-secret", "password") \
        == value
    assert world.running["dragonfly"] == value
    for name in ("cart", "order", "user"):
        assert world.cc.docs[(name, "bootstrap")][-1]["dragonfly"]["password"] == value
        assert world.running[name] == value


def test_nothing_to_adopt_after_a_rotation_is_a_no_op(world: World, tmp_path: Path) -> None:
    assert run(world, tmp_path).status == "succeeded"
    n, writes = len(world.vault.versions[PATH]), world.vault.writes
    plan = world.engine().plan(options(tmp_path, adopt=True), "dragonfly")
    assert plan.ok and plan.steps == ()
    assert plan.adopt is not None and plan.adopt.noop
    assert plan.to_json()["adopt"] == {"version": n, "chain_version": n, "noop": True,
                                       "detail": plan.adopt.detail}
    with pytest.raises(NothingToAdopt) as caught:
        _adopt(world, tmp_path)
    assert caught.value.exit_code == 0
    assert "nothing to adopt" in caught.value.message and f"v{n}" in caught.value.message
    assert (len(world.vault.versions[PATH]), world.vault.writes) == (n, writes)
    assert len(list((tmp_path / "state" / "runs").iterdir())) == 1  # no run journaled


def test_a_hand_write_of_the_same_value_is_nothing_to_adopt(world: World,
                                                            tmp_path: Path) -> None:
    assert run(world, tmp_path).status == "succeeded"
    _by_hand(world, world.vault.current(PATH, "password"))  # e.g. `bao kv rollback`
    plan = world.engine().plan(options(tmp_path, adopt=True), "dragonfly")
    assert plan.adopt is not None and plan.adopt.noop and plan.steps == ()
    assert "holds the value rotate wrote" in plan.adopt.detail


def test_a_path_rotate_never_wrote_is_refused(world: World, tmp_path: Path) -> None:
    _by_hand(world)
    with pytest.raises(PreflightFailed, match="no rotate run ever wrote infra/dragonfly"):
        world.engine().plan(options(tmp_path, adopt=True), "dragonfly")
    assert world.running["dragonfly"] != BY_HAND


def test_adopt_and_a_value_on_stdin_exclude_each_other(world: World, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="use one of them"):
        world.engine().run(options(tmp_path, adopt=True), "dragonfly", RecordingObserver(),
                           CancelToken(), Secret("another-value-0123456789"))


def test_adopt_carries_the_hand_value_with_no_new_version(world: World,
                                                          tmp_path: Path) -> None:
    assert run(world, tmp_path).status == "succeeded"
    chain_version = len(world.vault.versions[PATH])
    m = _by_hand(world)
    plan = world.engine().plan(options(tmp_path, adopt=True), "dragonfly")
    kinds = [s.kind for s in plan.steps]
    assert kinds[0] == "backend.adopt" and "backend.write" not in kinds
    assert kinds[-1] == "backend.confirm"
    assert f"adopt v{m}" in plan.steps[0].detail and f"v{chain_version}" in plan.steps[0].detail
    writes = world.vault.writes
    report = _adopt(world, tmp_path)
    assert report.status == "succeeded", report.message
    assert world.vault.writes == writes and len(world.vault.versions[PATH]) == m
    assert report.backend["previous_version"] == chain_version
    assert report.backend["version"] == m
    _holds(world, BY_HAND)
    assert BY_HAND not in json.dumps(journal_lines(tmp_path, report.run_id))
    # the adopted value is the chain's now: adopting again is a no-op
    with pytest.raises(NothingToAdopt):
        _adopt(world, tmp_path)


def test_rollback_of_an_adopt_run_restores_what_it_replaced(world: World,
                                                           tmp_path: Path) -> None:
    assert run(world, tmp_path).status == "succeeded"
    before = world.vault.current(PATH, "password")
    m = _by_hand(world)
    report = _adopt(world, tmp_path)
    assert report.status == "succeeded", report.message
    back = rollback(world, tmp_path, report.run_id)
    assert back.status == "succeeded", back.message
    assert back.steps[0].kind == "backend.write"
    assert len(world.vault.versions[PATH]) == m + 1  # the chain's value written back
    assert world.vault.current(PATH, "password") == before
    assert world.vault.versions[PATH][m - 1]["password"] == BY_HAND  # history kept
    _holds(world, before)


def test_a_write_after_the_plan_fails_the_adopt_step_and_changes_nothing(
        world: World, tmp_path: Path) -> None:
    assert run(world, tmp_path).status == "succeeded"
    before = world.vault.current(PATH, "password")
    m = _by_hand(world)
    obs = RecordingObserver()

    def another(step: PlannedStep) -> None:
        _by_hand(world, "another-hand-write-0123456789abcdef")

    obs.on_start["backend.adopt"] = another
    report = _adopt(world, tmp_path, obs)
    assert report.exit_code == 10
    assert f"moved from {m} to {m + 1}" in report.message
    _holds(world, before)


def test_an_interrupted_adopt_resumes_without_a_new_version(world: World,
                                                           tmp_path: Path) -> None:
    assert run(world, tmp_path).status == "succeeded"
    m = _by_hand(world)
    cancel = CancelToken()
    obs = RecordingObserver()
    obs.on_finish["sync.wait"] = lambda step, record: cancel.cancel("test")
    report = world.engine().run(options(tmp_path, adopt=True), "dragonfly", obs, cancel)
    assert report.status == "interrupted"
    # half-way: the metadata still names the version the provider and consumers hold
    assert world.vault.custom[PATH]["rotate-version"] == str(m - 1)
    done = resume(world, tmp_path, report.run_id)
    assert done.status == "succeeded", done.message
    assert len(world.vault.versions[PATH]) == m
    assert world.vault.custom[PATH]["rotate-version"] == str(m)
    _holds(world, BY_HAND)


class AclWorld(World):
    """The fake shop with Dragonfly's ``default`` user changed live (``apply: redis-acl``):
    a consumer is ready while the provider accepts its document's password."""

    def setup(self, password: str = "old-password-0123456789abcdefghijklmn") -> None:
        super().setup(password)
        self.kube.raw("Service", "dragonfly", "dragonfly")["spec"]["clusterIP"] = "10.0.0.7"
        self.connector.redis.users["default"] = FakeAclUser([password])

    def _readyz(self, target: ReadyzTarget) -> int:
        doc_password = self.running.get(target.service)
        if doc_password is not None and not self.connector.redis.accepts(
                "default", Secret(doc_password)):
            return 503
        return 200


@pytest.fixture
def acl(tmp_path: Path) -> AclWorld:
    chain = make_chain(tmp_path)
    cred = dataclasses.replace(chain.credentials["dragonfly"], applies=(ProviderApply(
        DRAGONFLY, "redis-acl",
        ProviderConnection("redis", ServicePortRef("dragonfly", "dragonfly", 6379)),
        user="default", admin=AdminAuth("default")),))
    w = AclWorld(dataclasses.replace(chain, credentials={"dragonfly": cred}))
    w.setup()
    return w


@pytest.mark.parametrize("strategy", [Strategy.restart, Strategy.overlap])
def test_a_live_provider_is_moved_off_the_chain_value(acl: AclWorld, tmp_path: Path,
                                                      strategy: Strategy) -> None:
    """Under overlap the chain's value is retired at the end, and under restart refused at
    once: either way it is known — the version rotate wrote last."""
    assert run(acl, tmp_path, strategy=strategy).status == "succeeded"
    chain_value = acl.vault.current(PATH, "password")
    m = _by_hand(acl)
    report = _adopt(acl, tmp_path, strategy=strategy)
    assert report.status == "succeeded", report.message
    kinds = [s.kind for s in report.steps]
    assert ("provider.retire" in kinds) == (strategy == Strategy.overlap)
    assert acl.connector.redis.users["default"].passwords == [BY_HAND]
    assert chain_value != BY_HAND and len(acl.vault.versions[PATH]) == m
    back = rollback(acl, tmp_path, report.run_id)
    assert back.status == "succeeded", back.message
    assert acl.connector.redis.users["default"].passwords == [chain_value]


def test_a_value_the_provider_cannot_take_is_refused_before_anything(
        acl: AclWorld, tmp_path: Path) -> None:
    assert run(acl, tmp_path, strategy=Strategy.restart).status == "succeeded"
    _by_hand(acl, "x" * 20000)
    writes = acl.vault.writes
    with pytest.raises(UsageError) as caught:
        _adopt(acl, tmp_path, strategy=Strategy.restart)
    assert caught.value.exit_code == 2
    assert "the backend's v" in caught.value.message and "16384" in caught.value.message
    assert "x" * 100 not in caught.value.message
    assert acl.vault.writes == writes


def test_after_exit_17_adopt_with_force_keeps_the_other_write(world: World,
                                                              tmp_path: Path) -> None:
    """The way exit 17 names to keep the other value: the drifted run is left unfinished
    (``--force``) and the other write's value is carried through the chain."""
    obs = RecordingObserver()
    done: list[bool] = []

    def put(step: PlannedStep) -> None:
        if not done:
            done.append(True)
            _by_hand(world)

    obs.on_start["provider.restart"] = put
    drifted = run(world, tmp_path, obs)
    assert drifted.exit_code == 17
    assert "rotate dragonfly --adopt --confirm --force" in drifted.message
    m = len(world.vault.versions[PATH])
    with pytest.raises(PreflightFailed, match=r"runs\.unfinished"):
        _adopt(world, tmp_path)
    report = _adopt(world, tmp_path, force=True)
    assert report.status == "succeeded", report.message
    assert len(world.vault.versions[PATH]) == m
    _holds(world, BY_HAND)
