"""A fake lab control (the ``lab`` entry of CliState.extra) for the ``rotate lab …`` tests:
records each call, answers with a canned status shaped like ``rotate_lab.control``'s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rotate.core.errors import RotateError, UsageError

STATUS = {
    "dir": "/w/.rotate-lab", "env_file": "/w/.rotate-lab/env", "running": True,
    "parts": {"openbao": {"addr": "http://127.0.0.1:41001", "pid": 11, "healthy": True},
              "kubernetes": {"server": "https://127.0.0.1:41002", "kubeconfig": "kc",
                             "pid": 12, "healthy": True},
              "config_center": {"url": "http://127.0.0.1:41003", "pid": 13, "healthy": False},
              "dragonfly": {"addr": "127.7.2.1:6379"}},
    "faults": {"crashloop": ["cart"]},
}


class LabFailed(RotateError):
    pass


@dataclass
class FakeLab:
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    fail_up: bool = False
    reported: dict[str, Any] = field(default_factory=lambda: STATUS)

    def up(self, dir: Path, profile: str, reloader: bool, *,
           on_progress: Callable[[str], None], services: int | None = None,
           nice: int = 0, extras: tuple[str, ...] = ()) -> dict[str, Any]:
        if services is not None:
            from rotate_lab.shop.scaled import check_count

            check_count(services)
        self.calls.append(("up", dir, profile, reloader) + ((nice,) if nice else ())
                          + ((extras,) if extras else ()))
        on_progress("starting openbao")
        if self.fail_up:
            raise LabFailed("lab up failed (openbao): exited 1", hint="logs: DIR/logs")
        return STATUS

    def down(self, dir: Path) -> list[str]:
        self.calls.append(("down", dir))
        return ["stopped cluster (pid 12)", "stopped openbao (pid 11)"]

    def status(self, dir: Path) -> dict[str, Any]:
        self.calls.append(("status", dir))
        return self.reported

    def fault(self, dir: Path, kind: str | None, target: str | None,
              clear: bool) -> dict[str, Any]:
        self.calls.append(("fault", dir, kind, target, clear))
        if kind == "nonsense":
            raise UsageError("unknown fault 'nonsense'")
        return {} if clear else {kind or "": [target] if target else True}
