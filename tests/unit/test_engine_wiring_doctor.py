"""Import cost of the engine facade, and doctor's permission report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rotate.core.waiting import CancelToken
from tests.fakes import World
from tests.support.engine import RecordingObserver, options


def test_importing_engine_loads_no_client_library() -> None:
    code = ("import sys, rotate.engine.api, rotate.engine.wiring; "
            "print(','.join(m for m in ('hvac', 'kubernetes', 'httpx', 'jsonschema') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == ""


def test_doctor_reports_each_missing_permission(world: World, tmp_path: Path) -> None:
    checks = world.engine().doctor(options(tmp_path))
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    world.kube.denied |= {("patch", "Deployment", "shop"), ("create", "Lease", "rotate-system")}
    world.vault.capability_map["secret/data/infra/dragonfly"] = ["read"]
    by_name = {c.check: c for c in world.engine().doctor(options(tmp_path))}
    perms = by_name["kubernetes.permissions dragonfly"]
    assert not perms.ok
    assert "patch deployments in shop" in perms.detail
    assert "create leases in rotate-system" in perms.detail
    caps = by_name["backend.capabilities dragonfly"]
    assert not caps.ok and "update on secret/data/infra/dragonfly" in caps.detail


def test_lock_namespace_missing_is_a_preflight_failure(world: World, tmp_path: Path) -> None:
    import pytest

    from rotate.core.errors import NotFoundError, PreflightFailed

    world.kube.faults.arm("create", NotFoundError("kubernetes", "create lease", "not found",
                                                  status=404))
    with pytest.raises(PreflightFailed) as exc:
        world.engine().run(options(tmp_path), "dragonfly", RecordingObserver(), CancelToken())
    assert "rotate-system" in exc.value.message
    assert world.vault.writes == 0


def test_a_missing_lock_namespace_fails_doctor_and_preflight_with_the_fix(
        world: World, tmp_path: Path) -> None:
    """rotate never creates the lock namespace (docs/chain-file.md, cluster.lockNamespace):
    its check fails, naming the command that creates it; nothing is created."""
    world.kube.delete("Namespace", None, "rotate-system")
    fix = "kubectl create namespace rotate-system"
    by_name = {c.check: c for c in world.engine().doctor(options(tmp_path))}
    check = by_name["kubernetes.lock-namespace"]
    assert not check.ok and fix in check.detail and "never the namespace" in check.detail
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    failed = {c.check: c for c in plan.preflight if not c.ok}
    assert not plan.ok and fix in failed["kubernetes.lock-namespace"].detail
    assert ("Namespace", "", "rotate-system") not in world.kube.objects
