"""``rotate --version``, ``python -m rotate``, shell completion and the state directory
without HOME (issue 9, item 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from rotate.cli.completion import credential_names
from rotate.cli.options import NO_HOME_STATE_DIR, default_state_dir
from tests.fakes.engine import FakeEngine
from tests.support.cli import invoke
from tests.support.paths import EXAMPLE_CHAIN

EXAMPLE = EXAMPLE_CHAIN


def _child_env(**extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "SYSTEMROOT")}
    return {**keep, "NO_COLOR": "1", "COLUMNS": "100", **extra}


def test_version_is_the_installed_distribution() -> None:
    result = invoke(["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"rotate {version('rotate')}\n"


def test_python_dash_m_rotate_is_the_same_cli(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "rotate", "--version"], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path, env=_child_env())
    assert (done.returncode, done.stdout) == (0, f"rotate {version('rotate')}\n")
    bad = subprocess.run([sys.executable, "-m", "rotate", "list", "--chain", "absent.yaml"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env=_child_env(HOME=str(tmp_path)))
    assert bad.returncode == 2, bad.stderr
    assert "absent.yaml" in bad.stderr


# -- completion -----------------------------------------------------------------------------
SYNTHETIC = """\
apiVersion: rotate/v1   # a comment
kind: Chain
backend:
  kvMount: secret
credentials:
  # a comment line
  dragonfly:
    backend: {path: infra/dragonfly, key: password}
    providers:
      - kind: Deployment
        name: not-a-credential
  "payments-db":   # quoted
    description: x

  search-acl:
    strategy: overlap
services:
  cart:
    namespace: shop
"""


def test_credential_names_are_the_keys_under_credentials(tmp_path: Path) -> None:
    chain = tmp_path / "rotate.yaml"
    chain.write_text(SYNTHETIC)
    assert credential_names(chain) == ["dragonfly", "payments-db", "search-acl"]
    assert credential_names(EXAMPLE) == ["dragonfly", "dragonfly-acl", "postgres",
                                         "bugsink-admin"]
    chain.write_text('{"credentials": {"dragonfly": {}}}')  # flow style: nothing, no error
    assert credential_names(chain) == []
    assert credential_names(tmp_path / "absent.yaml") == []


def _complete(words: str, cword: int, chain: Path, cwd: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "rotate"], capture_output=True, text=True, timeout=60, cwd=cwd,
        env=_child_env(_ROTATE_COMPLETE="complete_bash", COMP_WORDS=words,
                       COMP_CWORD=str(cword), ROTATE_CHAIN=str(chain), HOME=str(cwd)))
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_bash_completion_offers_commands_and_credentials(tmp_path: Path) -> None:
    assert _complete("rotate dr", 1, EXAMPLE, tmp_path) == ["dragonfly", "dragonfly-acl"]
    first = _complete("rotate ", 1, EXAMPLE, tmp_path)
    assert {"list", "runs", "doctor", "lab", "dragonfly", "dragonfly-acl"} <= set(first)
    assert "rotate" not in first  # the hidden command is not offered
    assert "--confirm" in _complete("rotate dragonfly --con", 2, EXAMPLE, tmp_path)


@pytest.mark.parametrize(("shell", "marker"), [("bash", "COMP_WORDS"), ("zsh", "compdef"),
                                             ("fish", "complete --command rotate")])
def test_the_completion_script_of_a_named_shell(tmp_path: Path, shell: str,
                                                marker: str) -> None:
    done = subprocess.run([sys.executable, "-m", "rotate"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path,
                          env=_child_env(_ROTATE_COMPLETE=f"source_{shell}", HOME=str(tmp_path)))
    assert done.returncode == 0, done.stderr
    assert "_ROTATE_COMPLETE" in done.stdout and marker in done.stdout


# -- state directory ------------------------------------------------------------------------
@pytest.mark.parametrize(("env", "expected"), [
    ({"XDG_STATE_HOME": "/x/state", "HOME": "/home/op"}, Path("/x/state/rotate")),
    ({"XDG_STATE_HOME": "relative", "HOME": "/home/op"},
     Path("/home/op/.local/state/rotate")),
    ({"HOME": "/home/op"}, Path("/home/op/.local/state/rotate")),
    ({"HOME": ""}, NO_HOME_STATE_DIR),
    ({}, NO_HOME_STATE_DIR),
])
def test_default_state_dir_follows_xdg_then_home_then_the_current_directory(
        env: dict[str, str], expected: Path) -> None:
    path, note = default_state_dir(env)
    assert path == expected
    assert bool(note) == (expected == NO_HOME_STATE_DIR)
    if note:
        assert "ROTATE_STATE_DIR" in note


def test_list_without_home_uses_the_fallback_and_says_so(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    (tmp_path / "rotate.yaml").write_text("ok\n")
    monkeypatch.chdir(tmp_path)
    engine = FakeEngine()
    result = invoke(["list"], engine, env={"HOME": None, "XDG_STATE_HOME": None})
    assert result.exit_code == 0
    assert engine.calls[0][1].state_dir == NO_HOME_STATE_DIR
    assert "ROTATE_STATE_DIR" in result.stderr
    engine = FakeEngine()
    result = invoke(["list"], engine, env={"HOME": None, "XDG_STATE_HOME": None,
                                           "ROTATE_STATE_DIR": str(tmp_path / "s")})
    assert result.exit_code == 0 and result.stderr == ""
    assert engine.calls[0][1].state_dir == tmp_path / "s"


def test_real_list_without_home_does_not_crash(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "rotate", "list", "--chain", str(EXAMPLE)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env=_child_env())
    assert done.returncode == 0, done.stderr
    assert "dragonfly" in done.stdout
    assert "HOME and XDG_STATE_HOME are not set" in done.stderr
