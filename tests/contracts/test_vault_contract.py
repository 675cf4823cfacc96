"""The Vault seam: FakeVault and HvacVault against a real OpenBao (``bao server -dev``).

What only the real adapter can show (error translation, auth methods, a sealed server) stays
in tests/adapters/test_vault_adapter.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from rotate.clients.seams import Vault
from rotate.clients.vault import HvacVault
from rotate.core.errors import ConflictError, ForbiddenError, NotFoundError
from rotate.core.secret import Secret
from tests.fakes import FakeVault
from tests.support.bao import ROOT_TOKEN, Bao, start_bao, stop_bao

VALUE_1 = "first-password-value-0123456789"
VALUE_2 = "second-password-value-9876543210"


@pytest.fixture(scope="module")
def bao(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bao]:
    server = start_bao(tmp_path_factory.mktemp("bao"))
    yield server
    stop_bao(server)


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.bao)])
def vault(request: pytest.FixtureRequest) -> Vault:
    if request.param == "fake":
        return FakeVault("secret")
    bao: Bao = request.getfixturevalue("bao")
    return HvacVault(bao.addr, Secret(ROOT_TOKEN), "secret")


@pytest.fixture
def path() -> str:
    return f"contract/{uuid.uuid4().hex[:8]}"


def test_versions_are_written_with_check_and_set_and_read_back(vault: Vault, path: str) -> None:
    vault.health()
    assert vault.write(path, {"password": Secret(VALUE_1)}, cas=0) == 1
    assert vault.write(path, {"password": Secret(VALUE_2), "user": Secret("app")}, cas=1) == 2
    latest = vault.read(path)
    assert set(latest) == {"password", "user"}
    assert isinstance(latest["password"], Secret) and latest["password"].reveal() == VALUE_2
    assert vault.read(path, version=1) == {"password": Secret(VALUE_1)}
    meta = vault.read_metadata(path)
    assert (meta.path, meta.current_version) == (path, 2)
    assert meta.oldest_version in (0, 1)  # Vault reports 0 until a version is deleted
    assert sorted(meta.versions) == [1, 2]
    assert meta.versions[1].created_time and not meta.versions[1].destroyed
    assert meta.custom_metadata == {}


def test_a_check_and_set_mismatch_is_a_conflict(vault: Vault, path: str) -> None:
    vault.write(path, {"password": Secret(VALUE_1)}, cas=0)
    with pytest.raises(ConflictError):
        vault.write(path, {"password": Secret(VALUE_2)}, cas=0)  # exists already
    vault.write(path, {"password": Secret(VALUE_2)}, cas=1)
    with pytest.raises(ConflictError):
        vault.write(path, {"password": Secret(VALUE_1)}, cas=1)  # stale version
    assert vault.read(path)["password"].reveal() == VALUE_2


def test_an_absent_path_or_version_is_not_found(vault: Vault, path: str) -> None:
    with pytest.raises(NotFoundError):
        vault.read_metadata(path)
    with pytest.raises(NotFoundError):
        vault.read(path)
    vault.write(path, {"password": Secret(VALUE_1)}, cas=0)
    with pytest.raises(NotFoundError):
        vault.read(path, version=5)


def test_custom_metadata_is_merged_even_before_the_first_version(vault: Vault,
                                                                   path: str) -> None:
    vault.write(path, {"password": Secret(VALUE_1)}, cas=0)
    vault.set_custom_metadata(path, {"rotate/run-id": "20261202T141200Z-dragonfly-ab12"})
    vault.set_custom_metadata(path, {"rotate/previous-version": "1"})
    assert vault.read_metadata(path).custom_metadata == {
        "rotate/run-id": "20261202T141200Z-dragonfly-ab12", "rotate/previous-version": "1"}
    fresh = path + "-fresh"
    vault.set_custom_metadata(fresh, {"owner": "rotate"})
    meta = vault.read_metadata(fresh)
    assert (meta.current_version, meta.custom_metadata) == (0, {"owner": "rotate"})
    with pytest.raises(NotFoundError):
        vault.read(fresh)


def test_capabilities_answer_for_every_path_asked(vault: Vault, path: str) -> None:
    paths = [f"secret/data/{path}", f"secret/metadata/{path}"]
    caps = vault.capabilities(paths)
    assert sorted(caps) == sorted(paths)
    for got in caps.values():
        assert got and all(isinstance(c, str) for c in got)
        assert "root" in got or {"read", "update"} <= set(got)


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.bao)])
def unknown_token_vault(request: pytest.FixtureRequest) -> Vault:
    """A vault whose token the server does not know (as after it expired)."""
    if request.param == "fake":
        fake = FakeVault("secret")
        fake.token_expired = True
        return fake
    bao: Bao = request.getfixturevalue("bao")
    return HvacVault(bao.addr, Secret("not-a-token-" + uuid.uuid4().hex), "secret")


def test_the_token_looks_itself_up(vault: Vault) -> None:
    token = vault.lookup_self()
    assert token.policies == ("root",)
    assert token.ttl == 0  # the root token never expires


def test_an_unknown_token_is_refused_everywhere(unknown_token_vault: Vault, path: str) -> None:
    vault = unknown_token_vault
    vault.health()  # health needs no token
    for call in (vault.lookup_self, lambda: vault.read_metadata(path),
                 lambda: vault.capabilities([f"secret/data/{path}"])):
        with pytest.raises(ForbiddenError) as info:
            call()
        assert info.value.status == 403
