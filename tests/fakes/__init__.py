"""The one package of fakes: hand-written stand-ins small enough to trust, one module per
seam (rotate.clients.seams); ``tests/contracts`` and ``tests/providers`` run the same checks
against each fake and its real adapter.  Besides the seams: ``engine`` (the engine facade the
CLI tests inject), ``lab`` (the lab control behind ``rotate lab``), ``providers`` (Redis ACL
and PostgreSQL servers and admins), ``kube_reads`` (the two reads provider access makes)."""

from rotate.core.errors import ClientError
from tests.fakes.configcenter import FakeConfigCenter
from tests.fakes.faults import Faults
from tests.fakes.kube import FakeKube
from tests.fakes.readyz import FakeReadyz
from tests.fakes.vault import FakeVault
from tests.fakes.world import (
    CONSUMERS,
    SCHEMA,
    World,
    assert_no_secret,
    deployment,
    make_chain,
)

__all__ = [
    "CONSUMERS",
    "SCHEMA",
    "ClientError",
    "FakeConfigCenter",
    "FakeKube",
    "FakeReadyz",
    "FakeVault",
    "Faults",
    "World",
    "assert_no_secret",
    "deployment",
    "make_chain",
]
