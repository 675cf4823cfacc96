"""Which optional driver a credential's providers need, and whether it is installed.

The core install talks to OpenBao, Kubernetes and the Config Center only; redis-py and psycopg
are extras (``rotate[redis]``, ``rotate[postgres]``, ``rotate[all]``).  A provider reached over
a wire protocol — a live method (``apply: redis-acl`` / ``postgres``) or a rollout provider
with a ``probe`` — needs that protocol's driver.

Invariants:

* The engine asks before it contacts anything, so a missing driver is a usage error (exit 2)
  naming the pip command, never a step failing half-way through a rotation.
* Only rotate's own drivers are checked: a plug-in's protocol is reached by the driver its
  distribution requires (docs/providers.md "Writing a plug-in").
* A driver counts as installed only when it imports, the way its adapter imports it
  (``import redis``, ``import psycopg``): one present but broken — psycopg without a libpq —
  is as missing as one never installed.  Only the drivers a credential needs are imported,
  so a Dragonfly rotation never pays for psycopg's import, nor a chain of rollout providers
  for either.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass

from rotate.chain.model import Credential, ProviderApply, WireProtocol


@dataclass(frozen=True)
class Driver:
    module: str  # what the adapter imports
    name: str  # what the operator knows it as
    extra: str  # rotate's extra that installs it


DRIVERS: dict[WireProtocol, Driver] = {
    "redis": Driver("redis", "the Redis driver (redis-py)", "redis"),
    "postgres": Driver("psycopg", "the PostgreSQL driver (psycopg 3)", "postgres"),
}


def installed(protocol: WireProtocol) -> bool:
    """Whether ``protocol``'s driver imports (the import stays cached for the adapter)."""
    try:
        importlib.import_module(DRIVERS[protocol].module)
    except ImportError:
        return False
    return True


def pip_command(extras: Iterable[str]) -> str:
    return f"pip install 'rotate[{','.join(extras)}]'"


def _uses(credential: Credential, applied: ProviderApply) -> str:
    how = f"apply: {applied.method}" if applied.live else \
        f"probe: {applied.connection.protocol if applied.connection else ''}"
    return f"{credential.name} ({applied.provider}, {how})"


def missing_drivers(credentials: Iterable[Credential]) -> list[str]:
    """One problem per missing driver, naming the credentials that need it and the pip
    command that installs it; empty when everything ``credentials`` need is installed."""
    users: dict[WireProtocol, list[str]] = {}
    for credential in credentials:
        for applied in credential.applies:
            if applied.connection is not None:
                users.setdefault(applied.connection.protocol, []).append(
                    _uses(credential, applied))
    problems = []
    for protocol, needed_by in users.items():
        # a plug-in's protocol (``mysql``) is reached by the plug-in's own driver, which its
        # distribution requires: rotate has none to check or to name
        if protocol in DRIVERS and not installed(protocol):
            driver = DRIVERS[protocol]
            problems.append(f"{driver.name} is not installed, and {', '.join(needed_by)} "
                            f"needs it: {pip_command([driver.extra])}")
    return problems


def watch_driver_missing() -> str:
    """Why ``rotate watch`` cannot run here ("" when it can): kopf, the extra ``watch``."""
    try:
        importlib.import_module("kopf")
    except ImportError:
        return ("rotate watch needs kopf, which is not installed: "
                f"{pip_command(['watch'])}")
    return ""
