"""Input at its edges: a chain path that is not a regular file (a named pipe would block the
command forever, a device never ends) is refused at once, exit 2, naming the path; a
`--value-stdin` of more than one line is refused, exit 2, a single trailing newline kept."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from rotate.cli.app import app
from rotate.core.secret import Secret
from tests.support.cli import confirm_with_stdin

ENV = {"NO_COLOR": "1", "COLUMNS": "200", "ROTATE_CHAIN": None, "KUBECONFIG": None,
       "BAO_ADDR": None, "VAULT_ADDR": None}


def _rotate(state_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={**ENV, "ROTATE_STATE_DIR": str(state_dir)},
                              catch_exceptions=False)


def _in_thread(state_dir: Path, command: list[str]) -> Result:
    """Run the command on a thread, so that a hang fails the test instead of blocking it."""
    box: list[Result] = []
    worker = threading.Thread(target=lambda: box.append(_rotate(state_dir, *command)),
                              daemon=True)
    worker.start()
    worker.join(timeout=30)
    if worker.is_alive():
        pytest.fail(f"`rotate {' '.join(command)}` hangs on a chain path that is not a file")
    return box[0]


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
@pytest.mark.parametrize("command", [["list"], ["dragonfly"], ["doctor"], ["rbac"],
                                     ["vault-policy"]])
def test_a_chain_path_that_is_not_a_regular_file_is_a_usage_error(
    tmp_path: Path, kind: str, command: list[str]
) -> None:
    if kind == "fifo":
        path = tmp_path / "rotate.yaml"
        os.mkfifo(path)
        what = "a named pipe (FIFO)"
    elif kind == "directory":
        path, what = tmp_path, "a directory"
    else:
        path, what = Path("/dev/zero"), "a character device"
    result = _in_thread(tmp_path / "state", [*command, "--chain", str(path)])
    assert result.exit_code == 2, result.output
    assert f"the chain file {path} is {what}, not a regular file" in result.stderr
    assert "Traceback" not in result.output


def test_completion_reads_no_named_pipe(tmp_path: Path) -> None:
    from rotate.cli.completion import credential_names

    fifo = tmp_path / "rotate.yaml"
    os.mkfifo(fifo)
    assert credential_names(fifo) == []


@pytest.mark.usefixtures("in_chain_dir")
@pytest.mark.parametrize("stdin", [
    b"first-line-of-the-value\nsecond-line\n",
    b"first-line-of-the-value\nsecond-line",
    b"first-line-of-the-value\r\nsecond-line\r\n",
    b"first-line-of-the-value\n\n",
    b"first-line-of-the-value\n \n",
])
def test_more_than_one_line_on_value_stdin_is_refused(stdin: bytes) -> None:
    result, engine_saw = confirm_with_stdin(stdin)
    assert result.exit_code == 2, result.output
    assert "--value-stdin takes exactly one line" in result.stderr
    assert engine_saw == []
    assert "first-line" not in result.output and "second-line" not in result.output


@pytest.mark.usefixtures("in_chain_dir")
@pytest.mark.parametrize("stdin", [b"one-line-value-0123456789\n",
                                   b"one-line-value-0123456789\r\n",
                                   b"one-line-value-0123456789"])
def test_one_line_with_at_most_one_line_end_is_accepted(stdin: bytes) -> None:
    result, engine_saw = confirm_with_stdin(stdin)
    assert result.exit_code == 0, result.output
    assert Secret("one-line-value-0123456789") in engine_saw
