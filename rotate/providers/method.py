"""The seam of a live provider method: :class:`ProviderMethod` and the values it trades in.

A *method* is how a provider that keeps its password inside itself takes a new one over an
admin connection (the chain's ``apply:``, docs/chain-file.md "Provider apply methods").  The
engine's step kinds (``provider.apply``, ``provider.retire``, ``provider.verify`` and their
rollback forms) choose the method once, through :mod:`rotate.providers.registry`, and call
only what this module declares; they never look at the method's name.

Invariants every implementation keeps (built in or from another distribution):

* **Observe first.**  Every change looks at the provider from outside (``probe.accepts``, a
  fresh AUTH/login) and returns ``Change(False, …)`` when the provider already is in the
  target state, so a resumed run may call it again.
* **Values stay inside.**  Passwords arrive as :class:`~rotate.core.secret.Secret` and leave
  only through the admin session or the probe.  What a method returns — :class:`Change`, a
  plan line, facts recorded through :class:`Progress` — holds names and numbers, never a value.
* **Errors are rotate's.**  A method raises :mod:`rotate.core.errors` types only:
  TemporaryError when the provider cannot be reached (the step retries until its deadline),
  PermanentError (or a subclass) for a refusal retrying cannot fix.  A refused *probe* is an
  answer (False), not an error.
* **Drivers through a seam.**  ``open_admin``/``open_probe`` get a :class:`Link`; the built-in
  methods reach their drivers through ``link.connector`` (rotate.clients), so this package
  imports no I/O library.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from rotate.chain.model import Generate, ProviderApply, ProviderConnection
from rotate.clients.provider_seams import AuthProbe, ProviderConnector
from rotate.clients.seams import Endpoint, Kube
from rotate.core.errors import PermanentError
from rotate.core.secret import ALPHABETS, Secret
from rotate.core.waiting import CancelToken, Deadline


@dataclass(frozen=True)
class Accounts:
    """Which account gets the new value and which holds the old one now.  The same name
    except for alternating users, where ``new`` is the inactive role."""

    new: str
    old: str

    @property
    def alternating(self) -> bool:
        return self.new != self.old


@dataclass(frozen=True)
class Target:
    """What one operation acts on.

    In a rotation ``old`` is the value the backend held before the run (``accounts.old``
    holds it) and ``new`` the value written (``accounts.new`` takes it).  A rollback keeps
    those meanings: ``old`` is the value being restored, ``new`` the one being replaced.
    ``strategy`` is ``restart`` (a hard cut) or ``overlap`` (both values valid for a while).
    """

    applied: ProviderApply
    accounts: Accounts
    old: Secret
    new: Secret
    strategy: str = "restart"

    @property
    def protocol(self) -> str:
        """The wire protocol (``connection.protocol``): the system named in errors."""
        return self.applied.connection.protocol if self.applied.connection else ""


@dataclass(frozen=True)
class Change:
    """What an operation did (``changed``) or found already done; journal-safe."""

    changed: bool
    detail: str


@dataclass(frozen=True)
class InCluster:
    """What a method that works from inside the cluster (``apply: job``) acts with: the Kube
    seam, the run (its id names the method's objects, so a resumed run finds them), the
    credential and the step's deadline."""

    kube: Kube
    run_id: str
    credential: str
    deadline: Deadline | None = None
    applied: ProviderApply | None = None  # the provider acted on
    cancel: CancelToken | None = None  # SIGINT/SIGTERM end a wait (exit 130)


@dataclass(frozen=True)
class Link:
    """How one attempt reaches the provider: where it listens (its Service, read once per
    attempt, or ``addressEnv``), the chain's connection settings, and rotate's connector
    (the built-in drivers, rotate.clients; a method from elsewhere may bring its own).  A
    method without a wire protocol (``apply: job``) has no endpoint or connection, and
    ``cluster`` instead."""

    endpoint: Endpoint | None
    connection: ProviderConnection | None
    connector: ProviderConnector
    cluster: InCluster | None = None

    @property
    def address(self) -> Endpoint:
        """The endpoint of a method with a wire protocol (PermanentError without one)."""
        if self.endpoint is None:
            raise PermanentError("rotate", "reach the provider", "it has no endpoint")
        return self.endpoint

    @property
    def settings(self) -> ProviderConnection:
        """The connection settings of a method with a wire protocol."""
        if self.connection is None:
            raise PermanentError("rotate", "reach the provider", "it has no connection")
        return self.connection


@dataclass(frozen=True)
class ValueRule:
    """The values a provider can take: ``max_length`` characters and ``max_bytes`` UTF-8
    bytes at most, only characters of ``alphabet``; None = no limit.  ``why`` says where a
    limit comes from (shown with a refusal).  Preflight refuses a generated or supplied value
    outside the rule of any of the credential's providers (exit 2): a value the provider
    cannot take would otherwise be written to the backend first and refused at
    ``provider.apply``, leaving a rollback that must present it again."""

    max_length: int | None = None
    alphabet: str | None = None
    max_bytes: int | None = None
    why: str = ""

    def _because(self) -> str:
        return f" ({self.why})" if self.why else ""

    def problem(self, generate: Generate | None) -> str | None:
        """Why values of ``generate`` may not fit, or None."""
        if generate is None:
            return None
        longest = generate.length  # every generate alphabet is ASCII: 1 byte a character
        limit = min(x for x in (self.max_length, self.max_bytes, longest) if x is not None)
        if longest > limit:
            return (f"the provider takes at most {limit} characters{self._because()}; "
                    f"generate.length is {generate.length}")
        chars = ALPHABETS.get(generate.alphabet, generate.alphabet)
        if self.alphabet is not None and set(chars) - set(self.alphabet):
            return "generate.alphabet has characters the provider does not take"
        return None

    def refuses(self, value: Secret) -> str | None:
        """Why ``value`` (a supplied one) does not fit, or None; never the value itself, only
        its size and the position of a character the rule refuses."""
        text = value.reveal()
        if self.max_length is not None and len(text) > self.max_length:
            return (f"the provider takes at most {self.max_length} characters"
                    f"{self._because()}; the value has {len(text)}")
        size = len(text.encode("utf-8"))
        if self.max_bytes is not None and size > self.max_bytes:
            return (f"the provider takes at most {self.max_bytes} bytes{self._because()}; "
                    f"the value has {size}")
        if self.alphabet is not None:
            allowed = set(self.alphabet)
            at = next((i for i, ch in enumerate(text, start=1) if ch not in allowed), None)
            if at is not None:
                return f"the provider does not take the character at position {at}"
        return None


class Progress(Protocol):
    """The step's own journal: facts an earlier attempt recorded (``prior``, read on resume)
    and ``record`` — journal a fact *before* the change that needs it.  Names and flags only."""

    @property
    def prior(self) -> Mapping[str, Any]: ...

    def record(self, **data: Any) -> None: ...


class AdminSession(Protocol):
    """An authenticated admin connection; the engine closes it at the end of the attempt."""

    def close(self) -> None: ...


S = TypeVar("S", bound=AdminSession)


class ProviderMethod(Protocol[S]):
    """One live apply method (docs/providers.md).  ``S`` is its admin session's type.

    Rotation: ``preflight`` (nothing changed), ``apply`` (provider.apply: ``new`` valid on
    ``accounts.new``; strategy restart also makes ``old`` invalid), ``retire`` (overlap phase
    2: ``old`` valid nowhere).  Rollback, the undo of both: ``restore`` (``old`` valid again
    on ``accounts.old``, ``new`` still valid: consumers move back without a refusal), then,
    after the consumers moved, ``retire_replaced`` (``new`` valid nowhere) when
    ``retires_replaced`` says there is anything to retire.
    """

    #: what values the provider takes (checked in preflight)
    values: ValueRule
    #: the likely cause shown when a provider speaking this method's protocol was only
    #: restarted (``apply: rollout`` with ``probe``) and does not take the new value
    restart_hint: str

    def describe_apply(self, applied: ProviderApply, *, overlap: bool) -> str:
        """The plan line of provider.apply (after ``<method>: ``)."""
        ...

    def describe_retire(self, applied: ProviderApply) -> str:
        """The plan line of provider.retire (after ``<method>: ``)."""
        ...

    def retires_replaced(self, applied: ProviderApply) -> bool:
        """Whether a rollback ends with ``retire_replaced`` (False: ``restore`` already was
        the cut, e.g. a single role's verifier put back)."""
        ...

    def open_probe(self, link: Link) -> AuthProbe:
        """Fresh logins from outside, as a consumer connecting now."""
        ...

    def open_admin(self, link: Link, user: str, password: Secret) -> S:
        """An admin session; ForbiddenError when ``password`` is refused (the next candidate
        is tried), TemporaryError when the provider is unreachable."""
        ...

    def preflight(self, admin: S, probe: AuthProbe, target: Target) -> str:
        """Observe only: the method's preconditions hold for ``target`` (``old`` = the
        backend's current value).  The check's detail line; PermanentError otherwise."""
        ...

    def apply(self, admin: S, probe: AuthProbe, target: Target, progress: Progress) -> Change:
        ...

    def retire(self, admin: S, probe: AuthProbe, target: Target) -> Change:
        ...

    def restore(self, admin: S, probe: AuthProbe, target: Target) -> Change:
        ...

    def retire_replaced(self, admin: S, probe: AuthProbe, target: Target) -> Change:
        ...
