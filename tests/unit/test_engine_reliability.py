"""Issue 10: a shared provider is locked, rollbacks refuse to lose data, resume keeps an
operator-supplied value, tokens minted by a run are never left live."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from rotate.core.errors import LockHeld
from rotate.engine.lock import provider_lease_name
from tests.fakes import World
from tests.unit.engine_support import (
    run,
    world_fixture,  # noqa: F401 - fixture
)


def _provider_lease(world: World, holder: str) -> str:
    ref = world.chain.credentials["dragonfly"].providers[0]
    name = provider_lease_name(ref)
    world.kube.put({"kind": "Lease", "metadata": {"name": name, "namespace": "rotate-system"},
                    "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30,
                             "renewTime": datetime.now(UTC).strftime(
                                 "%Y-%m-%dT%H:%M:%S.%fZ")}})
    return name


def test_a_run_on_a_shared_provider_exits_4_naming_the_holder(
    world: World, tmp_path: Path
) -> None:
    """Another credential (dragonfly-acl) rolling the same Dragonfly holds its Lease."""
    name = _provider_lease(world, "carol@host/20261203T000000Z-dragonfly-acl-abcd")
    with pytest.raises(LockHeld) as exc:
        run(world, tmp_path)
    assert exc.value.exit_code == 4
    assert "dragonfly-acl" in exc.value.message and name in exc.value.message
    assert world.vault.writes == 0
    # the credential's own Lease, taken first, was given back
    assert ("Lease", "rotate-system", "rotate-dragonfly") not in world.kube.objects


def test_a_run_holds_its_providers_lease_and_releases_it(world: World, tmp_path: Path) -> None:
    ref = world.chain.credentials["dragonfly"].providers[0]
    seen: list[bool] = []
    original = world.vault.write

    def write(*a: object, **kw: object) -> int:
        seen.append(("Lease", "rotate-system", provider_lease_name(ref)) in world.kube.objects)
        return original(*a, **kw)  # type: ignore[arg-type]

    world.vault.write = write  # type: ignore[method-assign]
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    assert seen and all(seen)
    assert ("Lease", "rotate-system", provider_lease_name(ref)) not in world.kube.objects
