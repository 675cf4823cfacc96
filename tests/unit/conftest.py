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
