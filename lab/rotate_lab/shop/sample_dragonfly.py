"""The sample service's Dragonfly client: just enough RESP2 over one socket, and a
document's Dragonfly section (:mod:`rotate_lab.shop.sample_service`).

Kept apart from the HTTP service as :mod:`.sample_postgres` and :mod:`.sample_mariadb` are:
one module per backend the document can name, each given the lab's resolver.  Standard
library only (a pod starts in well under a second).

Invariants:

- Every call logs in afresh (AUTH, then the commands, in one write): a password the server
  no longer holds fails the very next request, which is what ``/readyz`` must show.
- A password file is read again at every login (a Secret volume the kubelet refreshes).
- An error's text never carries the password: only the first word of a server's error
  reply (WRONGPASS, NOAUTH, ERR) and the command's name.
- A lost connection (a server restarting) is retried once on a fresh one; an answer such
  as WRONGPASS never is.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

IO_TIMEOUT = 2.0


class RespError(Exception):
    """A Dragonfly problem; the message never carries the password."""


class RespConnectionLost(RespError):
    """The connection failed or was closed (a server restarting), not an answer of it."""


def _encode(*args: str) -> bytes:
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        b = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class Resp:
    """One connection speaking just enough RESP2: simple strings, errors, integers, bulk."""

    def __init__(self, host: str, port: int, resolve: Callable[[str], str]) -> None:
        try:
            self.sock = socket.create_connection((resolve(host), port), timeout=IO_TIMEOUT)
        except OSError as exc:
            raise RespConnectionLost(f"cannot connect to dragonfly at {host}:{port}") from exc
        self.buf = self.sock.makefile("rb")

    def close(self) -> None:
        try:
            self.buf.close()
            self.sock.close()
        except OSError:
            pass

    def pipeline(self, *commands: tuple[str, ...]) -> list[str | int | None]:
        """Send every command in one write, then read their replies in order.

        One round trip instead of one per command: each goes through the lab's kube-proxy,
        which the benchmark's load keeps busy.  The first error reply raises; the commands
        after it (on this connection, closed by the caller) are not read."""
        try:
            self.sock.sendall(b"".join(_encode(*args) for args in commands))
        except OSError as exc:
            raise RespConnectionLost(f"dragonfly I/O error on {commands[0][0]}") from exc
        return [self._reply(args) for args in commands]

    def _reply(self, args: tuple[str, ...]) -> str | int | None:
        try:
            line = self.buf.readline()
            if not line.endswith(b"\r\n"):
                raise RespConnectionLost("dragonfly closed the connection")
            kind, rest = line[:1], line[1:-2].decode(errors="replace")
            if kind == b"+":
                return rest
            if kind == b"-":
                # First word only (e.g. WRONGPASS, NOAUTH, ERR): safe, never echoes input.
                raise RespError(f"dragonfly answered {rest.split(' ', 1)[0]} to {args[0]}")
            if kind == b":":
                return int(rest)
            if kind == b"$":
                n = int(rest)
                if n < 0:
                    return None
                data = self.buf.read(n + 2)
                return data[:-2].decode(errors="replace")
            raise RespError("unexpected reply from dragonfly")
        except OSError as exc:
            raise RespConnectionLost(f"dragonfly I/O error on {args[0]}") from exc


class Dragonfly:
    """A document's Dragonfly section (host, port, password or password_file, username):
    every call logs in on a fresh connection."""

    def __init__(self, section: dict[str, Any], resolve: Callable[[str], str],
                 what: str = "dragonfly") -> None:
        self._resolve = resolve
        self.host = str(section.get("host") or "")
        self.port = int(section.get("port") or 6379)
        password = section.get("password")
        self._password = None if password in (None, "") else str(password)
        #: a file read afresh on every login (a Secret volume the kubelet refreshes)
        self._password_file = str(section.get("password_file") or "") or None
        username = section.get("username")
        self._username = None if username in (None, "") else str(username)
        if not self.host:
            raise ValueError(f"{what} section has no host")

    def _auth(self) -> list[tuple[str, ...]]:
        if self._password_file is not None:
            try:
                with open(self._password_file, encoding="utf-8") as f:
                    self._password = f.read().strip() or None
            except OSError:
                self._password = None
        if self._password is not None and self._username is not None:
            return [("AUTH", self._username, self._password)]
        if self._password is not None:
            return [("AUTH", self._password)]
        return []

    def _session(self, *commands: tuple[str, ...]) -> list[str | int | None]:
        """A fresh connection: AUTH (when the document has a password), then ``commands``,
        all in one write; the replies after AUTH's.  A fresh login per call is the point: a
        password the server no longer holds fails the very next request."""
        auth = self._auth()
        conn = Resp(self.host, self.port, self._resolve)
        try:
            return conn.pipeline(*auth, *commands)[len(auth):]
        finally:
            conn.close()

    def ping(self) -> None:
        def attempt() -> None:
            if self._session(("PING",)) != ["PONG"]:
                raise RespError("dragonfly did not answer PONG")

        self._once_more(attempt)

    def round_trip(self, key: str, value: str) -> None:
        def attempt() -> None:
            if self._session(("SET", key, value), ("GET", key))[1] != value:
                raise RespError("dragonfly GET returned a different value")

        self._once_more(attempt)

    @staticmethod
    def _once_more(attempt: Callable[[], None]) -> None:
        """Like Redis clients: a connection lost to a restarting server is retried once on a
        fresh connection (the Service then routes to a live pod); an *answer* such as
        WRONGPASS is never retried — a rejected password must show."""
        try:
            attempt()
        except RespConnectionLost:
            attempt()
