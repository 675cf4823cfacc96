"""Both distributions say which licence they carry and where the project lives.

``pip wheel --no-deps`` builds the product (rotate) and the lab (rotate-lab) from copies of
their sources (so no stale ``build/`` of the checkout is reused); each wheel's METADATA must
carry the SPDX licence expression, the licence file itself, and the Project-URL entries.
"""

from __future__ import annotations

import email.parser
import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheel

#: distribution → (its directory in the repository, files beside its package, package)
SOURCES = {
    "rotate": (".", ("pyproject.toml", "README.md", "LICENSE"), "rotate"),
    "rotate_lab": ("lab", ("pyproject.toml", "LICENSE"), "rotate_lab"),
}


@pytest.fixture(scope="module")
def wheels(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    built: dict[str, Path] = {}
    for dist, (where, files, package) in SOURCES.items():
        src = tmp_path_factory.mktemp(f"{dist}-src")
        for name in files:
            shutil.copy2(repo_root / where / name, src / name)
        shutil.copytree(repo_root / where / package, src / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        out = tmp_path_factory.mktemp(f"{dist}-wheel")
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(src), "-w", str(out)],
            capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        (built[dist],) = out.glob(f"{dist}-*.whl")
    return built


def _metadata(wheel: Path) -> tuple[Message, list[str]]:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (path,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(path).decode()), names


@pytest.mark.parametrize("dist", sorted(SOURCES))
def test_the_wheel_names_its_license_and_the_project_urls(
        wheels: dict[str, Path], dist: str) -> None:
    meta, names = _metadata(wheels[dist])
    assert (meta["License-Expression"] or meta["License"]) == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    urls = dict(entry.split(", ", 1) for entry in meta.get_all("Project-URL") or [])
    assert set(urls) == {"Homepage", "Documentation", "Changelog", "Issues"}, urls
    assert all(url.startswith("https://") for url in urls.values()), urls


def test_the_lab_ships_the_repository_license(repo_root: Path) -> None:
    assert (repo_root / "lab" / "LICENSE").read_bytes() == (repo_root / "LICENSE").read_bytes()
