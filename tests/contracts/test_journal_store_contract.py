"""The JournalStore seam: the state directory's store and the cluster's (ConfigMaps in the
lock namespace) on the lab's API server through KubeClient, and on the fake Kube — one
suite, so neither cluster backing can drift from the other or from the files.

What only the cluster store has (parts of an object limited to 1 MiB, the objects as
kubectl shows them) is asserted on the cluster stores only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rotate_lab.cluster.api import tls

from rotate.clients.cluster_journals import PART_BYTES, ClusterJournals, head_name
from rotate.clients.journal_seam import JournalStore
from rotate.core.errors import ConflictError, NotFoundError, RejectedError
from rotate.engine.local_journals import LocalJournals
from tests.fakes import FakeKube
from tests.support.kube_apiserver import start_lab

NS = "dragonfly"
RUN = "20261205T013203Z-dragonfly-ab12"


def _record(credential: str, n: int) -> bytes:
    return (b'{"data": {"credential": "' + credential.encode() + b'", "n": ' + str(n).encode()
            + b'}, "event": "run.start", "ts": "2026-12-05T01:32:03.000001Z"}\n')


@pytest.fixture(scope="module")
def material() -> tls.TlsMaterial:
    return tls.generate()


@pytest.fixture(params=["local", "fake", "real"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalStore]:
    if request.param == "local":
        yield LocalJournals(tmp_path / "state")
        return
    if request.param == "fake":
        fake = FakeKube()
        fake.put({"kind": "Namespace", "metadata": {"name": NS, "namespace": ""}})
        yield ClusterJournals(fake, NS)
        return
    lab = start_lab(tmp_path, request.getfixturevalue("material"), port=9)
    try:
        yield ClusterJournals(lab.client(), NS)
    finally:
        lab.api.stop()


def test_a_journal_is_created_read_listed_and_deleted(store: JournalStore) -> None:
    text = _record("dragonfly", 1)
    version = store.write(RUN, text, credentials=("dragonfly",), version=None)
    got = store.read(RUN)
    assert (got.run_id, got.text, got.version, got.credentials) == (
        RUN, text, version, ("dragonfly",))
    other = "20261205T013204Z-postgres-cd34"
    store.write(other, _record("postgres", 1), credentials=("postgres",), version=None)
    assert sorted(j.run_id for j in store.journals()) == [RUN, other]
    assert [j.run_id for j in store.journals("dragonfly")] == [RUN]
    assert store.journals("absent") == []
    store.delete(RUN)
    store.delete(RUN)  # gone already: no error
    with pytest.raises(NotFoundError):
        store.read(RUN)
    assert [j.run_id for j in store.journals()] == [other]


def test_writes_are_conditional_on_the_version_read(store: JournalStore) -> None:
    first = _record("dragonfly", 1)
    v1 = store.write(RUN, first, credentials=("dragonfly",), version=None)
    with pytest.raises(ConflictError):  # it exists: not created twice
        store.write(RUN, first, credentials=("dragonfly",), version=None)
    v2 = store.write(RUN, first + _record("dragonfly", 2), credentials=("dragonfly",),
                     version=v1)
    assert v2 != v1
    with pytest.raises(ConflictError):  # a writer still at v1 lost: nothing overwritten
        store.write(RUN, first + b"stale\n", credentials=("dragonfly",), version=v1)
    assert store.read(RUN).text == first + _record("dragonfly", 2)
    assert store.read(RUN).version == v2


def test_a_journal_larger_than_an_object_and_any_byte_round_trip(store: JournalStore) -> None:
    """1.2 MiB (an object holds 1 MiB) ending in a torn, non-ASCII tail: byte for byte."""
    line = _record("dragonfly", 7)
    text = line * (int(1.2 * 1024 * 1024) // len(line)) + b'{"data": \xff\xfe torn'
    version = store.write(RUN, text[:1000], credentials=("dragonfly",), version=None)
    version = store.write(RUN, text, credentials=("dragonfly",), version=version)
    assert store.read(RUN).text == text
    assert [j.text for j in store.journals("dragonfly")] == [text]
    longer = text + b"\n" + line
    store.write(RUN, longer, credentials=("dragonfly",), version=version)
    assert store.read(RUN).text == longer
    store.delete(RUN)
    assert store.journals() == []


def test_the_cluster_keeps_a_run_in_objects_within_the_limit(tmp_path: Path) -> None:
    """The head names the run exactly (its name is lower-cased) and points at its parts; an
    object over 1 MiB is refused by the API server, as the fake Kube refuses it."""
    kube = FakeKube()
    store = ClusterJournals(kube, NS)
    text = b"x" * (2 * PART_BYTES + 10)
    store.write(RUN, text, credentials=("dragonfly",), version=None)
    head = kube.get("ConfigMap", NS, head_name(RUN))
    assert head["metadata"]["name"] == "rotate-run-20261205t013203z-dragonfly-ab12"
    assert head["metadata"]["annotations"]["rotate.dev/run-id"] == RUN
    assert head["metadata"]["annotations"]["rotate.dev/parts"] == "3"
    assert head["metadata"]["labels"]["cred.rotate.dev/dragonfly"] == "true"
    with pytest.raises(RejectedError):
        kube.create("ConfigMap", NS, {"metadata": {"name": "big"},
                                      "data": {"k": "x" * (1024 * 1024 + 1)}})


def test_the_lab_api_server_refuses_an_object_over_1_mib(
        tmp_path: Path, material: tls.TlsMaterial) -> None:
    lab = start_lab(tmp_path, material, port=9)
    try:
        kube = lab.client()
        with pytest.raises(RejectedError):
            kube.create("ConfigMap", NS, {"metadata": {"name": "big"},
                                          "data": {"k": "x" * (1024 * 1024 + 1)}})
        kube.create("ConfigMap", NS, {"metadata": {"name": "fits"},
                                      "data": {"k": "x" * (1024 * 1024)}})
    finally:
        lab.api.stop()
