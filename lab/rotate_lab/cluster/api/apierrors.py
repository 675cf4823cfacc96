"""Errors of the lab's API, shaped as Kubernetes ``Status`` objects.

:class:`ApiError` is raised by the store and the API server alike; the server renders it with
:meth:`ApiError.status`.  The constructors below produce the exact ``reason`` strings and
message wording of a real API server, because clients (kubectl, the Python client, our own
adapters) key off ``reason`` and users read the message.
"""

from __future__ import annotations

from typing import Any

from rotate_lab.cluster.api.resources import Kind


class ApiError(Exception):
    def __init__(
        self, code: int, reason: str, message: str, *, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            out["details"] = self.details
        return out


def _details(kind: Kind, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": kind.plural}
    if kind.group:
        details["group"] = kind.group
    return details


def not_found(kind: Kind, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{kind.group_resource} "{name}" not found',
                    details=_details(kind, name))


def already_exists(kind: Kind, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{kind.group_resource} "{name}" already exists',
                    details=_details(kind, name))


def conflict(kind: Kind, name: str) -> ApiError:
    return ApiError(
        409, "Conflict",
        f'Operation cannot be fulfilled on {kind.group_resource} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        details=_details(kind, name))


def invalid(kind: Kind, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """``causes``: (field, reason e.g. FieldValueRequired, message e.g. "Required value")."""
    qualified = f"{kind.kind}.{kind.group}" if kind.group else kind.kind
    text = ", ".join(f"{field}: {msg}" for field, _, msg in causes)
    if len(causes) > 1:
        text = f"[{text}]"
    details: dict[str, Any] = {"name": name, "kind": kind.kind,
                               "causes": [{"reason": r, "message": m, "field": f}
                                          for f, r, m in causes]}
    if kind.group:
        details["group"] = kind.group
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {text}', details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str = "the server does not allow this method on the requested "
                       "resource") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)
