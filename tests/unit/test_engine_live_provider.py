"""Live providers (``apply: redis-acl``, ``apply: postgres``) through the real Engine on the
fakes: the kinds
provider.apply / provider.verify / provider.retire act, observe and undo on the provider's
own (fake) ACL — never a provider rollout — and resume repeats none of them twice.

``LiveWorld`` is the fake shop whose Dragonfly takes its passwords over the admin connection
(FakeConnector's Redis server, user ``default``, the credential itself as admin); a consumer
is ready only while that server accepts the password of the document it started with.
``PgLiveWorld`` is the same with FakeConnector's PostgreSQL (one login role, SCRAM verifiers).
The alternating-users scheme is covered at stage level (tests/providers/test_stages.py) and
end to end (tests/e2e/test_live_providers.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rotate.chain.model import (
    AdminAuth,
    Chain,
    ProviderApply,
    ProviderConnection,
    ServicePortRef,
    Strategy,
)
from rotate.clients.seams import ReadyzTarget
from rotate.core.observation import Observation
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from rotate.core.waiting import CancelToken
from rotate.engine.model import RunReport
from tests.fakes import CONSUMERS, World, make_chain
from tests.fakes.providers import FakeAclUser
from tests.support.engine import RecordingObserver, options, resume, rollback

OLD = "old-password-0123456789abcdefghijklmn"
DRAGONFLY = ObjectRef("Deployment", "dragonfly", "dragonfly")


class LiveWorld(World):
    def setup(self, password: str = OLD) -> None:
        super().setup(password)
        self.kube.raw("Service", "dragonfly", "dragonfly")["spec"]["clusterIP"] = "10.0.0.7"
        self.connector.redis.users["default"] = FakeAclUser([password])

    def _readyz(self, target: ReadyzTarget) -> int:
        name = target.service
        doc_password = self.running.get(name)
        if doc_password is not None and not self.connector.redis.accepts(
                "default", Secret(doc_password)):
            return 503
        token = self.running.get(f"{name}#token")
        if token is not None and not self.cc.valid_token(name, token):
            return 503
        return 200

    def passwords(self) -> list[str]:
        return list(self.connector.redis.users["default"].passwords)


def _live_chain(tmp_path: Path, method: str, user: str) -> Chain:
    """The fake world's chain with its ``dragonfly`` credential applied live by ``method``
    as ``user`` (who is also the admin: rotate authenticates with the current value)."""
    chain = make_chain(tmp_path)
    cred = dataclasses.replace(chain.credentials["dragonfly"], applies=(ProviderApply(
        DRAGONFLY, method,
        ProviderConnection(method.split("-")[0], ServicePortRef("dragonfly", "dragonfly", 6379)),
        user=user, admin=AdminAuth(user)),))
    return dataclasses.replace(chain, credentials={"dragonfly": cred})


@pytest.fixture
def world(tmp_path: Path) -> LiveWorld:
    w = LiveWorld(_live_chain(tmp_path, "redis-acl", "default"))
    w.setup()
    return w


def _run(world: LiveWorld, tmp_path: Path, strategy: Strategy,
         cancel: CancelToken | None = None,
         observer: RecordingObserver | None = None, timeout: float | None = None
         ) -> RunReport:
    return world.engine().run(options(tmp_path, strategy=strategy, timeout=timeout), "dragonfly",
                              observer or RecordingObserver(), cancel or CancelToken())


def _stopped_at(kind: str, world: LiveWorld, tmp_path: Path, strategy: Strategy
                ) -> RunReport:
    """A run interrupted (SIGINT's CancelToken) as its first step of ``kind`` starts."""
    cancel, observer = CancelToken(), RecordingObserver()
    observer.on_start[kind] = lambda _step: cancel.cancel()
    return _run(world, tmp_path, strategy, cancel, observer)


def _new(world: LiveWorld) -> str:
    return world.vault.current("infra/dragonfly", "password")


def test_overlap_adds_then_retires_and_never_rolls_the_provider(world: LiveWorld,
                                                                tmp_path: Path) -> None:
    report = _run(world, tmp_path, Strategy.overlap)
    assert report.exit_code == 0, report.message
    kinds = [s.kind for s in report.steps]
    assert kinds.index("provider.apply") < kinds.index("provider.verify") \
        < kinds.index("config.write") < kinds.index("provider.retire")
    assert "provider.restart" not in kinds
    assert "dragonfly/dragonfly" not in world.rollouts
    assert world.passwords() == [_new(world)]  # old removed at the end
    assert all(world.running[c] == _new(world) for c in CONSUMERS)


def _behind_the_service(world: LiveWorld) -> None:
    """Endpoints naming the pod behind Dragonfly's Service (what the endpoints controller
    writes): where a run from outside the cluster port-forwards to."""
    world.kube.put({"kind": "Endpoints", "metadata": {"name": "dragonfly",
                                                      "namespace": "dragonfly"},
                    "subsets": [{"addresses": [{"ip": "10.1.0.5", "targetRef": {
                        "kind": "Pod", "namespace": "dragonfly", "name": "dragonfly-0"}}],
                                 "ports": [{"port": 6379}]}]})


def test_from_outside_the_cluster_the_provider_is_port_forwarded_to(
        world: LiveWorld, tmp_path: Path) -> None:
    """No KUBERNETES_SERVICE_HOST, no addressEnv: every step reaches Dragonfly through the
    port-forward to the pod behind its Service, and the run closes the forwards at its end."""
    _behind_the_service(world)
    report = world.engine(environ={}).run(options(tmp_path, strategy=Strategy.overlap),
                                          "dragonfly", RecordingObserver(), CancelToken())
    assert report.exit_code == 0, report.message
    assert set(world.kube.forwards) == {("dragonfly", "dragonfly-0", 6379)}
    assert world.kube.forwards_closed >= 1
    assert world.passwords() == [_new(world)]


def test_preflight_checks_the_port_forward_permission_only_from_outside(
        world: LiveWorld, tmp_path: Path) -> None:
    _behind_the_service(world)
    world.kube.denied.add(("create", "Pod", "dragonfly"))  # create pods/portforward
    outside = world.engine(environ={}).plan(options(tmp_path), "dragonfly")
    refused = [c for c in outside.preflight if not c.ok]
    assert [c.check for c in refused] == ["kubernetes.permissions"]
    assert "create pods/portforward in dragonfly" in refused[0].detail
    assert world.kube.forwards_closed >= 1  # the plan's own logins closed too
    inside = world.engine().plan(options(tmp_path), "dragonfly")
    assert all(c.ok for c in inside.preflight), inside.preflight


def test_restart_on_redis_acl_swaps_at_once(world: LiveWorld, tmp_path: Path) -> None:
    report = _run(world, tmp_path, Strategy.restart)
    assert report.exit_code == 0, report.message
    kinds = [s.kind for s in report.steps]
    assert "provider.retire" not in kinds and "provider.restart" not in kinds
    assert world.passwords() == [_new(world)]


def test_verify_fails_with_12_when_the_provider_does_not_take_the_value(
        world: LiveWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ACL that silently drops the new password: provider.verify refuses, exit 12, and no
    consumer document was written (they still work on the old value)."""
    from tests.fakes.providers import FakeRedisAcl

    monkeypatch.setattr(FakeRedisAcl, "add_password", lambda self, user, pw: None)
    monkeypatch.setattr(FakeRedisAcl, "set_only_password", lambda self, user, pw: None)
    report = _run(world, tmp_path, Strategy.overlap, timeout=1.0)  # verify retries till then
    assert report.exit_code == 12, report.message
    failed = [s.kind for s in report.steps if s.status == "failed"]
    assert failed == ["provider.verify"]
    assert world.passwords() == [OLD]
    assert all(world.running[c] == OLD for c in CONSUMERS)
    assert all(world.cc.docs[(c, "bootstrap")][-1]["dragonfly"]["password"] == OLD
               for c in CONSUMERS)


def test_resume_after_an_interrupt_at_provider_apply_repeats_nothing(
        world: LiveWorld, tmp_path: Path) -> None:
    first = _stopped_at("provider.verify", world, tmp_path, Strategy.overlap)  # apply is done
    assert first.exit_code == 130, first.message
    assert world.passwords() == [OLD, _new(world)]  # applied: both valid, nothing retired
    versions = len(world.vault.versions["infra/dragonfly"])

    done = resume(world, tmp_path, first.run_id)
    assert done.exit_code == 0, done.message
    assert len(world.vault.versions["infra/dragonfly"]) == versions  # no second value
    assert world.passwords() == [_new(world)]
    assert all(world.running[c] == _new(world) for c in CONSUMERS)


def test_a_run_stopped_after_the_live_switch_says_the_provider_switched(
        world: LiveWorld, tmp_path: Path) -> None:
    """The failure message tells a provider changed live from one that rolled: Dragonfly
    never rolls here, and after the swap the consumers' old pods are refused."""
    report = _stopped_at("consumer.wait", world, tmp_path, Strategy.restart)  # after the switch
    assert report.exit_code == 130, report.message
    assert world.passwords() == [_new(world)]
    msg = report.message
    assert "deployment/dragonfly/dragonfly takes the new value (changed live, verified)" in msg
    assert "not rolled" not in msg
    assert "which the provider refuses since the switch" in msg
    assert "old pods serve until they are" not in msg


def test_a_run_stopped_in_the_live_switch_says_the_provider_may_have_changed(
        world: LiveWorld, tmp_path: Path) -> None:
    # provider.apply started: the journal cannot tell whether the swap happened
    report = _stopped_at("provider.apply", world, tmp_path, Strategy.restart)
    assert report.exit_code == 130, report.message
    msg = report.message
    assert "deployment/dragonfly/dragonfly may have been changed live" in msg
    assert "which the provider may refuse now" in msg


def test_a_run_stopped_before_the_live_switch_says_the_provider_is_unchanged(
        world: LiveWorld, tmp_path: Path) -> None:
    world.unstarted.add("order")  # a prepared pod that never starts: exit 15, undone
    report = _run(world, tmp_path, Strategy.restart, timeout=0.5)
    assert report.exit_code == 15, report.message
    assert world.passwords() == [OLD]
    msg = report.message
    assert "deployment/dragonfly/dragonfly not changed yet (takes the old value)" in msg
    assert "not rolled" not in msg and "refuses" not in msg


def test_a_stopped_overlap_run_says_the_provider_still_takes_the_old_value(
        world: LiveWorld, tmp_path: Path) -> None:
    report = _stopped_at("config.write", world, tmp_path, Strategy.overlap)  # before the retire
    assert report.exit_code == 130, report.message
    assert world.passwords() == [OLD, _new(world)]
    assert ("deployment/dragonfly/dragonfly takes the new value (changed live, verified), "
            "and still the old one until provider.retire") in report.message


def test_rollback_of_a_live_run_restores_the_old_password(world: LiveWorld,
                                                          tmp_path: Path) -> None:
    report = _run(world, tmp_path, Strategy.overlap)
    assert report.exit_code == 0, report.message
    new = _new(world)
    back = rollback(world, tmp_path, report.run_id)
    assert back.exit_code == 0, back.message
    assert world.passwords() == [OLD]
    assert new not in world.passwords()
    assert all(world.running[c] == OLD for c in CONSUMERS)


def _reasons(world: LiveWorld, ref: ObjectRef) -> list[tuple[str, str]]:
    return [(e.type, e.reason) for e in world.kube.kube_events if e.involved == ref]


def test_a_live_change_is_told_on_the_providers_workload(world: LiveWorld,
                                                         tmp_path: Path) -> None:
    """A provider changed live never rolls, yet each change leaves a Normal event naming the
    run on its workload (``kubectl describe deploy/dragonfly``) — a rollback's too."""
    report = _run(world, tmp_path, Strategy.overlap)
    assert report.exit_code == 0, report.message
    assert _reasons(world, DRAGONFLY) == [("Normal", "ProviderApplied"),
                                          ("Normal", "PreviousValueRetired"),
                                          ("Normal", "CredentialRotated")]
    told = [e for e in world.kube.kube_events if e.involved == DRAGONFLY]
    assert all(report.run_id in e.message and e.instance == report.run_id for e in told)
    assert [e.action for e in told[:2]] == ["provider.apply", "provider.retire"]
    assert _new(world) not in " ".join(e.message for e in told)
    world.kube.kube_events.clear()
    back = rollback(world, tmp_path, report.run_id)
    assert back.exit_code == 0, back.message
    assert _reasons(world, DRAGONFLY) == [("Normal", "ProviderRestored"),
                                          ("Normal", "ReplacedValueRetired"),
                                          ("Normal", "RolledBack")]


def test_a_provider_that_refuses_the_value_is_a_warning_on_its_workload(
        world: LiveWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes.providers import FakeRedisAcl

    monkeypatch.setattr(FakeRedisAcl, "set_only_password", lambda self, user, pw: None)
    report = _run(world, tmp_path, Strategy.restart, timeout=1.0)
    assert report.exit_code == 12, report.message
    assert _reasons(world, DRAGONFLY) == [("Normal", "ProviderApplied"),
                                          ("Warning", "StepFailed"),
                                          ("Warning", "RotationFailed")]


# --------------------------------------------------------------------------- postgres


class PgLiveWorld(LiveWorld):
    """The same shop with a provider changed by ``apply: postgres`` (one login role ``app``,
    the credential itself as admin: a role may set its own password)."""

    def setup(self, password: str = OLD) -> None:
        World.setup(self, password)
        self.kube.raw("Service", "dragonfly", "dragonfly")["spec"]["clusterIP"] = "10.0.0.7"
        self.connector.postgres.add_role("app", password)

    def _readyz(self, target: ReadyzTarget) -> int:
        doc_password = self.running.get(target.service)
        if doc_password is not None and not self.connector.postgres.accepts(
                "app", Secret(doc_password)):
            return 503
        return 200


@pytest.fixture
def pg_world(tmp_path: Path) -> PgLiveWorld:
    w = PgLiveWorld(_live_chain(tmp_path, "postgres", "app"))
    w.setup()
    return w


def test_postgres_cut_sends_a_verifier_then_resume_and_rollback(pg_world: PgLiveWorld,
                                                                tmp_path: Path) -> None:
    server = pg_world.connector.postgres
    first = _stopped_at("provider.verify", pg_world, tmp_path, Strategy.restart)  # apply is done
    assert first.exit_code == 130, first.message
    new = _new(pg_world)
    assert server.accepts("app", Secret(new)) and not server.accepts("app", Secret(OLD))
    assert len(server.statements) == 1  # one ALTER ROLE ... PASSWORD 'SCRAM-SHA-256$...'
    assert "SCRAM-SHA-256$" in server.statements[0] and new not in server.statements[0]

    done = resume(pg_world, tmp_path, first.run_id)
    assert done.exit_code == 0, done.message
    assert len(server.statements) == 1  # observed as applied: not sent again
    assert "provider.restart" not in [s.kind for s in done.steps]
    assert all(pg_world.running[c] == new for c in CONSUMERS)

    back = rollback(pg_world, tmp_path, first.run_id)
    assert back.exit_code == 0, back.message
    assert server.accepts("app", Secret(OLD)) and not server.accepts("app", Secret(new))
    assert all(pg_world.running[c] == OLD for c in CONSUMERS)


def test_overlap_retires_only_once_the_old_pods_have_exited(world: LiveWorld,
                                                             tmp_path: Path) -> None:
    """A consumer's previous pod still Terminating (draining requests with the old value):
    consumer.wait reports it and waits, so provider.retire starts only once it is gone."""
    world.kube.raw("Deployment", "shop", "cart")["spec"]["selector"] = {
        "matchLabels": {"app": "cart"}}
    world.kube.put({"kind": "Pod", "metadata": {
        "name": "cart-old", "namespace": "shop", "labels": {"app": "cart"},
        "deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30}})
    old_pod = ("Pod", "shop", "cart-old")
    seen: list[str] = []
    at_retire: list[bool] = []

    def exits(step: object, observation: Observation) -> None:
        seen.append(observation.detail)
        if "terminating" in observation.detail and old_pod in world.kube.objects:
            world.kube.delete(*old_pod)

    observer = RecordingObserver()
    observer.on_observe["consumer.wait"] = exits
    observer.on_start["provider.retire"] = lambda step: at_retire.append(
        old_pod in world.kube.objects)
    report = _run(world, tmp_path, Strategy.overlap, observer=observer)
    assert report.exit_code == 0, report.message
    assert "1 old pod terminating (cart-old)" in seen
    assert at_retire == [False]
    [wait] = [s for s in report.steps if s.kind == "consumer.wait" and "cart" in s.target]
    assert "no old pod left" in wait.detail
