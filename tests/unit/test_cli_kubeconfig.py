"""A kubeconfig or context that cannot be used says why (rotate/clients/kubeconfig.py), in
rotate's words — the client loader's text, which may quote the file, is never shown — and
``rotate show``/``resume``/``rollback`` complete RUN_ID from the journal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rotate.cli.app import app
from rotate.cli.completion import run_ids
from rotate.clients.kube import KubeClient
from rotate.clients.kubeconfig import why_unusable
from rotate.core.errors import UsageError
from tests.support.cli import check_golden
from tests.support.paths import EXAMPLE_CHAIN

TWO_CONTEXTS = """\
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: lab
  user: {token: s3cr3t-t0ken}
contexts:
- name: lab
  context: {cluster: lab, user: lab}
- name: prod
  context: {cluster: prod, user: prod}
current-context: lab
"""
TOKEN = "s3cr3t-t0ken"


def _file(tmp_path: Path, text: str, name: str = "kubeconfig") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "absent")
    assert why_unusable(missing, None, {}) == f"{missing} does not exist"
    assert why_unusable(None, "lab", {"KUBECONFIG": missing}) == f"{missing} does not exist"


def test_a_directory_is_not_a_kubeconfig(tmp_path: Path) -> None:
    assert why_unusable(str(tmp_path), None, {}) == f"{tmp_path} is a directory, not a file"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 0")
def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    path = _file(tmp_path, TWO_CONTEXTS)
    os.chmod(path, 0)
    assert why_unusable(path, None, {}) == f"{path} is not readable (permission denied)"


def test_an_unknown_context_lists_the_contexts_there_are(tmp_path: Path) -> None:
    path = _file(tmp_path, TWO_CONTEXTS)
    assert why_unusable(path, "staging", {}) == \
        f"context staging is not in {path} (its contexts: lab, prod)"


def test_no_current_context(tmp_path: Path) -> None:
    path = _file(tmp_path, TWO_CONTEXTS.replace("current-context: lab\n", ""))
    assert why_unusable(path, None, {}) == \
        f"{path} sets no current-context: name one with --context (its contexts: lab, prod)"


def test_a_context_whose_cluster_is_missing(tmp_path: Path) -> None:
    path = _file(tmp_path, TWO_CONTEXTS)
    assert why_unusable(path, "prod", {}) == (
        f"the cluster or user of context prod in {path} is missing or invalid (check its "
        "server, certificate and credential entries)")


def test_the_files_text_is_never_quoted(tmp_path: Path) -> None:
    broken = _file(tmp_path, f"users: [{{token: {TOKEN}}}\n  : : bad")
    with pytest.raises(UsageError) as caught:
        KubeClient(kubeconfig=broken)
    assert caught.value.message == f"cannot use the kubeconfig: {broken} is not valid YAML"
    assert TOKEN not in caught.value.message


def test_the_client_says_why(tmp_path: Path) -> None:
    path = _file(tmp_path, TWO_CONTEXTS)
    with pytest.raises(UsageError) as caught:
        KubeClient(kubeconfig=path, context="staging")
    assert caught.value.message == (f"cannot use the kubeconfig (context staging): context "
                                    f"staging is not in {path} (its contexts: lab, prod)")
    assert caught.value.hint is not None and "kubectl config get-contexts" in caught.value.hint


def test_doctor_names_the_reason(tmp_path: Path) -> None:
    """Over the real engine: the kubernetes.config check carries the reason."""
    path = _file(tmp_path, TWO_CONTEXTS)
    env = {"NO_COLOR": "1", "COLUMNS": "100", "ROTATE_CHAIN": None, "KUBECONFIG": None,
           "BAO_ADDR": None, "VAULT_ADDR": None, "CONFIG_CENTER_URL": None,
           "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = CliRunner().invoke(app, ["doctor", "--chain", str(EXAMPLE_CHAIN), "--state-dir",
                                      str(tmp_path), "--kubeconfig", path, "--context",
                                      "staging"], env=env, catch_exceptions=False)
    assert result.exit_code == 3, result.stderr
    line = next(x for x in result.stdout.splitlines() if "kubernetes.config" in x)
    check_golden("doctor_kubeconfig.txt", line.replace(str(tmp_path), "/tmp/TEST") + "\n")


# -- RUN_ID completion --------------------------------------------------------------------
def _complete(words: str, cword: int, cwd: Path, **env: str) -> list[str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "SYSTEMROOT")}
    done = subprocess.run(
        [sys.executable, "-m", "rotate"], capture_output=True, text=True, timeout=60, cwd=cwd,
        env={**keep, "_ROTATE_COMPLETE": "complete_bash", "COMP_WORDS": words,
             "COMP_CWORD": str(cword), "HOME": str(cwd), **env})
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.split()


def test_run_ids_complete_from_the_journal(tmp_path: Path) -> None:
    state = tmp_path / "state"
    older, newer = "20261202T140300Z-dragonfly-a1b2", "20261203T090000Z-postgres-0c0c"
    for run_id in (older, newer):
        (state / "runs" / run_id).mkdir(parents=True)
        (state / "runs" / run_id / "journal.jsonl").write_text("")
    (state / "runs" / "not-a-run").mkdir()  # no journal: not offered
    assert run_ids(state) == [newer, older]
    assert run_ids(tmp_path / "absent") == []  # no journal yet: nothing, no error
    # through the shell's protocol (one process each): ROTATE_STATE_DIR, then --state-dir
    assert _complete("rotate show ", 2, tmp_path, ROTATE_STATE_DIR=str(state)) == \
        [newer, older]
    # options before the command (the state directory among them) complete as after it
    assert _complete(f"rotate --state-dir {state} rollback 20261202", 4, tmp_path) == [older]
