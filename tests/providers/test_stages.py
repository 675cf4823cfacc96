"""The built-in provider methods (rotate.providers: RedisAclMethod, PostgresRolesMethod) and
their access and proofs, on real servers and on the fakes: every act observes first (resume
may repeat it), every proof is a fresh AUTH/login from outside, every undo restores the old
password."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from rotate.chain.model import (
    AdminAuth,
    ProviderApply,
    ProviderConnection,
    SecretKeyRef,
    ServicePortRef,
)
from rotate.clients.seams import Endpoint
from rotate.core.errors import NotFoundError, PermanentError, RejectedError
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret, generate
from rotate.core.waiting import Deadline
from rotate.providers import Accounts, Target, access
from rotate.providers.accounts import accounts_for, active_username
from rotate.providers.postgres_roles import PostgresRolesMethod
from rotate.providers.proof import ProviderProofFailed, prove
from rotate.providers.redis_acl import RedisAclMethod
from tests.fakes.kube_reads import StubKube
from tests.support.provider_worlds import PgWorld, RedisWorld, unique

DRAGONFLY = ObjectRef("Deployment", "dragonfly", "dragonfly")
POSTGRES = ObjectRef("StatefulSet", "db", "postgres")
CRED_SECRET = SecretKeyRef("dragonfly", "dragonfly-password-secret", "password")
REDIS = RedisAclMethod()
PG = PostgresRolesMethod()


class Progress:
    """A step's journal as a method sees it (rotate.providers.Progress)."""

    def __init__(self) -> None:
        self.prior: dict[str, Any] = {}
        self.records: list[dict[str, Any]] = []

    def record(self, **data: Any) -> None:
        self.records.append(data)
        self.prior.update(data)


def redis_apply(user: str, method: str = "redis-acl") -> ProviderApply:
    conn = ProviderConnection("redis", ServicePortRef("dragonfly", "dragonfly", 6379))
    admin = AdminAuth(user) if method != "rollout" else None
    return ProviderApply(DRAGONFLY, method, conn, user=user, admin=admin)  # type: ignore[arg-type]


def pg_apply(*, user: str | None = None, users: tuple[str, str] | None = None,
             method: str = "postgres") -> ProviderApply:
    conn = ProviderConnection("postgres", ServicePortRef("db", "postgres", 5432))
    admin = AdminAuth("postgres", SecretKeyRef("db", "pg-admin", "password"))
    return ProviderApply(POSTGRES, method, conn, user=user, users=users,  # type: ignore[arg-type]
                         username_key="username" if users else None,
                         admin=admin if method != "rollout" else None)


def soon() -> Deadline:
    return Deadline.after(5)


def briefly() -> Deadline:
    """For proofs that must fail: nothing will change, so a short deadline suffices."""
    return Deadline.after(0.3)


# --------------------------------------------------------------------------- redis-acl


def test_redis_overlap_apply_retire_and_undo(redis_world: RedisWorld) -> None:
    w = redis_world
    user, old, new = unique("app"), generate(), generate()
    w.create_user(user, [old.reveal()])
    applied = redis_apply(user)
    acc = accounts_for(applied, "overlap", None)
    target = Target(applied, acc, old, new, "overlap")
    assert "1 password(s)" in REDIS.preflight(w.admin, w.probe, target)

    assert REDIS.apply(w.admin, w.probe, target, Progress()).changed
    assert not REDIS.apply(w.admin, w.probe, target, Progress()).changed  # resume
    prove(w.probe, applied, acc, old, new, phase="overlap", deadline=soon())
    assert REDIS.retire(w.admin, w.probe, target).changed
    assert not REDIS.retire(w.admin, w.probe, target).changed
    prove(w.probe, applied, acc, old, new, phase="retired", deadline=soon())

    # the rollback: the old value valid again, then the replaced (new) one valid nowhere
    assert REDIS.restore(w.admin, w.probe, target).changed
    assert w.probe.accepts(user, old) and w.probe.accepts(user, new)
    assert REDIS.retire_replaced(w.admin, w.probe, target).changed
    assert not REDIS.retire_replaced(w.admin, w.probe, target).changed
    assert w.probe.accepts(user, old) and not w.probe.accepts(user, new)


def test_redis_restart_swaps_the_default_user_with_itself_as_admin(
        redis_world: RedisWorld) -> None:
    """The admin is the credential itself: the old value before the swap, the new one after
    (a resumed run connects with whichever works)."""
    w = redis_world
    old = Secret("admin-password-0123456789")
    new = generate()
    applied = redis_apply("default")
    assert applied.admin_is_credential(CRED_SECRET)
    acc = accounts_for(applied, "restart", None)
    target = Target(applied, acc, old, new, "restart")
    candidates = (old, new)
    admin = access.connect_first(lambda pw: w.connect("default", pw), candidates)
    assert REDIS.apply(admin, w.probe, target, Progress()).changed
    prove(w.probe, applied, acc, old, new, phase="cut", deadline=soon())
    resumed = access.connect_first(lambda pw: w.connect("default", pw), candidates)
    assert not REDIS.apply(resumed, w.probe, target, Progress()).changed
    assert REDIS.restore(resumed, w.probe, target).changed
    assert REDIS.retire_replaced(resumed, w.probe, target).changed
    assert w.probe.accepts("default", old) and not w.probe.accepts("default", new)


def test_redis_preflight_refuses_a_nopass_user(redis_world: RedisWorld) -> None:
    if redis_world.kind == "real":
        import redis as redis_py

        probe_ep = redis_world.probe.endpoint
        with redis_py.Redis(host=probe_ep.host, port=probe_ep.port,
                            password="admin-password-0123456789") as r:
            r.execute_command("ACL", "SETUSER", "open", "on", "nopass", "~*", "+@read")
    else:
        redis_world.create_user("open", [])
        redis_world.admin._check("open").nopass = True  # type: ignore[attr-defined]
    applied = redis_apply("open")
    target = Target(applied, accounts_for(applied, "overlap", None), generate(), generate())
    with pytest.raises(PermanentError, match="nopass"):
        REDIS.preflight(redis_world.admin, redis_world.probe, target)


def test_redis_preflight_refuses_when_the_provider_has_another_value(
        redis_world: RedisWorld) -> None:
    user = unique("app")
    redis_world.create_user(user, [generate().reveal()])
    applied = redis_apply(user)
    target = Target(applied, accounts_for(applied, "overlap", None), generate(), generate())
    with pytest.raises(PermanentError, match="refuses the current value"):
        REDIS.preflight(redis_world.admin, redis_world.probe, target)


# --------------------------------------------------------------------------- postgres


def test_postgres_single_role_cut_and_undo(pg_world: PgWorld) -> None:
    w = pg_world
    role, old, new = unique("shop"), generate(), generate()
    w.create_role(role, old.reveal())
    applied = pg_apply(user=role)
    acc = accounts_for(applied, "restart", None)
    target = Target(applied, acc, old, new, "restart")
    assert role in PG.preflight(w.admin, w.probe, target)
    assert PG.apply(w.admin, w.probe, target, Progress()).changed
    assert not PG.apply(w.admin, w.probe, target, Progress()).changed
    prove(w.probe, applied, acc, old, new, phase="cut", deadline=soon())
    assert not PG.retires_replaced(applied)  # restoring the verifier is the whole undo
    assert PG.restore(w.admin, w.probe, target).changed
    assert not PG.restore(w.admin, w.probe, target).changed
    assert w.probe.accepts(role, old) and not w.probe.accepts(role, new)
    assert new.reveal() not in w.statements() and old.reveal() not in w.statements()


def test_postgres_alternating_users(pg_world: PgWorld) -> None:
    w = pg_world
    group, a, b = unique("grp"), unique("shop_a"), unique("shop_b")
    old, new = generate(), generate()
    w.create_role(a, old.reveal(), member_of=(group,))
    w.create_role(b, None, login=False, member_of=(group,))
    applied = pg_apply(users=(a, b))
    acc = accounts_for(applied, "overlap", None)  # no username yet: the first is active
    assert (acc.old, acc.new) == (a, b)
    target = Target(applied, acc, old, new, "overlap")
    PG.preflight(w.admin, w.probe, target)

    progress = Progress()
    assert PG.apply(w.admin, w.probe, target, progress).changed
    assert progress.records == [{"role": b, "could_login": False}]  # before the change
    assert not PG.apply(w.admin, w.probe, target, progress).changed
    assert len(progress.records) == 1  # a resumed attempt keeps the first record
    prove(w.probe, applied, acc, old, new, phase="overlap", deadline=soon())
    assert PG.retire(w.admin, w.probe, target).changed
    assert not PG.retire(w.admin, w.probe, target).changed
    prove(w.probe, applied, acc, old, new, phase="retired", deadline=soon())
    # the next rotation starts from b
    assert accounts_for(applied, "overlap", b) == Accounts(new=a, old=b)

    assert PG.retires_replaced(applied)
    assert PG.restore(w.admin, w.probe, target).changed
    assert PG.retire_replaced(w.admin, w.probe, target).changed
    assert w.probe.accepts(a, old) and not w.probe.accepts(b, new)
    assert not w.admin.role(b).can_login
    assert new.reveal() not in w.statements() and old.reveal() not in w.statements()


def test_postgres_preflight_refuses_roles_with_different_grants(pg_world: PgWorld) -> None:
    w = pg_world
    a, b = unique("shop_a"), unique("shop_b")
    old = generate()
    w.create_role(a, old.reveal(), member_of=(unique("grp"),))
    w.create_role(b, None, login=False)
    applied = pg_apply(users=(a, b))
    target = Target(applied, accounts_for(applied, "overlap", a), old, generate())
    with pytest.raises(PermanentError, match="same grants"):
        PG.preflight(w.admin, w.probe, target)


def test_postgres_preflight_refuses_a_missing_role(pg_world: PgWorld) -> None:
    applied = pg_apply(user=unique("ghost"))
    target = Target(applied, accounts_for(applied, "restart", None), generate(), generate())
    with pytest.raises(NotFoundError, match="creates nothing"):
        PG.preflight(pg_world.admin, pg_world.probe, target)


# --------------------------------------------------------------------------- verify fails


def test_verify_fails_for_a_provider_that_still_holds_the_old_password(
        pg_world: PgWorld) -> None:
    """apply: rollout on PostgreSQL: the restart changed nothing, the role keeps its old
    password.  provider.verify says so, names the likely cause, and leaks nothing."""
    w = pg_world
    role, old, new = unique("shop"), generate(), generate()
    w.create_role(role, old.reveal())
    applied = pg_apply(user=role, method="rollout")
    acc = accounts_for(applied, "restart", None)
    with pytest.raises(ProviderProofFailed) as info:
        prove(w.probe, applied, acc, old, new, phase="cut", deadline=briefly())
    err = info.value
    assert f"{role} refuses the new value" in err.message
    assert err.hint is not None and "apply: postgres" in err.hint and "initdb" in err.hint
    assert new.reveal() not in err.message and old.reveal() not in err.message


def test_verify_of_a_hard_cut_fails_while_the_old_value_still_works(
        redis_world: RedisWorld) -> None:
    w = redis_world
    user, old, new = unique("app"), generate(), generate()
    w.create_user(user, [old.reveal(), new.reveal()])
    applied = redis_apply(user, method="rollout")
    acc = accounts_for(applied, "restart", None)
    with pytest.raises(ProviderProofFailed, match="still accepts the old value") as info:
        prove(w.probe, applied, acc, old, new, phase="cut", deadline=briefly())
    assert info.value.hint is not None and "apply: redis-acl" in info.value.hint


# --------------------------------------------------------------------------- set-up (pure)


def test_accounts_for_alternating_users() -> None:
    applied = pg_apply(users=("app_a", "app_b"))
    assert accounts_for(applied, "overlap", "app_b") == Accounts("app_a", "app_b")
    assert accounts_for(applied, "restart", "app_b") == Accounts("app_b", "app_b")
    with pytest.raises(PermanentError, match="not one of users"):
        accounts_for(applied, "overlap", "intruder")


def test_resolve_endpoint_inside_the_cluster() -> None:
    conn = ProviderConnection("redis", ServicePortRef("dragonfly", "dragonfly", "redis"),
                              address_env="DF_ADDR")
    inside = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    svc = {"spec": {"clusterIP": "10.0.0.7", "ports": [{"name": "redis", "port": 6379}]}}
    kube: Any = StubKube({("Service", "dragonfly", "dragonfly"): svc})
    assert access.resolve_endpoint(kube, conn, inside) == Endpoint("10.0.0.7", 6379)
    assert access.resolve_endpoint(kube, conn, {"DF_ADDR": "127.0.0.1:16379"}) \
        == Endpoint("127.0.0.1", 16379)
    with pytest.raises(RejectedError):
        access.resolve_endpoint(kube, conn, {"DF_ADDR": "no-port"})
    headless = {"spec": {"clusterIP": "None",
                         "ports": [{"name": "redis", "port": 6379, "targetPort": 7000}]}}
    eps = {"subsets": [{"addresses": [{"ip": "127.5.0.3"}]}]}
    kube = StubKube({("Service", "dragonfly", "dragonfly"): headless,
                     ("Endpoints", "dragonfly", "dragonfly"): eps})
    assert access.resolve_endpoint(kube, conn, inside) == Endpoint("127.5.0.3", 7000)
    assert kube.forwards == []


def _pod_address(ip: str, pod: str) -> dict[str, Any]:
    return {"ip": ip, "targetRef": {"kind": "Pod", "namespace": "db", "name": pod}}


def test_resolve_endpoint_outside_the_cluster_port_forwards_to_a_ready_pod() -> None:
    """No KUBERNETES_SERVICE_HOST, no addressEnv: the ClusterIP is not routable from here, so
    rotate port-forwards to a ready pod behind the Service, on the pod's port for the
    Service port (a named targetPort resolved by the endpoints controller)."""
    conn = ProviderConnection("postgres", ServicePortRef("db", "postgres", 5432),
                              address_env="PG_ADDR")
    svc = {"spec": {"clusterIP": "10.0.0.9", "ports": [
        {"name": "metrics", "port": 9187, "targetPort": 9187},
        {"name": "postgres", "port": 5432, "targetPort": "postgres"}]}}
    eps = {"subsets": [{"addresses": [_pod_address("127.5.1.4", "postgres-0")],
                        "notReadyAddresses": [_pod_address("127.5.1.5", "postgres-1")],
                        "ports": [{"name": "metrics", "port": 9187},
                                  {"name": "postgres", "port": 15432}]}]}
    kube: Any = StubKube({("Service", "db", "postgres"): svc,
                          ("Endpoints", "db", "postgres"): eps})
    assert access.resolve_endpoint(kube, conn, {}) == Endpoint("127.0.0.1", 40001)
    assert kube.forwards == [("db", "postgres-0", 15432)]
    # the override: a VPN that routes the Service network
    assert access.resolve_endpoint(kube, conn, {"ROTATE_PROVIDER_ROUTE": "direct"}) \
        == Endpoint("10.0.0.9", 5432)
    # inside the cluster, forced to port-forward (a NetworkPolicy in the way)
    access.resolve_endpoint(kube, conn, {"KUBERNETES_SERVICE_HOST": "10.0.0.1",
                                         "ROTATE_PROVIDER_ROUTE": "port-forward"})
    assert len(kube.forwards) == 2
    with pytest.raises(RejectedError, match="ROTATE_PROVIDER_ROUTE must be one of"):
        access.resolve_endpoint(kube, conn, {"ROTATE_PROVIDER_ROUTE": "vpn"})


def test_port_forward_needs_a_ready_pod_behind_the_service() -> None:
    conn = ProviderConnection("postgres", ServicePortRef("db", "postgres", 5432))
    svc = {"spec": {"ports": [{"name": "postgres", "port": 5432, "targetPort": 5432}]}}
    unready = {"subsets": [{"notReadyAddresses": [_pod_address("127.5.1.4", "postgres-0")],
                            "ports": [{"name": "postgres", "port": 5432}]}]}
    kube: Any = StubKube({("Service", "db", "postgres"): svc,
                          ("Endpoints", "db", "postgres"): unready})
    with pytest.raises(NotFoundError, match="no ready pod to port-forward to"):
        access.resolve_endpoint(kube, conn, {})
    external = {"subsets": [{"addresses": [{"ip": "192.0.2.10"}],
                             "ports": [{"name": "postgres", "port": 5432}]}]}
    kube = StubKube({("Service", "db", "postgres"): svc,
                     ("Endpoints", "db", "postgres"): external})
    with pytest.raises(PermanentError, match=r"endpoints name no pod.*addressEnv"):
        access.resolve_endpoint(kube, conn, {})
    assert kube.forwards == []


def test_admin_candidates() -> None:
    old, new = generate(), generate()
    kube: Any = StubKube({}, {("db", "pg-admin", "password"): "admin-pw"})
    self_admin = redis_apply("default")
    assert access.admin_candidates(kube, self_admin, CRED_SECRET, old, new) == (old, new)
    named = pg_apply(user="shop")
    (admin_pw,) = access.admin_candidates(kube, named, CRED_SECRET, old, new)
    assert admin_pw == Secret("admin-pw")
    with pytest.raises(NotFoundError, match="admin secret"):
        access.admin_candidates(StubKube({}), named, CRED_SECRET, old, new)  # type: ignore[arg-type]


class StubVault:
    """KV v2 at one path, just enough for backend.write / active_username."""

    def __init__(self, first: dict[str, str]) -> None:
        self.versions = [first]

    def read_metadata(self, path: str) -> Any:
        from rotate.clients.seams import KvMetadata

        return KvMetadata(path, len(self.versions), 1, {}, {})

    def read(self, path: str, version: int | None = None) -> dict[str, Secret]:
        return {k: Secret(v) for k, v in self.versions[(version or len(self.versions)) - 1].items()}

    def write(self, path: str, data: Mapping[str, Secret], *, cas: int) -> int:
        assert cas == len(self.versions)
        self.versions.append({k: v.reveal() for k, v in data.items()})
        return len(self.versions)

    def set_custom_metadata(self, path: str, metadata: Mapping[str, str]) -> None:
        return None


def test_alternating_users_username_and_password_change_in_one_version() -> None:
    from rotate.stages import backend

    vault: Any = StubVault({"password": "old-pw", "host": "db"})
    assert active_username(vault, "infra/pg", "username", 1) is None
    applied = pg_apply(users=("app_a", "app_b"))
    acc = accounts_for(applied, "overlap", active_username(vault, "infra/pg",
                                                                     "username", 1))
    w = backend.write(vault, "infra/pg", "password", Secret("new-pw"), "run-1",
                      expected_version=1, also={"username": Secret(acc.new)})
    assert vault.versions[-1] == {"password": "new-pw", "host": "db", "username": "app_b"}
    assert active_username(vault, "infra/pg", "username", w.version) == "app_b"
    assert accounts_for(applied, "overlap", "app_b").new == "app_a"
