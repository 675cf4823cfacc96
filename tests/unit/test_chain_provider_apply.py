"""Provider apply methods in the chain file (docs/chain-file.md "Provider apply methods"):
defaults filled by the loader, fields that do not belong to a method refused with their line,
and the one strategy rule (exit 2, naming the credential) at load time and at run time."""

from __future__ import annotations

from pathlib import Path

import pytest

from rotate.chain.loader import load_chain
from rotate.chain.model import (
    AdminAuth,
    Chain,
    ProviderApply,
    ProviderConnection,
    SecretKeyRef,
    ServicePortRef,
)
from rotate.chain.strategy_rules import strategy_problem
from rotate.core.errors import EXIT_USAGE, ChainFileError
from rotate.core.refs import ObjectRef
from tests.support.paths import EXAMPLE_CHAIN

HEAD = """\
apiVersion: rotate/v1
kind: Chain
backend: {kvMount: secret, auth: {method: token}}
cluster: {lockNamespace: rotate-system}
configCenter: {urlEnv: CONFIG_CENTER_URL, tokenEnv: CONFIG_CENTER_TOKEN}
credentials:
"""

DRAGONFLY = """\
  dragonfly:
    backend: {path: infra/dragonfly, key: password}
    generate: {length: 40}
    externalSecret: {namespace: dragonfly, name: dragonfly-password}
    secret: {namespace: dragonfly, name: dragonfly-password-secret, key: password}
    strategy: overlap
    providers:
      - kind: Deployment
        namespace: dragonfly
        name: dragonfly
        apply: redis-acl
"""

POSTGRES = """\
  postgres:
    backend: {path: infra/postgres, key: password}
    generate: {length: 32}
    externalSecret: {namespace: db, name: postgres-app}
    secret: {namespace: db, name: postgres-app, key: password}
    strategy: overlap
    providers:
      - kind: StatefulSet
        namespace: db
        name: postgres
        apply: postgres
        users: [shop_a, shop_b]
        usernameKey: username
        database: shop
        sslmode: require
        service: {name: postgres-rw, port: 5433}
        admin:
          user: rotator
          secretKey: {namespace: db, name: postgres-admin, key: password}
"""


def load(tmp_path: Path, credentials: str) -> Chain:
    path = tmp_path / "rotate.yaml"
    path.write_text(HEAD + credentials)
    return load_chain(path)


def problems(tmp_path: Path, credentials: str) -> list[str]:
    with pytest.raises(ChainFileError) as info:
        load(tmp_path, credentials)
    assert info.value.exit_code == EXIT_USAGE
    return [str(p) for p in info.value.problems]


def test_redis_acl_defaults_derive_the_service_the_user_and_self_admin(tmp_path: Path) -> None:
    cred = load(tmp_path, DRAGONFLY).credential("dragonfly")
    ref = ObjectRef("Deployment", "dragonfly", "dragonfly")
    applied = cred.apply_of(ref)
    assert applied == ProviderApply(
        ref, "redis-acl",
        ProviderConnection("redis", ServicePortRef("dragonfly", "dragonfly", 6379)),
        user="default", admin=AdminAuth("default", None),
    )
    assert applied.live and applied.admin_is_credential(cred.secret)
    # overlap needs no previousKey: the ACL user holds both passwords itself
    assert cred.overlap is None and strategy_problem(cred, "overlap") is None


def test_postgres_alternating_users_are_built_with_their_admin(tmp_path: Path) -> None:
    cred = load(tmp_path, POSTGRES).credential("postgres")
    (applied,) = cred.live_applies
    assert applied == ProviderApply(
        ObjectRef("StatefulSet", "db", "postgres"), "postgres",
        ProviderConnection("postgres", ServicePortRef("db", "postgres-rw", 5433),
                           database="shop", sslmode="require"),
        users=("shop_a", "shop_b"), username_key="username",
        admin=AdminAuth("rotator", SecretKeyRef("db", "postgres-admin", "password")),
    )
    assert not applied.admin_is_credential(cred.secret)
    assert strategy_problem(cred, "overlap") is None


def test_providers_without_apply_roll_out_as_before(tmp_path: Path) -> None:
    text = DRAGONFLY.replace("        apply: redis-acl\n", "").replace(
        "    strategy: overlap\n", "")
    cred = load(tmp_path, text).credential("dragonfly")
    ref = cred.providers[0]
    assert cred.apply_of(ref) == ProviderApply(ref, "rollout")
    assert cred.live_applies == ()


def test_a_rollout_provider_can_name_its_probe(tmp_path: Path) -> None:
    """provider.verify needs a protocol to prove a rollout provider from outside."""
    text = POSTGRES.split("        apply: postgres\n")[0].replace("    strategy: overlap\n", "")
    text += "        probe: postgres\n        user: shop\n        database: shop\n"
    cred = load(tmp_path, text).credential("postgres")
    applied = cred.apply_of(cred.providers[0])
    assert applied == ProviderApply(
        cred.providers[0], "rollout",
        ProviderConnection("postgres", ServicePortRef("db", "postgres", 5432), database="shop"),
        user="shop")
    assert not applied.live and applied.admin is None


def test_overlap_on_a_single_postgres_role_is_refused_naming_the_credential(
        tmp_path: Path) -> None:
    text = POSTGRES.replace("users: [shop_a, shop_b]", "user: shop").replace(
        "        usernameKey: username\n", "")
    found = problems(tmp_path, text)
    assert any("/credentials/postgres/providers/0:" in p and "strategy overlap" in p
               and "holds one password" in p for p in found), found


def test_overlap_with_a_rollout_provider_still_needs_previous_key(tmp_path: Path) -> None:
    text = DRAGONFLY.replace("        apply: redis-acl\n", "        apply: rollout\n")
    found = problems(tmp_path, text)
    assert any("/credentials/dragonfly:" in p and "'overlap'" in p for p in found), found


@pytest.mark.parametrize(("old", "new", "path", "words"), [
    ("        apply: redis-acl\n", "        user: app\n", "/providers/0/user",
     "needs probe: redis or postgres"),
    ("        apply: redis-acl\n", "        admin: {user: app}\n", "/providers/0/admin",
     "apply: rollout only restarts"),
    ("        apply: redis-acl\n", "        apply: redis-acl\n        probe: redis\n",
     "/providers/0/probe", "probe is for apply: rollout"),
    ("        apply: redis-acl\n", "        apply: redis-acl\n        sslmode: require\n",
     "/providers/0/sslmode", "use tls"),
    ("        apply: redis-acl\n", "        apply: redis-acl\n        users: [a, b]\n",
     "/providers/0/users", "use user"),
    ("        apply: redis-acl\n", "        apply: redis-acl\n        admin: {user: boss}\n",
     "/providers/0/admin", "admin.user needs admin.secretKey"),
])
def test_fields_that_do_not_belong_to_the_method_are_refused(
        tmp_path: Path, old: str, new: str, path: str, words: str) -> None:
    found = problems(tmp_path, DRAGONFLY.replace(old, new))
    assert any(f"/credentials/dragonfly{path}:" in p and words in p for p in found), found


@pytest.mark.parametrize(("old", "new", "words"), [
    ("        sslmode: require\n", "        tls: true\n", "use sslmode"),
    ("        usernameKey: username\n", "", "users needs usernameKey"),
    ("users: [shop_a, shop_b]", "users: [shop_a, shop_a]", "must differ"),
    ("        usernameKey: username\n", "        usernameKey: password\n",
     "usernameKey must differ"),
    ("users: [shop_a, shop_b]", "users: [shop_a, shop_b]\n        user: shop",
     "exactly one of user"),
    ("          secretKey: {namespace: db, name: postgres-admin, key: password}\n", "",
     "alternating users need an admin"),
])
def test_postgres_field_rules(tmp_path: Path, old: str, new: str, words: str) -> None:
    assert old in POSTGRES
    found = problems(tmp_path, POSTGRES.replace(old, new))
    assert any("/credentials/postgres/providers/0" in p and words in p for p in found), found


def test_every_problem_has_its_line(tmp_path: Path) -> None:
    found = problems(tmp_path, POSTGRES.replace("        sslmode: require\n",
                                                "        tls: true\n"))
    line = (HEAD + POSTGRES).splitlines().index("        sslmode: require") + 1
    assert any(p.startswith(f"{tmp_path / 'rotate.yaml'}:{line}:") for p in found), found


def test_run_time_strategy_rule(tmp_path: Path) -> None:
    """``--strategy overlap`` on a chain that declares restart: the same rule, as a message
    the engine raises as a UsageError (exit 2) naming the credential."""
    single = POSTGRES.replace("users: [shop_a, shop_b]", "user: shop").replace(
        "        usernameKey: username\n", "").replace("    strategy: overlap\n", "")
    pg = load(tmp_path, single).credential("postgres")
    reason = strategy_problem(pg, "overlap")
    assert reason is not None and "'postgres'" in reason and "users: [a, b]" in reason
    assert strategy_problem(pg, "restart") is None
    rollout = DRAGONFLY.replace("        apply: redis-acl\n", "").replace(
        "    strategy: overlap\n", "")
    df = load(tmp_path, rollout).credential("dragonfly")
    reason = strategy_problem(df, "overlap")
    assert reason is not None and "previousKey" in reason and "'dragonfly'" in reason


def test_the_example_chain_still_loads() -> None:
    example = EXAMPLE_CHAIN
    chain = load_chain(example)
    for cred in chain.credentials.values():
        assert strategy_problem(cred, cred.strategy) is None
