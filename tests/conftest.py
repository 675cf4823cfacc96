"""Fixtures every test directory may use."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def repo_root(request: pytest.FixtureRequest) -> Path:
    """The checkout's root: pytest's rootdir (where pyproject.toml configures pytest)."""
    return Path(request.config.rootpath)
