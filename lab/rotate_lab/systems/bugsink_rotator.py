"""The lab's custom rotator for Bugsink's superuser (image ``rotate-lab/bugsink-rotator``),
the ``job`` of credential ``bugsink-admin`` (``apply: job``, docs/providers.md).

rotate runs it once per phase with ``ROTATE_PHASE``; the values are the files ``old`` and
``new`` under ``ROTATE_VALUES_DIR`` (a Secret rotate mounts) — never env or argv.  It speaks
to Bugsink as a browser does (:mod:`.bugsink_web`), at ``BUGSINK_URL`` (a Service name,
resolved through the lab's hosts file), as user ``BUGSINK_ADMIN``:

* ``set`` / ``undo-set``: log in with ``old`` and change the password to ``new`` through
  Bugsink's change-password page; nothing when ``new`` already logs in (idempotent);
* ``test`` / ``undo-test``: ``new`` logs in and ``old`` is refused;
* ``finish``: nothing to retire (``set`` replaced the one password) — it checks ``old`` is
  refused.

Exit 0 on success, 1 with the reason on the last line otherwise.  It never prints a value.

Lab faults (``rotate lab fault``, target: a phase name, or none for every phase):
``rotator-fail`` exits 1 before touching Bugsink; ``rotator-hang`` never ends (the Job's
deadline stops it).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from rotate_lab.faults import Faults
from rotate_lab.systems import bugsink_web as web

#: how long the rotator waits for Bugsink to answer at all
REACH_DEADLINE = 30.0


def _resolve(url: str) -> str:
    """``BUGSINK_URL`` with its host looked up in the lab's hosts file (the lab's DNS)."""
    parts = urlsplit(url)
    hosts = os.environ.get("LAB_HOSTS_FILE")
    host = parts.hostname or ""
    if hosts and Path(hosts).exists():
        for line in Path(hosts).read_text().splitlines():
            fields = line.split()
            if len(fields) >= 2 and host in fields[1:]:
                netloc = fields[0] + (f":{parts.port}" if parts.port else "")
                return urlunsplit(parts._replace(netloc=netloc))
    return url


def _accepts(url: str, user: str, password: str) -> bool:
    deadline = time.monotonic() + REACH_DEADLINE
    while True:
        try:
            return web.accepts(url, user, password)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def run(phase: str, url: str, user: str, old: str, new: str) -> str:
    """What the phase did; raises :class:`web.BugsinkError` when it failed."""
    if phase.endswith("set"):
        if _accepts(url, user, new):
            return "the new password already logs in: nothing to change"
        client = web.login(url, user, old)
        if client is None:
            raise web.BugsinkError("neither the old nor the new password logs in")
        try:
            web.change_password(client, old, new)
        finally:
            client.close()
        return "password changed through Bugsink's change-password page"
    if phase.endswith("test"):
        if not _accepts(url, user, new):
            raise web.BugsinkError("the new password is refused at the login page")
        if _accepts(url, user, old):
            raise web.BugsinkError("the old password still logs in")
        return "the new password logs in; the old one is refused"
    if phase.endswith("finish"):
        if _accepts(url, user, old):
            raise web.BugsinkError("the old password still logs in")
        return "nothing to retire: the old password is refused"
    raise web.BugsinkError(f"unknown phase {phase!r}")


def main() -> int:
    phase = os.environ.get("ROTATE_PHASE", "")
    values = Path(os.environ.get("ROTATE_VALUES_DIR", "/var/run/rotate"))
    url = _resolve(os.environ.get("BUGSINK_URL", "http://bugsink.bugsink.svc:8000"))
    user = os.environ.get("BUGSINK_ADMIN", "admin@shop.example")
    print(f"bugsink-rotator: phase {phase} for {user} at {url}", flush=True)
    faults = Faults(Path(os.environ.get("LAB_FAULTS_FILE", "/nonexistent")))
    if faults.active("rotator-hang", phase):
        print("bugsink-rotator: lab fault rotator-hang: waiting forever", flush=True)
        while True:
            time.sleep(3600)
    if faults.active("rotator-fail", phase):
        print(f"bugsink-rotator: {phase} failed: lab fault rotator-fail", flush=True)
        return 1
    try:
        old = (values / "old").read_text().strip()
        new = (values / "new").read_text().strip()
        print(f"bugsink-rotator: {run(phase, url, user, old, new)}", flush=True)
    except (OSError, httpx.HTTPError, web.BugsinkError) as exc:
        print(f"bugsink-rotator: {phase} failed: {type(exc).__name__}: {exc}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
