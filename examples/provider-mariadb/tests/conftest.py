"""The session's MariaDB (tests/mariadb_server.py): started once, stopped by its pid."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mariadb_server import MariaDb, start, stop


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDb]:
    server, proc = start(tmp_path_factory.mktemp("mariadb"))
    try:
        yield server
    finally:
        stop(proc)
