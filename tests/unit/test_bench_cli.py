"""bench/rotation.py refuses bad input with a message and a non-zero exit, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import rotation


@pytest.mark.parametrize("argv", [["--runs", "0"], ["--rps", "-1"], ["--max-parallel", "x"],
                                  ["--services", "101"], ["--strategy", "fast"],
                                  ["--step-timeout", "5x"], ["--step-timeout", "0s"]])
def test_out_of_range_options_are_usage_errors(argv: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        rotation.main(argv)
    assert exc.value.code == 2
    assert "error: argument" in capsys.readouterr().err


def test_no_lab_up_without_a_running_lab_says_so(tmp_path: Path, repo_root: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.rotation", "--no-lab-up",
         "--dir", str(tmp_path / "lab"), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60, check=False, cwd=repo_root)
    assert done.returncode == 1
    assert "no lab running in" in done.stderr and "Traceback" not in done.stderr


def test_no_lab_up_needs_a_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert rotation.main(["--no-lab-up", "--out", str(tmp_path)]) == 1
    assert "--no-lab-up needs --dir" in capsys.readouterr().err
