"""Where a test's lab lives: a directory the lab's PostgreSQL can reach.

Run as root, the lab runs PostgreSQL as the unprivileged ``postgres`` user (root may not run
it), and that user must be able to search every parent of the lab directory.  pytest's
``/tmp/pytest-of-root`` is 0700, so as root a lab gets a directory under the system temp dir
(0711) instead, removed when the test is done; anyone else keeps pytest's tmp dirs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def lab_dir(factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    if os.getuid() != 0:
        yield factory.mktemp(name)
        return
    path = Path(tempfile.mkdtemp(prefix=f"rotate-test-{name}-"))
    path.chmod(0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
