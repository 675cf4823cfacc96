"""Fixtures every test directory may use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def repo_root(request: pytest.FixtureRequest) -> Path:
    """The checkout's root: pytest's rootdir (where pyproject.toml configures pytest)."""
    return Path(request.config.rootpath)


@pytest.fixture(scope="session", autouse=True)
def _private_chain_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The real chain loader caches validated chain files in $XDG_CACHE_HOME/rotate
    (rotate/chain/cache.py): the suite's go to a directory of its own, never the home of
    whoever runs it. Tests that exercise the cache pass their own directory."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
        yield
