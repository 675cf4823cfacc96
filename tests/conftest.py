"""Fixtures every test directory may use."""

from __future__ import annotations

import os
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


@pytest.fixture(scope="session", autouse=True)
def _worker_address_blocks() -> Iterator[None]:
    """Under pytest-xdist (``make test`` runs two workers) every lab and mini-cluster of
    worker ``gwK`` takes its ``127.N.0.0/16`` with ``N % workers == K``: two labs starting at
    the same moment on two workers can never pick the same block before either listens in it
    (``choose_octet`` only skips blocks with a listening socket).  A plain ``pytest`` run
    is left as it is (so is ``make test-floors``, which has no pytest-xdist)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        yield
        return
    from rotate_lab.cluster import context

    index = int(worker[2:])
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    listening = context._listening_second_octets
    others = {n for n in range(256) if n % workers != index}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(context, "_listening_second_octets", lambda: listening() | others)
        yield
