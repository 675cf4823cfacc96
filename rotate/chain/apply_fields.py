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
    DEFAULT_DATABASE,
    DEFAULT_PORT,
    DEFAULT_REDIS_USER,
    DEFAULT_SSLMODE,
    PROTOCOL_OF_METHOD,
    AdminAuth,
    JobTemplate,
    ProviderApply,
    ProviderConnection,
    SecretKeyRef,
    ServicePortRef,
)
from rotate.core.durations import parse_duration
from rotate.core.refs import ObjectRef

Problem = tuple[list[str | int], str]

_CONNECTION_FIELDS = ("service", "addressEnv", "tls", "database", "sslmode")
_LIVE_ONLY = ("users", "usernameKey", "admin")
_PROTOCOL_ONLY = {"redis": ("tls",), "postgres": ("database", "sslmode")}
_INSTEAD = {"tls": "use sslmode", "database": "a postgres field", "sslmode": "use tls"}


def _protocol(entry: dict[str, Any]) -> str | None:
    method = entry.get("apply", "rollout")
    if method == "rollout":
        probe = entry.get("probe")
        return probe if isinstance(probe, str) else None
    return PROTOCOL_OF_METHOD.get(str(method))


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
        protocol = _protocol(entry)
        if method == "job" or "job" in entry:
            yield from _job_problems(entry, where, method)
            continue
        if method == "rollout":
            for name in _LIVE_ONLY:
                if name in entry:
                    yield [*where, name], (f"{name} is for apply: redis-acl or postgres; "
                                           "apply: rollout only restarts the workload")
            if protocol is None:
                for name in (*_CONNECTION_FIELDS, "user"):
                    if name in entry:
                        yield [*where, name], (f"{name} needs probe: redis or postgres (how "
                                               "provider.verify reaches a rollout provider)")
                continue
        elif "probe" in entry:
            yield [*where, "probe"], (f"probe is for apply: rollout; apply: {method} is "
                                      "proven over its own protocol")
        if protocol not in _PROTOCOL_ONLY:
            continue  # the schema reports the unknown method
        for other, fields in _PROTOCOL_ONLY.items():
            if other != protocol:
                for name in fields:
                    if name in entry:
                        yield [*where, name], (f"{name} is not a field of {protocol} "
                                               f"providers ({_INSTEAD[name]})")
        if protocol == "redis" and "users" in entry:
            yield [*where, "users"], ("an ACL user holds several passwords: use user "
                                      "(users is PostgreSQL's alternating scheme)")
        if protocol == "postgres" and method == "rollout" and "user" not in entry:
            yield where, "probe: postgres needs user (the role provider.verify logs in as)"
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


def _job_problems(entry: dict[str, Any], where: list[str | int],
                  method: Any) -> Iterator[Problem]:
    """``apply: job`` takes its container from ``job`` and nothing of a wire protocol: the
    rotator reaches the provider itself, from inside the cluster."""
    if method != "job":
        yield [*where, "job"], "job is for apply: job (the custom rotator's container)"
        return
    if "job" not in entry:
        yield where, "apply: job needs job (image, command: the custom rotator's container)"
    for name in (*_CONNECTION_FIELDS, *_LIVE_ONLY, "user", "probe"):
        if name in entry:
            yield [*where, name], (f"{name} is not a field of apply: job (the rotator reaches "
                                   "the provider itself)")


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
        protocol = _protocol(p)
        connection = _connection(protocol, p) if protocol is not None else None
        users = p.get("users")
        user = p.get("user")
        if user is None and protocol == "redis" and not users:
            user = DEFAULT_REDIS_USER
        out.append(ProviderApply(
            provider=ref, method=method, connection=connection, user=user,
            users=(users[0], users[1]) if users else None,
            username_key=p.get("usernameKey"),
            admin=_admin(protocol, p, user) if method != "rollout" and protocol else (
                # the rotator Job authenticates itself: no candidate is refused
                AdminAuth("") if method == "job" else None),
            job=_job(p["job"]) if method == "job" else None,
        ))
    return tuple(out)


def _job(raw: dict[str, Any]) -> JobTemplate:
    return JobTemplate(
        image=raw["image"], command=tuple(raw["command"]), args=tuple(raw.get("args", ())),
        env=tuple((e["name"], e["value"]) for e in raw.get("env", ())),
        service_account=raw.get("serviceAccountName"),
        deadline=parse_duration(raw.get("deadline", JobTemplate.deadline)))


def _connection(protocol: Any, p: dict[str, Any]) -> ProviderConnection:
    svc = p.get("service", {})
    return ProviderConnection(
        protocol=protocol,
        service=ServicePortRef(svc.get("namespace", p["namespace"]), svc.get("name", p["name"]),
                               svc.get("port", DEFAULT_PORT[protocol])),
        address_env=p.get("addressEnv"),
        tls=bool(p.get("tls", False)),
        database=p.get("database", DEFAULT_DATABASE),
        sslmode=p.get("sslmode", DEFAULT_SSLMODE),
    )


def _admin(protocol: str, p: dict[str, Any], user: str | None) -> AdminAuth:
    admin = p.get("admin", {})
    key = admin.get("secretKey")
    if key is not None:
        return AdminAuth(admin.get("user", DEFAULT_ADMIN_USER[protocol]),
                         SecretKeyRef(key["namespace"], key["name"], key["key"]))
    return AdminAuth(admin.get("user", user or ""), None)
