"""Every error `rotate` raises, drawn once.

::

    RotateError                      exit_code; message is safe to print (no secret, no URL)
    ├── UsageError                   2   bad flags, unknown credential
    ├── ChainFileError               2   invalid chain file: file, line, JSON path
    ├── PreflightFailed              3   nothing was changed
    ├── LockHeld                     4   another run holds the Lease
    ├── StageFailed                  10..16 by stage; carries the run state and next commands
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

Why temporary vs permanent: the waiting primitive retries TemporaryError until the deadline and
lets PermanentError through at once (the kopf distinction), so "OpenBao restarting" and
"OpenBao says forbidden" are handled differently without each caller deciding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_PREFLIGHT = 3
EXIT_LOCKED = 4
EXIT_INTERRUPTED = 130

#: stage number (1..4 with sub-kinds) → exit code, per cli.md
EXIT_BY_STEP_KIND: dict[str, int] = {
    "backend.write": 10,
    "backend.retire": 10,
    "sync.trigger": 11,
    "sync.wait": 11,
    "provider.restart": 12,
    "provider.wait": 12,
    "provider.apply": 12,  # live methods (docs/chain-file.md "Provider apply methods")
    "provider.verify": 12,
    "provider.retire": 12,
    "config.harvest": 13,
    "config.write": 13,
    "token.mint": 14,
    "token.revoke": 14,
    "consumer.restart": 15,
    "consumer.wait": 15,
    "readyz.check": 16,
}


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


class LockHeld(RotateError):
    exit_code = EXIT_LOCKED


class StageFailed(RotateError):
    """A step failed after the chain started changing. ``exit_code`` follows the step kind."""

    def __init__(self, step_kind: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.step_kind = step_kind
        self.exit_code = EXIT_BY_STEP_KIND.get(step_kind, EXIT_INTERNAL)


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
    temporary = True


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
