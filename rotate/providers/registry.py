"""Which object implements a chain's ``apply:`` value: looked up once per name.

Every method — built in or from a plug-in distribution — is a
:class:`~rotate.chain.methods.MethodSpec` registered with :func:`register`
(rotate.chain.methods registers the built-ins the same way; a plug-in's spec is its entry
point in the group ``rotate.providers``, loaded only when a chain names it).  The spec's
``factory`` (a callable, or ``"module:attr"``) makes the object once; nothing else in rotate
compares a method's name: the step kinds ask :func:`method_of` for the object and call the
:class:`~rotate.providers.method.ProviderMethod` seam.

A plug-in's object is wrapped in :class:`~rotate.providers.guarded.Guarded`: an exception of
its own becomes a PermanentError naming the plug-in, never carrying its text.

A rollout provider with ``probe: P`` has no method of its own; its probe and its
``restart_hint`` are those of the method speaking wire protocol P: :func:`method_for_probe`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

from rotate.chain.methods import (
    MethodSpec,
    MethodUnavailable,
    register_method,
    registered,
    spec_for_protocol,
    spec_of,
    unregister_method,
)
from rotate.chain.model import ProviderApply
from rotate.core.errors import PermanentError
from rotate.providers.guarded import Guarded
from rotate.providers.method import ProviderMethod

MethodFactory = Callable[[], ProviderMethod[Any]]

_MADE: dict[str, ProviderMethod[Any]] = {}


def register(spec: MethodSpec, factory: MethodFactory | None = None, *,
             replace_existing: bool = False) -> None:
    """Make ``apply: spec.name`` use ``factory()`` (default: ``spec.factory``).  A name
    already taken is refused unless ``replace_existing`` (a plug-in cannot silently take over
    a built-in method)."""
    register_method(spec if factory is None else replace(spec, factory=factory),
                    replace=replace_existing)
    _MADE.pop(spec.name, None)


def unregister(name: str) -> None:
    """Forget ``name`` (a test's own method; built-ins come back only by re-registering)."""
    unregister_method(name)
    _MADE.pop(name, None)


def names() -> tuple[str, ...]:
    """The registered method names, built-ins first (plug-ins once a chain named them)."""
    return tuple(spec.name for spec in registered())


def _factory(spec: MethodSpec) -> Callable[[], Any]:
    if callable(spec.factory):
        return spec.factory
    module, _, attr = spec.factory.partition(":")
    made: Callable[[], Any] = getattr(importlib.import_module(module), attr)
    return made


def method_of(name: str) -> ProviderMethod[Any]:
    """The object of ``apply: name`` (made once, then shared: methods hold no run state)."""
    made = _MADE.get(name)
    if made is not None:
        return made
    try:
        spec = spec_of(name)
    except MethodUnavailable as exc:
        raise PermanentError("rotate", f"apply: {name}", str(exc)) from None
    # a Guarded's members are read-only properties; the Protocol's are plain attributes
    made = cast(ProviderMethod[Any], _factory(spec)() if spec.builtin
                else Guarded(spec.name, spec.package, lambda: _factory(spec)()))
    _MADE[name] = made
    return made


def method_for_probe(protocol: str) -> ProviderMethod[Any]:
    """The method speaking wire ``protocol``: its probe proves a rollout provider."""
    spec = spec_for_protocol(protocol)
    if spec is None:
        raise PermanentError("rotate", f"probe: {protocol}", "no provider method speaks it")
    return method_of(spec.name)


def method_for(applied: ProviderApply) -> ProviderMethod[Any]:
    """A live provider's method, or for a rollout provider the one its ``probe`` speaks."""
    if applied.live:
        return method_of(applied.method)
    if applied.connection is None:
        raise PermanentError("rotate", f"provider {applied.provider}",
                             "apply: rollout without probe has no protocol")
    return method_for_probe(applied.connection.protocol)
