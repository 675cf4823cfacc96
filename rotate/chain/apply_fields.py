"""The apply fields of ``credentials.*.providers[*]`` (docs/chain-file.md, "Provider apply
methods"): their semantic checks and the values built from them.

:func:`provider_problems` says what the JSON Schema cannot word well: which fields belong to
which method, one of ``user``/``users``, an admin for alternating users, and the strategy
rule of :func:`rotate.chain.strategy_rules.strategy_problem` applied to the chain's own
``strategy``.  It is written defensively like
:func:`rotate.chain.problems.semantic_problems` (it runs on data that may also fail the
schema) and yields (path below the credential, reason) pairs.

:func:`build_applies` runs only on a valid file and fills every default, so a
:class:`~rotate.chain.model.LiveApply` never has a field left to derive.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rotate.chain.methods import MethodSpec, find_spec, registered, spec_for_protocol
from rotate.chain.model import (
    DEFAULT_DATABASE,
    DEFAULT_SSLMODE,
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

_CONNECTION_FIELDS = ("service", "addressEnv")
_LIVE_ONLY = ("users", "usernameKey", "admin")
#: fields ProviderConnection holds typed (the built-ins'); every other method field is in
#: ``options``
_TYPED = ("tls", "database", "sslmode")
_INSTEAD = {"tls": "use sslmode", "database": "a postgres field", "sslmode": "use tls"}


def spec_of_entry(entry: dict[str, Any]) -> MethodSpec | None:
    """The method whose protocol and fields an entry uses: its ``apply:``, or for a rollout
    provider the method speaking its ``probe``; None when there is none (or it is unknown)."""
    method = entry.get("apply", "rollout")
    if method == "rollout":
        probe = entry.get("probe")
        return spec_for_protocol(probe) if isinstance(probe, str) else None
    return find_spec(method) if isinstance(method, str) else None


def method_fields() -> dict[str, MethodSpec]:
    """Every registered method's own field → the method declaring it first."""
    out: dict[str, MethodSpec] = {}
    for spec in registered():
        for name in spec.fields:
            out.setdefault(name, spec)
    return out


def _foreign_fields(entry: dict[str, Any], where: list[str | int],
                    spec: MethodSpec | None) -> Iterator[Problem]:
    """Fields of a method that does not connect, on any other entry; and, on an entry whose
    method is known, the fields of other methods."""
    for name, owner in method_fields().items():
        if name not in entry or (spec is not None and name in spec.fields):
            continue
        if not owner.connects:
            yield [*where, name], f"{name} is for apply: {owner.name}"
        elif spec is not None:
            hint = _INSTEAD.get(name, f"a field of {owner.label} providers")
            yield [*where, name], f"{name} is not a field of {spec.label} providers ({hint})"


def _unconnected_problems(spec: MethodSpec, entry: dict[str, Any],
                          where: list[str | int]) -> Iterator[Problem]:
    """A method that reaches the provider itself (``connects: false``, e.g. ``apply: job``)
    takes nothing of a wire protocol: no connection, account, admin or probe."""
    for name in (*_CONNECTION_FIELDS, *_LIVE_ONLY, "user", "probe"):
        if name in entry:
            yield [*where, name], (f"{name} is not a field of apply: {spec.name} (the method "
                                   "reaches the provider itself)")
    if spec.problems is not None:
        for parts, reason in spec.problems(entry):
            yield [*where, *parts], reason


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
        spec = spec_of_entry(entry)
        yield from _foreign_fields(entry, where, spec)
        if spec is not None and not spec.connects:
            yield from _unconnected_problems(spec, entry, where)
            continue
        if method == "rollout":
            for name in _LIVE_ONLY:
                if name in entry:
                    yield [*where, name], (f"{name} is for a live method (apply: redis-acl, "
                                           "postgres, …); apply: rollout only restarts the "
                                           "workload")
            if spec is None:
                probe = entry.get("probe")
                if isinstance(probe, str):
                    yield [*where, "probe"], (f"probe: {probe} is a protocol no installed "
                                              "method speaks (built in: redis, postgres)")
                    continue
                wire = [n for n, owner in method_fields().items() if owner.connects]
                for name in (*_CONNECTION_FIELDS, *wire, "user"):
                    if name in entry:
                        yield [*where, name], (f"{name} needs probe: redis or postgres (how "
                                               "provider.verify reaches a rollout provider)")
                continue
        elif "probe" in entry:
            yield [*where, "probe"], (f"probe is for apply: rollout; apply: {method} is "
                                      "proven over its own protocol")
        if spec is None:
            continue  # the loader reports the unavailable method
        if "users" in entry and not spec.alternating_users:
            yield [*where, "users"], (
                "an ACL user holds several passwords: use user (users is PostgreSQL's "
                "alternating scheme)" if spec.holds_two_values else
                f"apply: {spec.name} has no alternating users: use user")
        if method == "rollout" and spec.default_user is None and "user" not in entry:
            yield where, (f"probe: {spec.protocol} needs user (the account provider.verify "
                          "logs in as)")
        yield from _admin_problems(entry, where)
        if method != "rollout":
            if spec.problems is not None:
                for parts, reason in spec.problems(entry):
                    yield [*where, *parts], reason
            if spec.alternating_users:
                if "users" in entry:
                    alternating += 1
                yield from _alternating_problems(spec, entry, where, credential)
    if alternating > 1:
        yield ["providers"], ("only one provider may use alternating users (users): the "
                              "Secret carries one username")
    if credential.get("strategy") == "overlap":
        for i, entry in enumerate(providers):
            spec = spec_of_entry(entry) if isinstance(entry, dict) else None
            if (spec is not None and entry.get("apply", "rollout") != "rollout"
                    and not spec.holds_two_values and "users" not in entry
                    and not _declares_two_values(entry)):
                yield ["providers", i], (
                    f"strategy overlap with apply: {spec.name} needs two alternating login "
                    f"roles (users: [a, b]): {spec.one_value}" if spec.alternating_users else
                    f"strategy overlap with apply: {spec.name}: the method holds one value "
                    "at a time (use strategy restart)")


def _declares_two_values(entry: dict[str, Any]) -> bool:
    job = entry.get("job")
    return isinstance(job, dict) and job.get("twoValues") is True


def _admin_problems(entry: dict[str, Any], where: list[str | int]) -> Iterator[Problem]:
    admin = entry.get("admin")
    if not isinstance(admin, dict):
        return
    if "user" in admin and "secretKey" not in admin and admin["user"] != entry.get("user"):
        yield [*where, "admin"], ("admin.user needs admin.secretKey: without it rotate "
                                  "authenticates as the rotated user with the credential's "
                                  "own value")


def _alternating_problems(spec: MethodSpec, entry: dict[str, Any], where: list[str | int],
                          credential: dict[str, Any]) -> Iterator[Problem]:
    has_user, users = "user" in entry, entry.get("users")
    if has_user == ("users" in entry):
        yield where, (f"apply: {spec.name} needs exactly one of user (one role) or users (two "
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
        spec = spec_of_entry(p)
        connection = _connection(spec, p) if spec is not None and spec.connects else None
        users = p.get("users")
        user = p.get("user")
        if user is None and spec is not None and not users:
            user = spec.default_user
        out.append(ProviderApply(
            provider=ref, method=method, connection=connection, user=user,
            users=(users[0], users[1]) if users else None,
            username_key=p.get("usernameKey"),
            # a method that does not connect authenticates itself: no candidate is refused
            admin=(None if method == "rollout" or spec is None else
                   _admin(spec, p, user) if spec.connects else AdminAuth("")),
            job=_job(p["job"]) if spec is not None and "job" in spec.fields and "job" in p
            else None,
        ))
    return tuple(out)


def _job(raw: dict[str, Any]) -> JobTemplate:
    return JobTemplate(
        image=raw["image"], command=tuple(raw["command"]), args=tuple(raw.get("args", ())),
        env=tuple((e["name"], e["value"]) for e in raw.get("env", ())),
        service_account=raw.get("serviceAccountName"),
        deadline=parse_duration(raw.get("deadline", JobTemplate.deadline)),
        two_values=bool(raw.get("twoValues", False)))


def _connection(spec: MethodSpec, p: dict[str, Any]) -> ProviderConnection:
    svc = p.get("service", {})
    assert spec.protocol is not None and spec.default_port is not None  # spec.connects
    return ProviderConnection(
        protocol=spec.protocol,
        service=ServicePortRef(svc.get("namespace", p["namespace"]), svc.get("name", p["name"]),
                               svc.get("port", spec.default_port)),
        address_env=p.get("addressEnv"),
        tls=bool(p.get("tls", False)),
        database=p.get("database", DEFAULT_DATABASE),
        sslmode=p.get("sslmode", DEFAULT_SSLMODE),
        options={name: p[name] for name in spec.fields if name in p and name not in _TYPED},
    )


def _admin(spec: MethodSpec, p: dict[str, Any], user: str | None) -> AdminAuth:
    admin = p.get("admin", {})
    key = admin.get("secretKey")
    if key is not None:
        return AdminAuth(admin.get("user", spec.default_admin_user or ""),
                         SecretKeyRef(key["namespace"], key["name"], key["key"]))
    return AdminAuth(admin.get("user", user or ""), None)
