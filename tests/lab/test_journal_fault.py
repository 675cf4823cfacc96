"""The lab's ``journal-unreachable`` fault: its API server drops the requests for rotate's
run journals (ConfigMaps ``rotate-run-*`` and ConfigMap lists), and only those."""

from __future__ import annotations

from pathlib import Path

from rotate_lab.cluster.process import journal_unreachable
from rotate_lab.faults import Faults


def test_only_the_journals_requests_are_dropped_while_the_fault_is_on(tmp_path: Path) -> None:
    path = tmp_path / "faults.json"
    Faults.write(path, {})
    drop = journal_unreachable(Faults(path))
    head = "/api/v1/namespaces/rotate-system/configmaps/rotate-run-20261205t013203z-x-ab12"
    listing = "/api/v1/namespaces/rotate-system/configmaps"
    assert not drop(head) and not drop(listing)
    Faults.write(path, {"journal-unreachable": True})
    drop = journal_unreachable(Faults(path))
    assert drop(head) and drop(listing) and drop(head + "-part-1")
    assert not drop("/api/v1/namespaces/rotate-system/configmaps/rotate-chain")
    assert not drop("/apis/coordination.k8s.io/v1/namespaces/rotate-system/leases/rotate-x")
