"""The providers' drivers are extras: a chain that needs a missing one is a usage error
(exit 2) naming the pip command, before anything is contacted; everything else works
without them.

A missing driver is simulated the way Python itself reports one: ``sys.modules[name] = None``
makes ``import name`` raise ImportError (ModuleNotFoundError), in-process through
monkeypatch or first thing in a child interpreter running the real CLI.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rotate.chain.model import (
    AdminAuth,
    Chain,
    ProviderApply,
    ProviderConnection,
    ServicePortRef,
)
from rotate.core.errors import UsageError
from rotate.core.refs import ObjectRef
from tests.fakes import World, make_chain
from tests.support.engine import options
from tests.support.paths import EXAMPLE_CHAIN

DRAGONFLY = ObjectRef("Deployment", "dragonfly", "dragonfly")
REDIS_PIP = "pip install 'rotate[redis]'"
POSTGRES_PIP = "pip install 'rotate[postgres]'"


def _without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def _with_provider(tmp_path: Path, method: str, protocol: str) -> Chain:
    """The fake world's chain, its ``dragonfly`` provider reached over ``protocol``:
    ``method`` is a live method, or ``rollout`` with a ``probe``."""
    chain = make_chain(tmp_path)
    live = method != "rollout"
    applied = ProviderApply(
        DRAGONFLY, method,  # type: ignore[arg-type]
        ProviderConnection(protocol,  # type: ignore[arg-type]
                           ServicePortRef("dragonfly", "dragonfly", 6379)),
        user="default", admin=AdminAuth("default") if live else None)
    cred = dataclasses.replace(chain.credentials["dragonfly"], applies=(applied,))
    return dataclasses.replace(chain, credentials={"dragonfly": cred})


@pytest.mark.parametrize(("method", "protocol", "driver", "pip"), [
    ("redis-acl", "redis", "redis", REDIS_PIP),
    ("postgres", "postgres", "psycopg", POSTGRES_PIP),
    ("rollout", "redis", "redis", REDIS_PIP),  # a probe needs the driver too
])
def test_a_provider_whose_driver_is_missing_stops_every_operation_before_any_contact(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str, protocol: str,
        driver: str, pip: str) -> None:
    world = World(_with_provider(tmp_path, method, protocol))
    world.setup()
    _without(monkeypatch, driver)
    engine = world.engine()
    for operation in (lambda: engine.plan(options(tmp_path), "dragonfly"),
                      lambda: engine.doctor(options(tmp_path))):
        with pytest.raises(UsageError) as info:
            operation()
        assert info.value.exit_code == 2
        assert pip in info.value.message
        assert "dragonfly (deployment/dragonfly/dragonfly" in info.value.message
    assert world.vault.faults.calls == {} and world.vault.writes == 0
    assert world.kube.faults.calls == {}


def test_rollout_providers_need_no_driver(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(make_chain(tmp_path))
    world.setup()
    _without(monkeypatch, "redis", "psycopg")
    engine = world.engine()
    assert engine.plan(options(tmp_path), "dragonfly").ok
    assert all(c.ok for c in engine.doctor(options(tmp_path)))
    assert [c.name for c in engine.list_credentials(options(tmp_path))] == ["dragonfly"]


def _cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child interpreter in which neither driver can be imported."""
    code = ("import runpy, sys\n"
            "sys.modules['redis'] = None\n"
            "sys.modules['psycopg'] = None\n"
            f"sys.argv = ['rotate', *{args!r}]\n"
            "runpy.run_module('rotate', run_name='__main__')\n")
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}
    env = {**keep, "NO_COLOR": "1", "COLUMNS": "100", "HOME": str(tmp_path),
           "ROTATE_STATE_DIR": str(tmp_path / "state"), "ROTATE_CHAIN": str(EXAMPLE_CHAIN)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


def test_the_cli_without_drivers(tmp_path: Path) -> None:
    for args in (["--version"], ["--help"], ["list"]):
        done = _cli(args, tmp_path)
        assert done.returncode == 0, (args, done.stderr)
        assert "pip install" not in done.stdout + done.stderr
    assert "dragonfly" in _cli(["list"], tmp_path).stdout

    refused = _cli(["dragonfly"], tmp_path)  # apply: redis-acl
    assert refused.returncode == 2, refused.stderr
    assert REDIS_PIP in refused.stderr and POSTGRES_PIP not in refused.stderr
    assert "Redis driver (redis-py) is not installed" in refused.stderr

    doctor = _cli(["doctor"], tmp_path)  # the example chain needs both
    assert doctor.returncode == 2, doctor.stderr
    assert REDIS_PIP in doctor.stderr and POSTGRES_PIP in doctor.stderr

    rollout_only = _cli(["dragonfly-acl"], tmp_path)  # stops at the missing settings
    assert rollout_only.returncode == 2, rollout_only.stderr
    assert "pip install" not in rollout_only.stderr
    assert "BAO_ADDR" in rollout_only.stderr
