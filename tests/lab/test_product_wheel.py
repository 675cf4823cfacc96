"""The product as an adopter gets it: ``pip wheel --no-deps .`` installed (not editable) into
a fresh venv with the ``redis`` extra only.  The wheel carries the chain schema and no lab
code; installed alone, it plans the dragonfly rotation (``apply: redis-acl``) against the lab,
refuses the postgres one naming the extra it lacks, and ``rotate lab`` says how to get the lab.

The wheel is built from a copy of the product's sources (pyproject.toml, README.md, LICENSE,
rotate/), not from the checkout itself: setuptools reuses ``build/lib`` and would ship a
stale file left there by an older build.  Wheel and venv are built once per session (about
15 s; dependencies come from pip's cache or index).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.labhandle import LabHandle
from tests.support.paths import EXAMPLE_CHAIN

pytestmark = pytest.mark.wheel
PRODUCT_FILES = ("pyproject.toml", "README.md", "LICENSE")


@pytest.fixture(scope="session")
def product_wheel(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("product-src")
    for name in PRODUCT_FILES:
        shutil.copy2(repo_root / name, src / name)
    shutil.copytree(repo_root / "rotate", src / "rotate",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(src), "-w", str(out)],
        capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = out.glob("rotate-*.whl")
    return wheel


@pytest.fixture(scope="session")
def fresh_venv(product_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("fresh-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "-q", f"{product_wheel}[redis]"], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    return venv


def test_wheel_ships_the_chain_schema_and_no_lab(product_wheel: Path) -> None:
    names = zipfile.ZipFile(product_wheel).namelist()
    assert "rotate/chain/chain.schema.json" in names
    assert "rotate/py.typed" in names
    lab_files = [n for n in names if n.startswith(("rotate/lab/", "rotate_lab"))
                 or "ecommerce" in n or n.endswith(".yaml")]
    assert lab_files == []
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(product_wheel).read(entry_points).decode()
    assert "rotate.cli.app:console" in text and "rotate.plugins" not in text


def test_installed_product_without_the_lab_says_how_to_get_it(fresh_venv: Path) -> None:
    done = subprocess.run([str(fresh_venv / "bin" / "rotate"), "lab", "up", "--dir", "x"],
                          capture_output=True, text=True, timeout=60, cwd=fresh_venv,
                          env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"})
    assert done.returncode == 2, done.stderr
    assert "rotate-lab" in done.stderr and "make install" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not (fresh_venv / "x").exists()


@pytest.mark.lab
def test_installed_product_plans_dragonfly_against_the_lab(
        fresh_venv: Path, lab: LabHandle, tmp_path: Path) -> None:
    env = dict(lab.process_env)
    chain = env.pop("ROTATE_CHAIN")
    done = subprocess.run(
        [str(fresh_venv / "bin" / "rotate"), "dragonfly", "--chain", chain,
         "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Plan: rotate dragonfly"), done.stdout
    assert "backend.write" in done.stdout and "consumer" in done.stdout


def test_installed_product_names_the_extra_a_credential_lacks(fresh_venv: Path,
                                                               tmp_path: Path) -> None:
    done = subprocess.run(
        [str(fresh_venv / "bin" / "rotate"), "postgres", "--chain", str(EXAMPLE_CHAIN),
         "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HOME": str(tmp_path)})
    assert done.returncode == 2, done.stderr
    assert "pip install 'rotate[postgres]'" in done.stderr
    assert "rotate[redis]" not in done.stderr and "Traceback" not in done.stderr
