"""Which object implements a chain's ``apply:`` value: name → factory, looked up once.

The built-in methods are registered here under their chain names; a method from another
distribution registers with :func:`register` (the factory is called with no argument, so a
class is a factory).  Nothing else in rotate compares a method's name: the step kinds ask
:func:`method_of` for the object and call the :class:`~rotate.providers.method.
ProviderMethod` seam.

A rollout provider with ``probe: P`` has no method of its own; its probe and its
``restart_hint`` are those of the method speaking wire protocol P
(:data:`rotate.chain.model.PROTOCOL_OF_METHOD`): :func:`method_for_probe`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rotate.chain.model import PROTOCOL_OF_METHOD, ProviderApply
from rotate.core.errors import PermanentError
from rotate.providers.job import JobMethod
from rotate.providers.method import ProviderMethod
from rotate.providers.postgres_roles import PostgresRolesMethod
from rotate.providers.redis_acl import RedisAclMethod

MethodFactory = Callable[[], ProviderMethod[Any]]

_FACTORIES: dict[str, MethodFactory] = {
    "redis-acl": RedisAclMethod,
    "postgres": PostgresRolesMethod,
    "job": JobMethod,
}
_MADE: dict[str, ProviderMethod[Any]] = {}


def register(name: str, factory: MethodFactory, *, replace: bool = False) -> None:
    """Make ``apply: name`` use ``factory()``.  A name already taken is refused unless
    ``replace`` (a plug-in cannot silently take over a built-in method)."""
    if name in _FACTORIES and not replace:
        raise ValueError(f"provider method {name!r} is registered already")
    _FACTORIES[name] = factory
    _MADE.pop(name, None)


def unregister(name: str) -> None:
    """Forget ``name`` (a test's own method; built-ins come back only by re-registering)."""
    _FACTORIES.pop(name, None)
    _MADE.pop(name, None)


def names() -> tuple[str, ...]:
    """The registered method names, built-ins first."""
    return tuple(_FACTORIES)


def method_of(name: str) -> ProviderMethod[Any]:
    """The object of ``apply: name`` (made once, then shared: methods hold no run state)."""
    made = _MADE.get(name)
    if made is None:
        factory = _FACTORIES.get(name)
        if factory is None:
            raise PermanentError("rotate", f"apply: {name}",
                                 "no provider method of that name is installed")
        made = _MADE[name] = factory()
    return made


def method_for_probe(protocol: str) -> ProviderMethod[Any]:
    """The method speaking wire ``protocol``: its probe proves a rollout provider."""
    for name, spoken in PROTOCOL_OF_METHOD.items():
        if spoken == protocol:
            return method_of(name)
    raise PermanentError("rotate", f"probe: {protocol}", "no provider method speaks it")


def method_for(applied: ProviderApply) -> ProviderMethod[Any]:
    """A live provider's method, or for a rollout provider the one its ``probe`` speaks."""
    if applied.live:
        return method_of(applied.method)
    if applied.connection is None:
        raise PermanentError("rotate", f"provider {applied.provider}",
                             "apply: rollout without probe has no protocol")
    return method_for_probe(applied.connection.protocol)
