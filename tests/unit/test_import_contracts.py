"""The import contracts of pyproject.toml ([tool.importlinter], run by ``make test``) can fail.

A throwaway package with the same shape of contracts is given a cycle between two sibling
modules and a lower layer reaching for an I/O driver: ``lint-imports`` must break both.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFIG = """
[importlinter]
root_package = toy
include_external_packages = True

[importlinter:contract:layers]
name = layers
type = layers
layers =
    toy.engine
    toy.core

[importlinter:contract:acyclic]
name = acyclic
type = acyclic_siblings
ancestors =
    toy.engine
    toy.core

[importlinter:contract:io]
name = io
type = forbidden
source_modules =
    toy.engine
    toy.core
forbidden_modules =
    subprocess
allow_indirect_imports = True
"""


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    return subprocess.run([exe, "--no-logo", "--no-cache", str(root / ".importlinter")],
                          cwd=root, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, check=False)


def _toy(root: Path, files: dict[str, str]) -> None:
    (root / ".importlinter").write_text(CONFIG)
    for name in ("toy", "toy/engine", "toy/core"):
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "__init__.py").write_text("")
    for name, text in files.items():
        (root / name).write_text(text)


def test_a_clean_package_keeps_every_contract(tmp_path: Path) -> None:
    _toy(tmp_path, {"toy/engine/a.py": "from toy.engine import b\n",
                    "toy/engine/b.py": "from toy.core import c\n", "toy/core/c.py": ""})
    result = _lint(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_cycle_and_a_driver_in_the_core_are_broken_contracts(tmp_path: Path) -> None:
    _toy(tmp_path, {"toy/engine/a.py": "from toy.engine import b\n",
                    "toy/engine/b.py": "def f():\n    from toy.engine import a\n",
                    "toy/core/c.py": "def g():\n    import subprocess\n"})
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "acyclic BROKEN" in result.stdout
    assert "io BROKEN" in result.stdout
    assert "layers KEPT" in result.stdout
