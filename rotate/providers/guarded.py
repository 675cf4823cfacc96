"""A plug-in's method behind a guard: its own exceptions become rotate's, without their text.

A method from another distribution may raise anything (its driver's exceptions carry
conninfo, statements, sometimes the password).  :class:`Guarded` forwards every member of
:class:`~rotate.providers.method.ProviderMethod` and lets :mod:`rotate.core.errors` types
through unchanged; any other exception becomes a PermanentError that names the plug-in, its
package and the operation, and only the exception's class — so the step fails (exit 12 or a
preflight exit 3) with the state and the next command the engine adds to every failure.
Making the object is guarded the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rotate.chain.model import ProviderApply
from rotate.clients.provider_seams import AuthProbe
from rotate.core.errors import PermanentError, RotateError
from rotate.core.secret import Secret
from rotate.providers.method import Change, Link, Progress, Target, ValueRule


class PluginFailed(PermanentError):
    """A plug-in raised something other than a rotate error."""


class Guarded:
    """:class:`~rotate.providers.method.ProviderMethod` forwarding to a plug-in's object."""

    def __init__(self, name: str, package: str, make: Callable[[], Any]) -> None:
        self._name = name
        self._package = package
        with self._guard("load"):
            self._inner = make()

    @contextmanager
    def _guard(self, operation: str) -> Iterator[None]:
        try:
            yield
        except RotateError:
            raise
        except Exception as exc:  # a plug-in's own error; its text may hold a value
            raise PluginFailed(
                f"plug-in {self._package}", f"apply: {self._name} {operation}",
                f"raised {type(exc).__name__} (its message is not shown: it may hold a "
                f"value); report it to the maintainers of {self._package}") from None

    def _call(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        with self._guard(operation):
            return getattr(self._inner, operation)(*args, **kwargs)

    @property
    def values(self) -> ValueRule:
        with self._guard("values"):
            rule = self._inner.values
        if not isinstance(rule, ValueRule):
            raise PluginFailed(f"plug-in {self._package}", f"apply: {self._name} values",
                               "is not a rotate.providers.ValueRule")
        return rule

    @property
    def restart_hint(self) -> str:
        with self._guard("restart_hint"):
            return str(self._inner.restart_hint)

    def describe_apply(self, applied: ProviderApply, *, overlap: bool) -> str:
        return str(self._call("describe_apply", applied, overlap=overlap))

    def describe_retire(self, applied: ProviderApply) -> str:
        return str(self._call("describe_retire", applied))

    def retires_replaced(self, applied: ProviderApply) -> bool:
        return bool(self._call("retires_replaced", applied))

    def open_probe(self, link: Link) -> AuthProbe:
        return _GuardedProbe(self, self._call("open_probe", link))

    def open_admin(self, link: Link, user: str, password: Secret) -> Any:
        return self._call("open_admin", link, user, password)

    def preflight(self, admin: Any, probe: AuthProbe, target: Target) -> str:
        return str(self._call("preflight", admin, probe, target))

    def apply(self, admin: Any, probe: AuthProbe, target: Target, progress: Progress) -> Change:
        return _change(self._call("apply", admin, probe, target, progress))

    def retire(self, admin: Any, probe: AuthProbe, target: Target) -> Change:
        return _change(self._call("retire", admin, probe, target))

    def restore(self, admin: Any, probe: AuthProbe, target: Target) -> Change:
        return _change(self._call("restore", admin, probe, target))

    def retire_replaced(self, admin: Any, probe: AuthProbe, target: Target) -> Change:
        return _change(self._call("retire_replaced", admin, probe, target))


class _GuardedProbe:
    """The plug-in's probe, guarded like its method (``accepts`` is called from outside)."""

    def __init__(self, owner: Guarded, inner: Any) -> None:
        self._owner = owner
        self._inner = inner

    @property
    def endpoint(self) -> Any:
        return self._inner.endpoint

    def accepts(self, user: str, password: Secret) -> bool:
        with self._owner._guard("probe"):
            return bool(self._inner.accepts(user, password))


def _change(value: Any) -> Change:
    if not isinstance(value, Change):
        raise PermanentError("rotate", "a plug-in's change", "did not return a Change")
    return value
