"""bench.controllers: each Deployment's patch paired with its first new pod."""

from __future__ import annotations

from typing import Any

from bench import controllers
from bench.world import Event


def pod(at: float, app: str, kind: str = "ADDED") -> Event:
    md: dict[str, Any] = {"name": f"{app}-abc", "labels": {"app": app}}
    return Event(at, kind, {"metadata": md})


def test_each_patch_is_paired_with_the_first_new_pod_after_it() -> None:
    patched = {"cart": 10.1, "order": 10.15, "user": 10.3}
    pods = [pod(8.0, "cart"),  # an older pod
            pod(10.35, "cart"), pod(10.5, "cart", "MODIFIED"), pod(10.6, "cart"),
            pod(10.9, "order"), pod(10.95, "payment")]  # payment was not patched
    found = controllers.reactions(patched, pods)
    assert {k: round(v, 3) for k, v in found.items()} == {"cart": 0.25, "order": 0.75}
    line = controllers.render(found, [0.01, 0.03, 0.02], 3, 20)
    assert line.startswith("3 Deployments patched at once, the load at 20 req/s")
    assert "the PATCH round trip median 0.020 s, max 0.030 s" in line
    assert "(2 of 3 seen) median 0.500 s, max 0.750 s" in line


def test_nothing_seen_says_so() -> None:
    assert controllers.render({}, [], 4, 0) == (
        "4 Deployments patched at once, no load: no new pod seen")
