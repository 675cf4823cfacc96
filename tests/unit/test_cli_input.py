"""Bad input through the real CLI and the real engine facade, with no cluster: what `rotate
CRED` refuses, `rotate list` refuses too; a hostile `--value-stdin` is refused with exit 2
before anything is contacted."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from rotate.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ecommerce" / "rotate.yaml"
ENV = {"NO_COLOR": "1", "COLUMNS": "200", "ROTATE_CHAIN": None, "ROTATE_STATE_DIR": None,
       "KUBECONFIG": None, "BAO_ADDR": None, "VAULT_ADDR": None}


def _rotate(*args: str, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env=ENV, input=stdin, catch_exceptions=False)


def defective_chain(tmp_path: Path, old: str, new: str) -> Path:
    """The example with one edit, placed so that its relative schema paths still resolve."""
    (tmp_path / "schemas").symlink_to(ROOT / "schemas")
    text = EXAMPLE.read_text()
    assert old in text
    path = tmp_path / "examples" / "ecommerce" / "rotate.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(("old", "new", "problem"), [
    ("    strategy: restart\n", "    strategy: sideways\n",
     "/credentials/dragonfly/strategy: 'sideways' is not one of: restart, overlap"),
    ("    strategy: restart\n", "    strategy: restart\n    typo: 1\n",
     "/credentials/dragonfly/typo: unknown field 'typo'"),
    ("  maxParallel: 3\n", "  maxParallel: 0\n", "/defaults/maxParallel: must be at least 1"),
    ("redis://:{/dragonfly/password}@", "redis://:{/dragonfly/password@",
     "/services/cart/values/~1dragonfly~1url/template: placeholder {/dragonfly/password@ "
     "is not closed before the next '{'"),
])
def test_list_refuses_what_rotate_refuses(
    tmp_path: Path, old: str, new: str, problem: str
) -> None:
    chain = defective_chain(tmp_path, old, new)
    state = str(tmp_path / "state")
    rotated = _rotate("dragonfly", "--chain", str(chain), "--state-dir", state)
    listed = _rotate("list", "--chain", str(chain), "--state-dir", state)
    assert rotated.exit_code == 2, rotated.output
    assert problem in rotated.stderr
    assert listed.exit_code == 2, listed.output
    assert problem in listed.stderr
