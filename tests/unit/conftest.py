"""Fixtures of the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import World, make_chain


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """The fakes of every seam, set up with the example shop, on a chain file in tmp_path."""
    w = World(make_chain(tmp_path))
    w.setup()
    yield w
    w.kube.close()


@pytest.fixture
def in_chain_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The working directory holds a ./rotate.yaml (the fake engine only checks it exists)
    and the state directory is the test's own."""
    (tmp_path / "rotate.yaml").write_text("ok\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
