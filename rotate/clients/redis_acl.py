"""The live Redis/Dragonfly ACL adapter (redis-py): one admin connection, fresh AUTH probes.

Invariants:

* Passwords cross this module only as :class:`Secret` and leave it only as command arguments
  on the wire (``ACL SETUSER user >pw``).  Redis 7 redacts ACL arguments from SLOWLOG and
  MONITOR; its *error replies* to ACL SETUSER quote the offending rule, password included,
  which is one more reason why no redis-py exception text is ever kept: every failure is
  translated by exception class into :mod:`rotate.core.errors` types.
* ``auth_ok`` opens its own connection, so it proves what a consumer connecting now would
  see, not what the admin session believes.
* One attempt per call: redis-py's built-in retries are switched off, retrying belongs to the
  caller's deadline (:func:`rotate.core.waiting.wait_for`), which retries TemporaryError only.

In Redis 6+ and Dragonfly ≥ 1.20 ``requirepass`` *is* the password of the ``default`` user:
``ACL SETUSER default >pw`` works like ``CONFIG SET requirepass`` without dropping the other
passwords, so the ``default`` user needs no special case here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import redis
import redis.exceptions as rx
from redis.backoff import NoBackoff
from redis.retry import Retry

from rotate.clients.provider_seams import AclUser
from rotate.clients.seams import Endpoint
from rotate.core.errors import (
    ClientError,
    ForbiddenError,
    NotFoundError,
    PermanentError,
    TemporaryError,
)
from rotate.core.secret import Secret

SYSTEM = "redis"


@contextmanager
def translated(operation: str) -> Iterator[None]:
    """Map redis-py exceptions to ClientError by class; their text never leaves."""
    try:
        yield
    except ClientError:
        raise
    except (rx.RedisError, OSError) as exc:
        raise _translate(exc, operation) from None


def _translate(exc: Exception, operation: str) -> ClientError:
    if isinstance(exc, rx.AuthenticationError | rx.AuthorizationError):
        return ForbiddenError(SYSTEM, operation, "authentication refused")
    if isinstance(exc, rx.NoPermissionError):
        return ForbiddenError(SYSTEM, operation, "the admin user lacks the ACL permission "
                                                 "(NOPERM)")
    if isinstance(exc, rx.AuthenticationWrongNumberOfArgsError):
        return PermanentError(SYSTEM, operation, "the server does not support ACL users "
                                                 "(Redis < 6?)")
    if isinstance(exc, rx.BusyLoadingError | rx.TryAgainError):
        return TemporaryError(SYSTEM, operation, "server is loading")
    if isinstance(exc, rx.ConnectionError | rx.TimeoutError | OSError):
        return TemporaryError(SYSTEM, operation, "unreachable")
    if isinstance(exc, rx.ResponseError):
        return PermanentError(SYSTEM, operation, "refused by the server")
    return PermanentError(SYSTEM, operation, "failed")


def _client(endpoint: Endpoint, user: str, password: Secret, *, tls: bool,
            timeout: float) -> redis.Redis:
    """A connected, authenticated single connection.  ``driver_info=None``: no ``CLIENT
    SETINFO`` after AUTH — two round trips fewer on each of the run's short connections
    (through a Service's proxy, on a busy node, each one counts), and a probe's connection
    sends AUTH and nothing else, which a user without ``CLIENT`` permission must allow."""
    return redis.Redis(
        host=endpoint.host, port=endpoint.port, username=user, password=password.reveal(),
        ssl=tls, socket_timeout=timeout, socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0), single_connection_client=True,
        decode_responses=False, protocol=2, driver_info=None,
    )


class RedisAcl:
    """An authenticated admin connection (``connect`` raises ForbiddenError when refused)."""

    def __init__(self, conn: redis.Redis, endpoint: Endpoint, *, tls: bool,
                 timeout: float) -> None:
        self._conn = conn
        self._endpoint = endpoint
        self._tls = tls
        self._timeout = timeout

    @classmethod
    def connect(cls, endpoint: Endpoint, admin_user: str, admin_password: Secret, *,
                tls: bool = False, timeout: float = 5.0) -> RedisAcl:
        """Open and authenticate the admin connection (redis-py connects in the constructor
        of a single-connection client): ForbiddenError when refused."""
        with translated(f"connect to {endpoint} as {admin_user}"):
            conn = _client(endpoint, admin_user, admin_password, tls=tls, timeout=timeout)
        return cls(conn, endpoint, tls=tls, timeout=timeout)

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    def _acl(self, operation: str, *args: str) -> Any:
        with translated(operation):
            return self._conn.execute_command("ACL", *args)  # type: ignore[no-untyped-call]

    def user(self, user: str) -> AclUser:
        reply = self._acl(f"ACL GETUSER {user}", "GETUSER", user)
        if reply is None:
            raise NotFoundError(SYSTEM, f"ACL GETUSER {user}", "no such ACL user")
        fields = _pairs(reply)
        flags = {_text(f) for f in fields.get("flags", [])}
        passwords = fields.get("passwords", [])
        return AclUser(user, enabled="on" in flags, nopass="nopass" in flags,
                       password_count=len(passwords) if isinstance(passwords, list) else 0)

    def add_password(self, user: str, password: Secret) -> None:
        self.user(user)  # ACL SETUSER would create a missing user: rotate creates nothing
        self._acl(f"ACL SETUSER {user} >(new)", "SETUSER", user, ">" + password.reveal())

    def remove_password(self, user: str, password: Secret) -> None:
        self.user(user)
        try:
            self._acl(f"ACL SETUSER {user} <(old)", "SETUSER", user, "<" + password.reveal())
        except ForbiddenError:
            raise
        except PermanentError:
            # Redis answers an error for a password the user does not hold. Removing it is
            # then already done: confirm from outside rather than trusting the reply's text.
            if self.auth_ok(user, password):
                raise
        return None

    def set_only_password(self, user: str, password: Secret) -> None:
        self.user(user)
        self._acl(f"ACL SETUSER {user} resetpass >(new)", "SETUSER", user, "resetpass",
                  ">" + password.reveal())

    def auth_ok(self, user: str, password: Secret) -> bool:
        return RedisAuthProbe(self._endpoint, tls=self._tls, timeout=self._timeout).accepts(
            user, password)

    def close(self) -> None:
        _close_quietly(self._conn)


class RedisAuthProbe:
    """``AUTH`` from outside: a fresh connection per call, closed at once."""

    def __init__(self, endpoint: Endpoint, *, tls: bool = False, timeout: float = 5.0) -> None:
        self._endpoint = endpoint
        self._tls = tls
        self._timeout = timeout

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    def accepts(self, user: str, password: Secret) -> bool:
        """True: AUTH accepted; False: refused (WRONGPASS, disabled user); TemporaryError
        when the server cannot be reached.

        Only AUTH is judged: redis-py authenticates while connecting, and nothing else is
        sent, because the user may lack every other command (a NOPERM after a successful
        AUTH still means the password was accepted).
        """
        operation = f"AUTH {user} at {self._endpoint}"
        try:
            probe = _client(self._endpoint, user, password, tls=self._tls,
                            timeout=self._timeout)
        except rx.AuthenticationError:
            return False
        except rx.NoPermissionError:
            return True
        except (rx.RedisError, OSError) as exc:
            raise _translate(exc, operation) from None
        _close_quietly(probe)
        return True


def _close_quietly(client: redis.Redis) -> None:
    with suppress(rx.RedisError, OSError):
        client.close()


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _pairs(reply: Any) -> dict[str, Any]:
    """ACL GETUSER's reply (a flat RESP2 list or a RESP3 map) as a dict with str keys."""
    if isinstance(reply, dict):
        return {_text(k): v for k, v in reply.items()}
    items = list(reply) if isinstance(reply, list | tuple) else []
    return {_text(items[i]): items[i + 1] for i in range(0, len(items) - 1, 2)}
