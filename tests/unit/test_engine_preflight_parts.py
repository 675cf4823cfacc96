"""Preflight's parts run at once, and their checks read in one fixed order whatever order
they finish in (rotate.engine.preflight)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import World
from tests.support.engine import options

#: the check names of the fake world's plan, in the order of chain.md's stages
EXPECTED_ORDER = (
    ["strategy", "backend.reachable", "backend.capabilities", "kubernetes.permissions",
     "kubernetes.lock-namespace", "externalsecret.ready", "secret.exists",
     "provider.healthy deployment/dragonfly/dragonfly"]
    + [f"consumer.healthy {c}" for c in ("cart", "order", "user")]
    + ["configcenter.reachable"]
    + [f"configcenter.{k} {c}" for c in ("cart", "order", "user")
       for k in ("key", "writable", "tokens")]
    + [f"document.valid {c}" for c in ("cart", "order", "user")]
)


def _first_call_waits(obj: Any, name: str, gate: Callable[[], None]) -> None:
    """``obj.name`` calls ``gate`` the first time it is called, then behaves as before."""
    original, called = getattr(obj, name), threading.Event()

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not called.is_set():
            called.set()
            gate()
        return original(*args, **kwargs)

    setattr(obj, name, wrapped)


def test_the_parts_run_at_once(world: World, tmp_path: Path) -> None:
    # The backend's, the Config Center's and the sync objects' parts meet at a barrier:
    # run one after the other, the first would wait alone and the barrier would break.
    barrier = threading.Barrier(3, timeout=5.0)
    _first_call_waits(world.vault, "health", barrier.wait)
    _first_call_waits(world.cc, "health", barrier.wait)
    _first_call_waits(world.kube, "read_secret_key", barrier.wait)  # secret.exists
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    assert plan.ok, [c for c in plan.preflight if not c.ok]
    assert not barrier.broken


@pytest.mark.parametrize("slowest", ["vault", "cc"])
def test_checks_keep_their_order_whichever_part_finishes_last(
        world: World, tmp_path: Path, slowest: str) -> None:
    # The slowest part waits until every other part has read something of its own.
    others_read = threading.Barrier(2, timeout=5.0)
    late = world.vault if slowest == "vault" else world.cc
    _first_call_waits(late, "health", others_read.wait)
    _first_call_waits(world.kube, "read_secret_key", others_read.wait)
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    names = [c.check for c in plan.preflight]
    assert [n for n in names if n in EXPECTED_ORDER] == EXPECTED_ORDER
    assert plan.ok
