"""bench/rotation.py refuses bad input with a message and a non-zero exit, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import chain_params, rotation
from bench.world import BenchError, Lab
from tests.support.paths import EXAMPLE_CHAIN


@pytest.mark.parametrize("argv", [["--runs", "0"], ["--rps", "-1"], ["--max-parallel", "x"],
                                  ["--services", "101"], ["--strategy", "fast"],
                                  ["--lab-nice", "20"], ["--lab-nice", "-1"],
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


@pytest.mark.parametrize("option", [["--services", "10"], ["--lab-nice", "0"]])
def test_options_that_set_up_a_lab_are_refused_with_no_lab_up(
        option: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--no-lab-up", "--dir", str(tmp_path / "lab"), "--out", str(tmp_path / "o")]
    assert rotation.main(argv + option) == 1
    assert f"{option[0]} sets up a lab this run starts" in capsys.readouterr().err


def test_the_lab_is_started_at_the_bench_niceness_and_reported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []

    def fake_run(self: Lab, *args: str, timeout: float = 60.0) -> Any:
        started.append(list(args))
        (self.dir / "lab.json").write_text('{"nice": 10}')
        return subprocess.CompletedProcess(args, 1, "", "stop here")

    monkeypatch.setattr(Lab, "run", fake_run)
    assert rotation.main(["--out", str(tmp_path / "o"), "--dir", str(tmp_path)]) == 1
    assert started[0][:5] == ["up", "--profile", "realistic", "--nice", str(rotation.LAB_NICE)]
    assert Lab(tmp_path).nice() == 10
    assert rotation.nice_line(10).startswith("lab at nice 10: every lab process and pod")
    assert Lab(tmp_path / "none").nice() == 0


def test_plan_rtt_prints_both_sides_and_refuses_bad_input(
        capsys: pytest.CaptureFixture[str]) -> None:
    from bench import plan_rtt

    assert plan_rtt.main(["--rtt", "0", "--runs", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "RTT 0 ms, preflight's parts one after the other", "RTT 0 ms, preflight's parts at once"]
    with pytest.raises(SystemExit) as exc:
        plan_rtt.main(["--rtt", "5000"])
    assert exc.value.code == 2


def _params() -> chain_params.ChainParams:
    return chain_params.ChainParams(
        credential="dragonfly", strategy="restart", kv_mount="secret", kv_path="p",
        kv_key="password", kv_verb="put", externalsecret="ns/es", secret="ns/s",
        secret_key="password", provider="ns/dragonfly", consumers=("shop/cart",),
        doc_key="bootstrap", doc_filter=".", max_parallel=10)


def _stub_rotate(tmp_path: Path, code: int) -> Path:
    """A stand-in for rotate: records its argv, says one line, exits ``code``."""
    stub = tmp_path / "rotate"
    stub.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/argv"\n'
                    f'echo "Preflight says {code}"\nexit {code}\n')
    stub.chmod(0o755)
    return stub


@pytest.mark.parametrize("code", [0, 3])
def test_the_plan_is_reviewed_without_confirm_and_a_refusal_stops_the_bench(
        code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's plan before the measured runs changes nothing (no --confirm); a plan
    that preflight refuses stops the benchmark with its exit code and its output."""
    stub = _stub_rotate(tmp_path, code)
    monkeypatch.setattr(rotation, "tool", lambda name: str(stub))
    lab = Lab(tmp_path / "lab", env={"PATH": "/usr/bin:/bin"})
    out = tmp_path / "out"
    if code == 0:
        rotation.review_plan(lab, _params(), out)
    else:
        with pytest.raises(BenchError) as err:
            rotation.review_plan(lab, _params(), out)
        assert "exited 3" in str(err.value) and "Preflight says 3" in str(err.value)
    argv = (tmp_path / "argv").read_text().split()
    assert argv[:3] == ["dragonfly", "--strategy", "restart"] and "--confirm" not in argv
    assert (out / "logs" / "plan.log").read_text().strip() == f"Preflight says {code}"


def test_the_measured_commands_may_write_their_bytecode(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """rotate is measured as installed (pip writes bytecode): a PYTHONDONTWRITEBYTECODE in the
    harness's environment does not reach the commands it runs, the lab's exports do."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "env").write_text("export ROTATE_CHAIN=/x/rotate.yaml\n")
    lab = Lab(tmp_path / "lab")
    lab.load_env()
    assert "PYTHONDONTWRITEBYTECODE" not in lab.env
    assert lab.env["ROTATE_CHAIN"] == "/x/rotate.yaml" and lab.env["NO_COLOR"] == "1"


@pytest.mark.parametrize("argv", [["--services", "101"], ["--services", "2"], ["--runs", "0"],
                                  ["--lab-nice", "20"], ["--profile", "slow"]])
def test_status_bench_refuses_out_of_range_options(argv: list[str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from bench import status

    with pytest.raises(SystemExit) as exc:
        status.main(argv)
    assert exc.value.code == 2
    assert "error: argument" in capsys.readouterr().err


def test_status_bench_without_a_running_lab_says_so(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from bench import status

    assert status.main(["--no-lab-up", "--dir", str(tmp_path / "lab")]) == 1
    assert "no lab running in" in capsys.readouterr().err


def test_without_strategy_the_command_is_the_plain_one() -> None:
    """No --strategy: the measured command is `rotate CRED --confirm` and rotate picks the
    strategy itself (the lab chain's dragonfly: overlap); with one, it is passed on."""
    plain = chain_params.load(EXAMPLE_CHAIN, "dragonfly", None, None)
    assert plain.strategy_args() == [] and plain.strategy_label() == "the chain's default"
    pinned = chain_params.load(EXAMPLE_CHAIN, "dragonfly", "restart", None)
    assert pinned.strategy_args() == ["--strategy", "restart"]
