"""`rotate lab …` parsing and output, against a fake lab control (CliState seam)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rotate.core.errors import RotateError, UsageError

try:
    from .cli_fake_engine import invoke
except ImportError:
    from cli_fake_engine import invoke  # type: ignore[no-redef]

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
           nice: int = 0) -> dict[str, Any]:
        if services is not None:
            from rotate_lab.shop.scaled import check_count

            check_count(services)
        self.calls.append(("up", dir, profile, reloader) + ((nice,) if nice else ()))
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


def test_up_passes_options_and_reports_progress_on_stderr() -> None:
    lab = FakeLab()
    result = invoke(["lab", "up", "--profile", "realistic", "--reloader", "--dir", "L"], lab=lab)
    assert result.exit_code == 0, result.stderr
    assert lab.calls == [("up", Path("L"), "realistic", True)]
    assert "starting openbao" in result.stderr
    assert "openbao        http://127.0.0.1:41001   healthy" in result.stdout
    assert "next: . /w/.rotate-lab/env && rotate dragonfly" in result.stdout


def test_up_services_out_of_range_is_exit_2() -> None:
    lab = FakeLab()
    result = invoke(["lab", "up", "--services", "101", "--dir", "L"], lab=lab)
    assert result.exit_code == 2, result.stderr
    assert "--services 101 is out of range: 3 to 100" in result.stderr
    assert "Traceback" not in result.stderr


def test_up_passes_nice() -> None:
    lab = FakeLab()
    result = invoke(["lab", "up", "--nice", "10", "--dir", "L"], lab=lab)
    assert result.exit_code == 0, result.stderr
    assert lab.calls == [("up", Path("L"), "fast", False, 10)]


def test_status_text_names_a_lab_at_a_niceness() -> None:
    result = invoke(["lab", "status"], lab=FakeLab(reported={**STATUS, "nice": 10}))
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == "lab in /w/.rotate-lab: running, at nice 10"


def test_up_failure_exits_with_the_error_and_its_hint() -> None:
    result = invoke(["lab", "up"], lab=FakeLab(fail_up=True))
    assert result.exit_code == 1
    assert "error: lab up failed (openbao): exited 1" in result.stderr
    assert "hint: logs: DIR/logs" in result.stderr


def test_status_json_is_the_control_dict() -> None:
    lab = FakeLab()
    result = invoke(["lab", "status", "-o", "json"], lab=lab)
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"apiVersion": "rotate/v1", "kind": "lab-status",
                                         **STATUS}
    assert lab.calls == [("status", Path(".rotate-lab"))]


def test_status_text() -> None:
    result = invoke(["lab", "status"], lab=FakeLab())
    assert result.stdout.splitlines() == [
        "lab in /w/.rotate-lab: running",
        "  openbao        http://127.0.0.1:41001   healthy",
        "  kubernetes     https://127.0.0.1:41002  healthy",
        "  config_center  http://127.0.0.1:41003   DOWN",
        "  dragonfly      127.7.2.1:6379           -",
        "faults: crashloop cart",
        "env: . /w/.rotate-lab/env",
    ]


def test_fault_on_and_clear() -> None:
    lab = FakeLab()
    assert invoke(["lab", "fault", "crashloop", "cart"], lab=lab).exit_code == 0
    assert invoke(["lab", "fault", "--clear"], lab=lab).exit_code == 0
    assert invoke(["lab", "fault", "--clear", "eso-stall", "--dir", "D"], lab=lab).exit_code == 0
    assert lab.calls == [("fault", Path(".rotate-lab"), "crashloop", "cart", False),
                         ("fault", Path(".rotate-lab"), None, None, True),
                         ("fault", Path("D"), "eso-stall", None, True)]
    bad = invoke(["lab", "fault", "nonsense"], lab=lab)
    assert bad.exit_code == 2 and "unknown fault 'nonsense'" in bad.stderr


def test_down_lists_what_was_stopped() -> None:
    result = invoke(["lab", "down"], lab=FakeLab())
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["stopped cluster (pid 12)", "stopped openbao (pid 11)"]
