"""Hand-written fakes of the seams (rotate.clients.seams), small enough to trust, one module
per seam; ``tests/contracts`` runs the same checks against each fake and its real adapter."""

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
