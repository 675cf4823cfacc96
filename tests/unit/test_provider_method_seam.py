"""The provider method seam (rotate.providers) from outside: a method rotate does not ship,
registered under a new ``apply:`` name, is what the real Engine plans, preflights, applies,
proves, retires and rolls back with — through the public surface only (``register``,
``ProviderMethod``, ``Target``, ``Change``, ``Link``), no rotate code patched.

The stub keeps an account's passwords in a set, the way an ACL user does; its probe and
admin session read and change that set.  A consumer is ready only while the stub accepts the
password of the document it started with, so the run's order is proven by the consumers'
readiness, not by the stub's call list alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotate.chain.model import AdminAuth, ProviderApply, ProviderConnection, ServicePortRef
from rotate.clients.provider_seams import AuthProbe
from rotate.clients.seams import Endpoint, ReadyzTarget
from rotate.core.errors import ForbiddenError, PermanentError, UsageError
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from rotate.core.strategy import Strategy
from rotate.core.waiting import CancelToken
from rotate.providers import (
    Change,
    Link,
    MethodSpec,
    Progress,
    ProviderMethod,
    Target,
    ValueRule,
    method_of,
    register,
    unregister,
)
from tests.fakes import CONSUMERS, World, make_chain
from tests.support.engine import RecordingObserver, options, rollback

NAME = "stub-acl"


def spec(factory: object) -> MethodSpec:
    """The stub's declaration: an ACL-like account holding several passwords."""
    return MethodSpec(NAME, protocol="redis", factory=factory,  # type: ignore[arg-type]
                      default_port=6379, default_admin_user="default", default_user="default",
                      holds_two_values=True)
OLD = "old-password-0123456789abcdefghijklmn"
DRAGONFLY = ObjectRef("Deployment", "dragonfly", "dragonfly")


class StubServer:
    """An account → its passwords."""

    def __init__(self) -> None:
        self.passwords: dict[str, set[str]] = {"default": {OLD}}
        self.calls: list[str] = []
        self.endpoints: list[Endpoint] = []

    def accepts(self, user: str, password: Secret) -> bool:
        return password.reveal() in self.passwords.get(user, set())


class StubProbe:
    def __init__(self, server: StubServer, endpoint: Endpoint) -> None:
        self.server, self._endpoint = server, endpoint

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    def accepts(self, user: str, password: Secret) -> bool:
        return self.server.accepts(user, password)


class StubSession:
    def __init__(self, server: StubServer) -> None:
        self.server = server
        self.closed = False

    def add(self, user: str, password: Secret) -> None:
        self.server.passwords[user].add(password.reveal())

    def remove(self, user: str, password: Secret) -> None:
        self.server.passwords[user].discard(password.reveal())

    def close(self) -> None:
        self.closed = True


class StubMethod:
    """A method written against rotate.providers only, as a plug-in would be."""

    values = ValueRule()
    restart_hint = "restarts do not change stub passwords: use apply: stub-acl"

    def __init__(self, server: StubServer) -> None:
        self.server = server

    def describe_apply(self, applied: ProviderApply, *, overlap: bool) -> str:
        return "stub: add the new password" if overlap else "stub: swap the password"

    def describe_retire(self, applied: ProviderApply) -> str:
        return "stub: remove the old password"

    def retires_replaced(self, applied: ProviderApply) -> bool:
        return True

    def open_probe(self, link: Link) -> StubProbe:
        self.server.endpoints.append(link.endpoint)
        return StubProbe(self.server, link.endpoint)

    def open_admin(self, link: Link, user: str, password: Secret) -> StubSession:
        if not self.server.accepts(user, password):
            raise ForbiddenError("stub", f"connect as {user}", "refused")
        return StubSession(self.server)

    def preflight(self, admin: StubSession, probe: AuthProbe, target: Target) -> str:
        self.server.calls.append("preflight")
        if not probe.accepts(target.accounts.old, target.old):
            raise PermanentError("stub", "login", "refuses the current value")
        return "stub account ready"

    def apply(self, admin: StubSession, probe: AuthProbe, target: Target,
              progress: Progress) -> Change:
        self.server.calls.append("apply")
        user = target.accounts.new
        if probe.accepts(user, target.new):
            return Change(False, "already applied")
        if target.strategy != "overlap":
            admin.remove(target.accounts.old, target.old)
        admin.add(user, target.new)
        return Change(True, "stub: new password added")

    def retire(self, admin: StubSession, probe: AuthProbe, target: Target) -> Change:
        self.server.calls.append("retire")
        admin.remove(target.accounts.old, target.old)
        return Change(True, "stub: old password removed")

    def restore(self, admin: StubSession, probe: AuthProbe, target: Target) -> Change:
        self.server.calls.append("restore")
        admin.add(target.accounts.old, target.old)
        return Change(True, "stub: old password back")

    def retire_replaced(self, admin: StubSession, probe: AuthProbe, target: Target) -> Change:
        self.server.calls.append("retire_replaced")
        admin.remove(target.accounts.new, target.new)
        return Change(True, "stub: replaced password removed")


def _typed(method: StubMethod) -> ProviderMethod[StubSession]:
    return method  # mypy proves the stub implements the Protocol


class StubWorld(World):
    stub: StubServer

    def _readyz(self, target: ReadyzTarget) -> int:
        password = self.running.get(target.service)
        if password is not None and not self.stub.accepts("default", Secret(password)):
            return 503
        token = self.running.get(f"{target.service}#token")
        if token is not None and not self.cc.valid_token(target.service, token):
            return 503
        return 200


@pytest.fixture
def stub() -> Iterator[StubServer]:
    server = StubServer()
    register(spec(lambda: _typed(StubMethod(server))))
    try:
        yield server
    finally:
        unregister(NAME)


@pytest.fixture
def world(tmp_path: Path, stub: StubServer) -> Iterator[StubWorld]:
    chain = make_chain(tmp_path)
    applied = ProviderApply(
        DRAGONFLY, NAME,
        ProviderConnection("redis", ServicePortRef("dragonfly", "dragonfly", 6379)),
        user="default", admin=AdminAuth("default"))
    cred = dataclasses.replace(chain.credentials["dragonfly"], applies=(applied,))
    w = StubWorld(dataclasses.replace(chain, credentials={"dragonfly": cred}))
    w.stub = stub
    w.setup(OLD)
    w.kube.raw("Service", "dragonfly", "dragonfly")["spec"]["clusterIP"] = "10.0.0.7"
    yield w
    w.kube.close()


def _new(world: World) -> str:
    return world.vault.current("infra/dragonfly", "password")


def test_a_registered_name_gives_its_own_object() -> None:
    method = StubMethod(StubServer())
    register(spec(lambda: _typed(method)))
    try:
        assert method_of(NAME) is _typed(method)
        with pytest.raises(ValueError, match="registered already"):
            register(spec(lambda: _typed(method)))
    finally:
        unregister(NAME)
    with pytest.raises(PermanentError, match="no installed package provides it"):
        method_of(NAME)


def test_the_plan_is_worded_by_the_method(world: StubWorld, tmp_path: Path) -> None:
    plan = world.engine().plan(options(tmp_path, strategy=Strategy.overlap), "dragonfly")
    details = {(s.kind, s.phase): s.detail for s in plan.steps}
    assert details[("provider.apply", "main")] == f"{NAME}: stub: add the new password"
    assert details[("provider.retire", "main")] == f"{NAME}: stub: remove the old password"
    access = [c for c in plan.preflight if c.check.startswith("provider.access")]
    assert [(c.ok, c.detail) for c in access] == [(True, "stub account ready")]


def test_the_engine_rotates_and_rolls_back_through_the_registered_method(
        world: StubWorld, stub: StubServer, tmp_path: Path) -> None:
    report = world.engine().run(options(tmp_path, strategy=Strategy.overlap), "dragonfly",
                                RecordingObserver(), CancelToken())
    assert report.exit_code == 0, report.message
    kinds = [s.kind for s in report.steps]
    assert kinds.index("provider.apply") < kinds.index("provider.verify") \
        < kinds.index("config.write") < kinds.index("provider.retire")
    assert "provider.restart" not in kinds and "dragonfly/dragonfly" not in world.rollouts
    assert stub.calls == ["preflight", "apply", "retire"]
    assert stub.passwords["default"] == {_new(world)}
    assert all(world.running[c] == _new(world) for c in CONSUMERS)
    # every attempt reached the provider at the Service's ClusterIP
    assert stub.endpoints and set(stub.endpoints) == {Endpoint("10.0.0.7", 6379)}

    new = _new(world)
    back = rollback(world, tmp_path, report.run_id)
    assert back.exit_code == 0, back.message
    assert stub.calls[3:] == ["restore", "retire_replaced"]
    assert stub.passwords["default"] == {OLD} and new != OLD
    assert all(world.running[c] == OLD for c in CONSUMERS)


def test_each_attempt_reads_the_providers_service_once(
        world: StubWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The endpoint is resolved once per attempt and shared by its probe and admin session."""
    reads: list[str] = []
    current = [""]
    get = world.kube.get

    def counting(kind: str, namespace: str | None, name: str) -> dict[str, object]:
        if (kind, namespace, name) == ("Service", "dragonfly", "dragonfly"):
            reads.append(current[0])
        return get(kind, namespace, name)

    monkeypatch.setattr(world.kube, "get", counting)
    observer = RecordingObserver()
    for kind in ("provider.apply", "provider.retire"):
        observer.on_start[kind] = lambda step: current.__setitem__(0, step.kind)
        observer.on_finish[kind] = lambda step, record: current.__setitem__(0, "")
    report = world.engine().run(options(tmp_path, strategy=Strategy.overlap), "dragonfly",
                                observer, CancelToken())
    assert report.exit_code == 0, report.message
    assert reads.count("provider.apply") == 1
    assert reads.count("provider.retire") == 1


def test_preflight_refuses_values_the_method_does_not_take(world: StubWorld,
                                                           tmp_path: Path) -> None:
    """Before anything is contacted, as bad input (exit 2), naming provider and rule."""
    method = method_of(NAME)
    method.values = ValueRule(max_length=8)
    with pytest.raises(UsageError, match=rf"\({NAME}\): the provider takes at most 8 "):
        world.engine().plan(options(tmp_path, strategy=Strategy.overlap), "dragonfly")
    method.values = ValueRule(alphabet="abc")
    with pytest.raises(UsageError, match="alphabet"):
        world.engine().plan(options(tmp_path, strategy=Strategy.overlap), "dragonfly")


class RaisingMethod(StubMethod):
    """A plug-in whose apply fails with its own exception, after adding the new password."""

    def apply(self, admin: StubSession, probe: AuthProbe, target: Target,
              progress: Progress) -> Change:
        super().apply(admin, probe, target, progress)
        raise RuntimeError(f"driver said: password {target.new.reveal()} rejected")


def test_a_plugin_that_raises_fails_its_step_without_its_text_then_rolls_back(
        world: StubWorld, stub: StubServer, tmp_path: Path) -> None:
    unregister(NAME)
    register(dataclasses.replace(spec(lambda: RaisingMethod(stub)),
                                 package="rotate-provider-stub"))
    report = world.engine().run(options(tmp_path, strategy=Strategy.overlap), "dragonfly",
                                RecordingObserver(), CancelToken())
    new = _new(world)
    assert report.exit_code == 12, report.message
    assert "plug-in rotate-provider-stub" in report.message
    assert "raised RuntimeError" in report.message and new not in report.message
    assert "State now:" in report.message and f"rotate rollback {report.run_id}" \
        in report.message
    back = rollback(world, tmp_path, report.run_id)
    assert back.exit_code == 0, back.message
    assert stub.passwords["default"] == {OLD}
    assert all(world.running[c] == OLD for c in CONSUMERS)
