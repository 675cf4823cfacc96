"""The lab as ``pip wheel --no-deps ./lab`` builds it: every file of the shop's package data
(manifests, chain file, schemas) ships, beside ``py.typed`` and the ``rotate lab`` entry
point.  Built from a copy of ``lab/`` (setuptools would reuse a stale ``build/lib``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheel


@pytest.fixture(scope="module")
def lab_wheel(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("lab-src")
    shutil.copy2(repo_root / "lab" / "pyproject.toml", src / "pyproject.toml")
    shutil.copytree(repo_root / "lab" / "rotate_lab", src / "rotate_lab",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("lab-wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(src), "-w", str(out)],
        capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = out.glob("rotate_lab-*.whl")
    return wheel


def test_lab_wheel_ships_the_shop_data_and_the_plugin(repo_root: Path, lab_wheel: Path) -> None:
    names = set(zipfile.ZipFile(lab_wheel).namelist())
    package = repo_root / "lab" / "rotate_lab"
    data = {p.relative_to(package.parent).as_posix()
            for p in (package / "shop" / "ecommerce").rglob("*") if p.is_file()}
    assert "rotate_lab/shop/ecommerce/rotate.yaml" in data
    assert data <= names, sorted(data - names)
    assert "rotate_lab/py.typed" in names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(lab_wheel).read(entry_points).decode()
    assert "[rotate.plugins]" in text and "rotate_lab.cli:lab_app" in text
