"""End-to-end fixtures: each module gets its own lab (fast profile) in a temp dir (mode 0700,
as pytest makes them: the lab needs no directory others can reach)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.labtools import Lab, read_env_file

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if shutil.which("redis-server") is None or shutil.which("kubectl") is None:
        pytest.fail(
            "the lab needs redis-server and kubectl (make install puts redis-server in place)"
        )
    from rotate_lab import control

    lab_dir = tmp_path_factory.mktemp("lab")
    try:
        control.up(lab_dir, "fast", False, on_progress=lambda _msg: None)
        yield Lab(lab_dir, read_env_file(lab_dir / "env"))
    finally:
        control.down(lab_dir)


@pytest.fixture(scope="module")
def bugsink_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A lab started with ``--with bugsink`` (the real Bugsink server from its own venv)."""
    from rotate_lab.systems import bugsink

    try:
        bugsink.python()
    except bugsink.NoBugsink as exc:
        pytest.fail(str(exc))
    yield from _lab_with(tmp_path_factory, "bugsink")


@pytest.fixture(scope="module")
def mariadb_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A lab started with ``--with mariadb`` (MariaDB, its reader ``catalog`` and the chain's
    credential ``mariadb``, which needs the plug-in examples/provider-mariadb installed)."""
    from rotate_lab.systems import mariadb

    try:
        mariadb.check_available()
    except mariadb.NoMariaDb as exc:
        pytest.fail(str(exc))
    yield from _lab_with(tmp_path_factory, "mariadb")


@pytest.fixture(scope="module")
def mariadb_rotation(mariadb_lab: Lab) -> dict[str, Any]:
    """The module's one ``rotate mariadb --confirm`` under load (test_mariadb_lab.py)."""
    from tests.support.mariadb_lab import rotate_under_load

    return rotate_under_load(mariadb_lab)


@pytest.fixture(scope="module")
def prometheus_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A lab started with ``--with prometheus`` (Debian's Prometheus scraping the shop's
    /metrics; ``PROMETHEUS_URL`` in its env file).  Skipped where Prometheus is not
    installed (``make install`` installs it)."""
    from rotate_lab.systems import prometheus

    try:
        prometheus.binary()
    except prometheus.NoPrometheus as exc:
        pytest.skip(str(exc))
    yield from _lab_with(tmp_path_factory, "prometheus")


def _lab_with(factory: pytest.TempPathFactory, part: str) -> Iterator[Lab]:
    """A lab started with ``--with PART`` in a directory of its own, stopped afterwards."""
    from rotate_lab import control

    lab_dir = factory.mktemp(f"{part}-lab")
    try:
        control.up(lab_dir, "fast", False, on_progress=lambda _msg: None, extras=(part,))
        yield Lab(lab_dir, read_env_file(lab_dir / "env"))
    finally:
        control.down(lab_dir)


@pytest.fixture(scope="module")
def in_cluster(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """``lab`` set up for rotate in the cluster as docs/in-cluster.md says (RBAC, OpenBao's
    kubernetes auth, chain, schemas, Config Center token: tests/support/incluster.py)."""
    from tests.support import incluster

    incluster.set_up(lab, tmp_path_factory.mktemp("in-cluster"))
    return lab
