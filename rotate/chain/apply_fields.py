"""The apply fields of ``credentials.*.providers[*]`` (docs/chain-file.md, "Provider apply
methods"): their semantic checks and the values built from them.

:func:`provider_problems` says what the JSON Schema cannot word well: which fields belong to
which method, one of ``user``/``users``, an admin for alternating users, and the strategy rule
of :func:`rotate.chain.model.strategy_problem` applied to the chain's own ``strategy``.  It is
written defensively like :func:`rotate.chain.problems.semantic_problems` (it runs on data that
may also fail the schema) and yields (path below the credential, reason) pairs.

:func:`build_applies` runs only on a valid file and fills every default, so a
:class:`~rotate.chain.model.LiveApply` never has a field left to derive.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rotate.chain.model import (
    DEFAULT_ADMIN_USER,
    DEFAULT_APPLY_PORT,
    DEFAULT_DATABASE,
    DEFAULT_REDIS_USER,
    DEFAULT_SSLMODE,
    AdminAuth,
    LiveApply,
    ProviderApply,
    SecretKeyRef,
    ServicePortRef,
)
from rotate.core.refs import ObjectRef

Problem = tuple[list[str | int], str]

_LIVE_FIELDS = ("user", "users", "usernameKey", "service", "addressEnv", "admin", "tls",
                "database", "sslmode")
_NOT_FOR = {
    "redis-acl": ("users", "usernameKey", "database", "sslmode"),
    "postgres": ("tls",),
}
_INSTEAD = {
    ("redis-acl", "users"): "an ACL user holds several passwords: use user",
    ("redis-acl", "usernameKey"): "only alternating PostgreSQL users carry a username",
    ("redis-acl", "database"): "a postgres field",
    ("redis-acl", "sslmode"): "use tls",
    ("postgres", "tls"): "use sslmode",
}


def provider_problems(credential: dict[str, Any]) -> Iterator[Problem]:
    providers = credential.get("providers")
    if not isinstance(providers, list):
        return
    alternating = 0
    for i, entry in enumerate(providers):
        if not isinstance(entry, dict):
            continue
        method = entry.get("apply", "rollout")
        where: list[str | int] = ["providers", i]
        if method == "rollout":
            for name in _LIVE_FIELDS:
                if name in entry:
                    yield [*where, name], (f"{name} is for apply: redis-acl or postgres; "
                                           "apply: rollout only restarts the workload")
            continue
        if method not in _NOT_FOR:
            continue  # the schema reports the unknown method
        for name in _NOT_FOR[method]:
            if name in entry:
                yield [*where, name], (f"{name} is not a field of apply: {method} "
                                       f"({_INSTEAD[(method, name)]})")
        yield from _admin_problems(entry, where)
        if method == "postgres":
            if "users" in entry:
                alternating += 1
            yield from _postgres_problems(entry, where, credential)
    if alternating > 1:
        yield ["providers"], ("only one provider may use alternating users (users): the "
                              "Secret carries one username")
    if credential.get("strategy") == "overlap":
        for i, entry in enumerate(providers):
            if (isinstance(entry, dict) and entry.get("apply") == "postgres"
                    and "users" not in entry):
                yield ["providers", i], (
                    "strategy overlap with apply: postgres needs two alternating login roles "
                    "(users: [a, b]): a PostgreSQL role holds one password at a time")


def _admin_problems(entry: dict[str, Any], where: list[str | int]) -> Iterator[Problem]:
    admin = entry.get("admin")
    if not isinstance(admin, dict):
        return
    if "user" in admin and "secretKey" not in admin and admin["user"] != entry.get("user"):
        yield [*where, "admin"], ("admin.user needs admin.secretKey: without it rotate "
                                  "authenticates as the rotated user with the credential's "
                                  "own value")


def _postgres_problems(entry: dict[str, Any], where: list[str | int],
                       credential: dict[str, Any]) -> Iterator[Problem]:
    has_user, users = "user" in entry, entry.get("users")
    if has_user == ("users" in entry):
        yield where, ("apply: postgres needs exactly one of user (one role) or users (two "
                      "alternating login roles)")
    if isinstance(users, list) and len(users) == 2 and users[0] == users[1]:
        yield [*where, "users"], "the two alternating roles must differ"
    if "users" in entry and "usernameKey" not in entry:
        yield where, ("users needs usernameKey: the key (in the backend and in the Secret) "
                      "that carries the active role's name to the consumers")
    if "usernameKey" in entry and "users" not in entry:
        yield [*where, "usernameKey"], "usernameKey is only for alternating users (users)"
    key = entry.get("usernameKey")
    taken = _credential_keys(credential)
    if key is not None and key in taken:
        yield [*where, "usernameKey"], ("usernameKey must differ from the credential's key "
                                        "and previousKey")
    if "users" in entry:
        admin = entry.get("admin")
        secret = credential.get("secret")
        admin_key = admin.get("secretKey") if isinstance(admin, dict) else None
        if admin_key is None or admin_key == secret:
            yield [*where, "admin"], ("alternating users need an admin role that can ALTER "
                                      "both roles: set admin.user and admin.secretKey (the "
                                      "credential itself cannot be the admin)")


def _credential_keys(credential: dict[str, Any]) -> set[str]:
    keys: set[str] = set()
    for section, name in (("backend", "key"), ("secret", "key"), ("overlap", "previousKey")):
        block = credential.get(section)
        if isinstance(block, dict) and isinstance(block.get(name), str):
            keys.add(block[name])
    return keys


# --------------------------------------------------------------------------- build


def build_applies(raw_providers: list[dict[str, Any]]) -> tuple[ProviderApply, ...]:
    """One :class:`ProviderApply` per provider entry, in file order, defaults filled."""
    out = []
    for p in raw_providers:
        ref = ObjectRef(p["kind"], p["namespace"], p["name"])
        method = p.get("apply", "rollout")
        live = None if method == "rollout" else _live(method, p)
        out.append(ProviderApply(ref, method, live))
    return tuple(out)


def _live(method: Any, p: dict[str, Any]) -> LiveApply:
    svc = p.get("service", {})
    users = p.get("users")
    user = p.get("user", DEFAULT_REDIS_USER if method == "redis-acl" and not users else None)
    admin = p.get("admin", {})
    key = admin.get("secretKey")
    if key is not None:
        auth = AdminAuth(admin.get("user", DEFAULT_ADMIN_USER[method]),
                         SecretKeyRef(key["namespace"], key["name"], key["key"]))
    else:
        auth = AdminAuth(admin.get("user", user or ""), None)
    return LiveApply(
        method=method,
        service=ServicePortRef(svc.get("namespace", p["namespace"]), svc.get("name", p["name"]),
                               svc.get("port", DEFAULT_APPLY_PORT[method])),
        admin=auth,
        user=user,
        users=(users[0], users[1]) if users else None,
        username_key=p.get("usernameKey"),
        address_env=p.get("addressEnv"),
        tls=bool(p.get("tls", False)),
        database=p.get("database", DEFAULT_DATABASE),
        sslmode=p.get("sslmode", DEFAULT_SSLMODE),
    )
