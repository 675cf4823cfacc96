"""Every error `rotate` raises, drawn once.

::

    RotateError                      exit_code; message is safe to print (no secret, no URL)
    ├── UsageError                   2   bad flags, unknown credential
    ├── ChainFileError               2   invalid chain file: file, line, JSON path
    ├── PreflightFailed              3   nothing was changed
    ├── NothingToAdopt               0   --adopt --confirm: the backend holds the chain's value
    ├── LockHeld                     4   another run holds the Lease
    ├── LockLost                     5   the run's Lease was taken while it ran (named)
    ├── JournalUnreadable            6   a journal that is not a run's records (named)
    ├── StepFailed                   10..18: the failed step's kind says which (engine/kinds)
    ├── Interrupted                  130 SIGINT/SIGTERM; the run is resumable
    └── ClientError                  raised by client adapters (clients/*), never with library text
        ├── TemporaryError           worth retrying: connection refused, timeout, 5xx, 429
        └── PermanentError           retrying will not help
            ├── NotFoundError        404 / absent path
            ├── ConflictError        409 stale resourceVersion, 412 If-Match, Vault check-and-set
            ├── ForbiddenError       401/403, missing Vault capability
            └── RejectedError        422 / invalid input; ``details`` = [(path, reason)]

Why translate: hvac errors carry URLs and response bodies, kubernetes ``ApiException`` carries
the whole response body (which for a Secret is its data).  Adapters catch library exceptions
at the edge and raise a ClientError built only from what the adapter itself knows: the system,
the operation, the object, the status code.  Never ``str(exc)`` of a third-party exception.

Why temporary vs permanent (kopf's model): the waiting primitive retries a TemporaryError until
the deadline (after ``delay`` seconds when the error says how long, e.g. a 429's Retry-After),
lets a PermanentError through at once, and treats anything else the same way as a permanent
error (our own bug: retrying will not fix it).  So "OpenBao restarting" and "OpenBao says
forbidden" are handled differently without each caller deciding.  A wait that used up its
deadline is permanent: retrying it would only wait past the deadline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_PREFLIGHT = 3
EXIT_LOCKED = 4
EXIT_LOCK_LOST = 5
EXIT_JOURNAL_UNREADABLE = 6
EXIT_INTERRUPTED = 130
#: the backend moved on during the run: its current version is not the one the run wrote
EXIT_BACKEND_MOVED = 17
#: a rollback's restore the provider refuses for good: resuming it meets the same refusal
EXIT_RESTORE_REFUSED = 18
#: ``rotate status``: the chain is not closed (the document names the first broken link)
EXIT_CHAIN_OPEN = 20
#: ``rotate due --exit-code``: something is due (nothing was changed)
EXIT_DUE = 21


class RotateError(Exception):
    """Base class. ``message`` must be safe to print as is."""

    exit_code: int = EXIT_INTERNAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(RotateError):
    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class ChainFileProblem:
    file: str
    line: int | None
    path: str  # JSON path, e.g. "/credentials/dragonfly/backend/path"
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.path or '/'}: {self.reason}"


class ChainFileError(RotateError):
    exit_code = EXIT_USAGE

    def __init__(self, problems: Sequence[ChainFileProblem]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"invalid chain file ({len(self.problems)} problem(s)):\n{lines}")


class PreflightFailed(RotateError):
    exit_code = EXIT_PREFLIGHT


class NothingToAdopt(RotateError):
    """``rotate CREDENTIAL --adopt --confirm`` when the backend holds exactly the value the
    chain holds: nothing ran, nothing changed, and that is a success (exit 0).  The engine
    attaches the plan (``.plan``) that says so, for the CLI to show."""

    exit_code = EXIT_OK


class LockHeld(RotateError):
    exit_code = EXIT_LOCKED


class LockLost(RotateError):
    """A run's Lease was taken from it (``--take-over-lock`` of another run): the run stops
    at the next step boundary and changes nothing more — whoever holds the Lease now may be
    acting on the same objects."""

    exit_code = EXIT_LOCK_LOST

    def __init__(self, message: str, *, hint: str | None = None, lease: str = "",
                 taken_by: str = "") -> None:
        """``lease``: namespace/name; ``taken_by``: its holder now ("" when deleted)."""
        super().__init__(message, hint=hint)
        self.lease = lease
        self.taken_by = taken_by


class JournalUnreadable(RotateError):
    """A run's journal exists but cannot be read as one (binary, another file written over
    it, no permission): named by its run id and path, its content never shown."""

    exit_code = EXIT_JOURNAL_UNREADABLE

    def __init__(self, run_id: str, path: str, reason: str) -> None:
        self.run_id = run_id
        self.path = path
        self.reason = reason
        super().__init__(f"the journal of run {run_id} is unreadable ({reason}): {path}",
                         hint="it was not written by rotate or was damaged; move it out of "
                              "the state directory's runs/ to silence this")


class StepFailed(RotateError):
    """A step cannot do its work (not a client failure).  The run's exit code is the failed
    step's kind's (10..17, see ``rotate.engine.kinds``): the executor sets it, not this class
    — unless ``exit_code`` names a code of its own (a failure that resuming cannot fix, cli.md
    "Exit codes").  ``next_step``, when given, is what the failure message says to do in
    place of the usual ``resume``/``rollback`` commands (they would only meet it again)."""

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None,
                 next_step: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.own_exit_code = exit_code
        self.next_step = next_step


class Interrupted(RotateError):
    exit_code = EXIT_INTERRUPTED


class ClientError(RotateError):
    """A translated failure of an external system. Never built from library exception text."""

    temporary: bool = False

    def __init__(
        self,
        system: str,
        operation: str,
        reason: str,
        *,
        status: int | None = None,
        details: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.system = system
        self.operation = operation
        self.reason = reason
        self.status = status
        self.details = list(details)
        code = f" (HTTP {status})" if status is not None else ""
        super().__init__(f"{system}: {operation}: {reason}{code}")


class TemporaryError(ClientError):
    """Worth retrying; ``delay`` (seconds), when the system said how long to wait."""

    temporary = True

    def __init__(
        self,
        system: str,
        operation: str,
        reason: str,
        *,
        status: int | None = None,
        details: Sequence[tuple[str, str]] = (),
        delay: float | None = None,
    ) -> None:
        super().__init__(system, operation, reason, status=status, details=details)
        self.delay = delay


class PermanentError(ClientError):
    temporary = False


class NotFoundError(PermanentError):
    pass


class ConflictError(PermanentError):
    pass


class ForbiddenError(PermanentError):
    pass


class RejectedError(PermanentError):
    pass


def error_for_status(
    status: int, system: str, operation: str, reason: str | None = None,
    details: Sequence[tuple[str, str]] = (),
) -> ClientError:
    """The ClientError subclass an HTTP status maps to (shared by every HTTP adapter)."""
    cls: type[ClientError]
    if status in (401, 403):
        cls, default = ForbiddenError, "not allowed"
    elif status == 404:
        cls, default = NotFoundError, "not found"
    elif status in (409, 412):
        cls, default = ConflictError, "changed by someone else"
    elif status in (400, 422):
        cls, default = RejectedError, "rejected"
    elif status == 429 or status >= 500:
        cls, default = TemporaryError, "unavailable"
    else:
        cls, default = PermanentError, "unexpected answer"
    return cls(system, operation, reason or default, status=status, details=details)
