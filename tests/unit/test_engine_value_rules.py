"""A value rotate accepts is one every provider takes: each method declares its ValueRule,
and a generated or supplied value outside it is refused before anything is contacted (exit
2).  A rollback whose restore the provider refuses for good stops with exit 18 and the way
out, and its resume says the same — instead of exit 12 on every resume.

The fake Redis refuses an AUTH argument over 16384 bytes as Redis does ("Protocol error:
unauthenticated bulk length", translated by the adapter to a PermanentError)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rotate.chain.model import (
    AdminAuth,
    Chain,
    Generate,
    ProviderApply,
    ProviderConnection,
    ServicePortRef,
)
from rotate.clients.seams import ReadyzTarget
from rotate.core.errors import UsageError
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from rotate.core.strategy import Strategy
from rotate.core.waiting import CancelToken
from rotate.engine.model import RunReport
from rotate.providers.method import ValueRule
from rotate.providers.postgres_roles import PostgresRolesMethod
from rotate.providers.redis_acl import RedisAclMethod
from tests.fakes import World, make_chain
from tests.fakes.providers import FakeAclUser
from tests.support.engine import RecordingObserver, options, resume

OLD = "old-password-0123456789abcdefghijklmn"
DRAGONFLY = ObjectRef("Deployment", "dragonfly", "dragonfly")
OVERSIZED = "x" * 65536  # what rotate's own stdin check lets through (64 KiB)


class AclWorld(World):
    """The fake shop with Dragonfly's ``default`` user changed live (``apply: redis-acl``)."""

    def setup(self, password: str = OLD) -> None:
        super().setup(password)
        self.kube.raw("Service", "dragonfly", "dragonfly")["spec"]["clusterIP"] = "10.0.0.7"
        self.connector.redis.users["default"] = FakeAclUser([password])

    def _readyz(self, target: ReadyzTarget) -> int:
        """Ready while the provider accepts the password of the document it started with."""
        doc_password = self.running.get(target.service)
        if doc_password is not None and not self.connector.redis.accepts(
                "default", Secret(doc_password)):
            return 503
        return 200


def _acl_chain(tmp_path: Path, generate: Generate | None = None) -> Chain:
    chain = make_chain(tmp_path)
    cred = dataclasses.replace(chain.credentials["dragonfly"], applies=(ProviderApply(
        DRAGONFLY, "redis-acl",
        ProviderConnection("redis", ServicePortRef("dragonfly", "dragonfly", 6379)),
        user="default", admin=AdminAuth("default")),))
    if generate is not None:
        cred = dataclasses.replace(cred, generate=generate)
    return dataclasses.replace(chain, credentials={"dragonfly": cred})


@pytest.fixture
def world(tmp_path: Path) -> AclWorld:
    w = AclWorld(_acl_chain(tmp_path))
    w.setup()
    return w


def _run(world: World, tmp_path: Path, value: str | None, **kw: object) -> RunReport:
    return world.engine().run(options(tmp_path, strategy=Strategy.restart, **kw), "dragonfly",
                              RecordingObserver(), CancelToken(),
                              Secret(value) if value is not None else None)


def test_the_builtin_methods_declare_honest_limits() -> None:
    assert RedisAclMethod.values.max_bytes == 16384
    assert PostgresRolesMethod.values.max_bytes == 65530
    assert RedisAclMethod.values.refuses(Secret("é" * 8192)) is None  # 16384 bytes
    assert "16384 bytes" in str(RedisAclMethod.values.refuses(Secret("é" * 8193)))


def test_a_rule_never_quotes_the_value() -> None:
    rule = ValueRule(max_length=10, alphabet="abc")
    assert rule.refuses(Secret("abcabcabca")) is None
    why = rule.refuses(Secret("abcSECRETx"))
    assert why is not None and "SECRET" not in why and "position 4" in why
    assert "at most 10 characters" in str(rule.refuses(Secret("a" * 11)))


def test_an_oversized_supplied_value_is_refused_before_anything_is_changed(
        world: AclWorld, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        _run(world, tmp_path, OVERSIZED)
    message = caught.value.message
    assert caught.value.exit_code == 2
    assert "deployment/dragonfly/dragonfly (redis-acl)" in message
    assert "at most 16384 bytes" in message and "65536" in message
    assert "unauthenticated" in message and OVERSIZED not in message
    assert world.vault.writes == 0
    assert world.connector.redis.users["default"].passwords == [OLD]
    assert not (tmp_path / "state" / "runs").exists() or not any(
        (tmp_path / "state" / "runs").iterdir())


def test_a_generate_the_provider_cannot_take_is_refused_in_the_plan_too(
        tmp_path: Path) -> None:
    w = AclWorld(_acl_chain(tmp_path, Generate(length=20000, alphabet="alnum")))
    w.setup()
    with pytest.raises(UsageError, match=r"generate does not fit.*16384"):
        w.engine().plan(options(tmp_path), "dragonfly")
    with pytest.raises(UsageError, match=r"generate\.length is 20000"):
        _run(w, tmp_path, None)
    assert w.vault.writes == 0


def test_a_refused_restore_stops_the_rollback_with_18_and_its_resume_says_the_same(
        world: AclWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's run: an oversized value from before the rule existed fails at
    provider.apply (the provider cannot even be asked with it); its rollback must present
    it again as the admin candidate and the replaced value."""
    monkeypatch.setattr(RedisAclMethod, "values", ValueRule())  # a run before the rule
    report = _run(world, tmp_path, OVERSIZED, timeout=0.5)  # "unreachable" till the deadline
    assert report.exit_code == 12, report.message
    monkeypatch.undo()
    rb = world.engine().rollback(options(tmp_path), report.run_id, RecordingObserver(),
                                 CancelToken())
    assert rb.status == "rollback-failed"
    assert rb.exit_code == 18
    failed = [s for s in rb.steps if s.status == "failed"]
    assert [(s.kind, s.seconds is not None and s.seconds < 5) for s in failed] == [
        ("provider.apply", True)]
    assert "refuses the rollback's restore for good" in rb.message
    assert "the value the rolled-back run wrote is one it cannot take" in rb.message
    assert "`rotate dragonfly --confirm --force`" in rb.message
    assert "Resume the rollback" not in rb.message
    assert OVERSIZED not in rb.message
    again = resume(world, tmp_path, rb.run_id)
    assert again.exit_code == 18
    assert "refuses the rollback's restore for good" in again.message
    # the way out it names: a rotation from the restored value
    fresh = world.engine().run(options(tmp_path, force=True), "dragonfly",
                               RecordingObserver(), CancelToken())
    assert fresh.status == "succeeded", fresh.message
    assert world.connector.redis.users["default"].passwords == [
        world.vault.current("infra/dragonfly", "password")]
