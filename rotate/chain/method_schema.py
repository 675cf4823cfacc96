"""The chain file's JSON Schema with every available method's own fields merged in, and the
problems of ``apply:`` values no method provides.

Each method declares the schema of its own fields (``MethodSpec.fields``); the file is
validated against the packaged schema extended, in ``$defs/provider``, by one
``if apply == name then properties …`` branch per method (and one per protocol for
``apply: rollout`` entries with ``probe``), so a plug-in's field gets the same checks and line
numbers as a built-in one.  Which method a field belongs to is said by
:func:`rotate.chain.apply_fields.provider_problems`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from rotate.chain.methods import ROLLOUT, MethodSpec, MethodUnavailable, registered, spec_of

Problem = tuple[list[str | int], str]


def named_methods(data: dict[str, Any]) -> Iterator[tuple[list[str | int], str]]:
    """(path, name) of every ``apply:`` value other than rollout, in file order."""
    credentials = data.get("credentials")
    if not isinstance(credentials, dict):
        return
    for cname, cred in credentials.items():
        providers = cred.get("providers") if isinstance(cred, dict) else None
        if not isinstance(providers, list):
            continue
        for i, entry in enumerate(providers):
            method = entry.get("apply") if isinstance(entry, dict) else None
            if isinstance(method, str) and method != ROLLOUT:
                yield ["credentials", cname, "providers", i, "apply"], method


def unavailable_methods(data: dict[str, Any]) -> Iterator[Problem]:
    """One problem per ``apply:`` naming a method that is neither registered nor provided by
    an installed plug-in (or whose plug-in fails to load); loading them is the side effect
    that makes the others' fields known to :func:`schema_with_methods`."""
    for path, name in named_methods(data):
        try:
            spec_of(name)
        except MethodUnavailable as exc:
            yield path, str(exc)


def schema_with_methods(base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with the fields of every registered method merged into ``$defs/provider``."""
    specs = registered()
    schema = copy.deepcopy(base)
    provider = schema["$defs"]["provider"]
    branches: list[dict[str, Any]] = list(provider.get("allOf", []))
    for spec in specs:
        for name in spec.fields:
            provider["properties"].setdefault(name, {})
        branches.append(_branch({"apply": {"const": spec.name}}, ["apply"], spec))
    for protocol_spec in _first_per_protocol(specs):
        branches.append(_branch(
            {"apply": {"const": ROLLOUT}, "probe": {"const": protocol_spec.protocol}},
            ["probe"], protocol_spec))
    if branches:
        provider["allOf"] = branches
    return schema


def _branch(condition: dict[str, Any], required: list[str], spec: MethodSpec) -> dict[str, Any]:
    return {"if": {"properties": condition, "required": required},
            "then": {"properties": dict(spec.fields)}}


def _first_per_protocol(specs: tuple[MethodSpec, ...]) -> list[MethodSpec]:
    seen: dict[str, MethodSpec] = {}
    for spec in specs:
        if spec.protocol is not None:
            seen.setdefault(spec.protocol, spec)
    return list(seen.values())
