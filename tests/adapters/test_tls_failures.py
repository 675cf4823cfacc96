"""A TLS verification failure is reported as such — naming the address and the CA setting to
fix — not as "unreachable" (issue 10). Real TLS on loopback: the lab's API server with its own
CA, reached by each adapter with a CA that did not sign its certificate."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from rotate_lab.cluster.api import kubeconfig, tls
from rotate_lab.cluster.api.apiserver import ApiServer, Identity
from rotate_lab.cluster.api.store import Store

from rotate.clients.configcenter import HttpConfigCenter
from rotate.clients.kube import KubeClient
from rotate.clients.vault import HvacVault
from rotate.core.errors import ClientError, PermanentError
from rotate.core.secret import Secret


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    token = "adm-" + secrets.token_hex(12)
    api = ApiServer(Store(), tls=tls.generate(), identities={token: Identity.admin()}).start()
    yield api
    api.stop()


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CA of another lab: valid, but it did not sign the server's certificate."""
    path = tmp_path_factory.mktemp("ca") / "other-ca.pem"
    path.write_bytes(tls.generate().ca_pem)
    return path


def tls_failure(call: object) -> ClientError:
    with pytest.raises(PermanentError) as info:
        call()  # type: ignore[operator]
    return info.value


def test_kubernetes_names_the_kubeconfig_certificate_authority(
    server: ApiServer, other_ca: Path, tmp_path: Path
) -> None:
    path = kubeconfig.write(tmp_path / "kubeconfig", server.url, other_ca.read_bytes(),
                            "token-a", "token-b")
    err = tls_failure(lambda: KubeClient(str(path)).get("Namespace", None, "default"))
    assert f"TLS verification failed for {server.url}" in err.reason
    assert "certificate-authority" in err.reason and str(path) in err.reason
    assert not err.temporary


def test_openbao_names_vault_cacert(server: ApiServer, other_ca: Path) -> None:
    vault = HvacVault(server.url, Secret("s.token"), ca_cert=str(other_ca), timeout=5)
    for call in (vault.health, lambda: vault.read_metadata("infra/dragonfly")):
        err = tls_failure(call)
        assert f"TLS verification failed for {server.url}" in err.reason
        assert "VAULT_CACERT" in err.reason and "BAO_CACERT" in err.reason


def test_config_center_names_its_ca_setting(
    server: ApiServer, other_ca: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(other_ca))
    cc = HttpConfigCenter(server.url + "/cc", Secret("admin-token"), timeout=5)
    err = tls_failure(cc.health)
    assert f"TLS verification failed for {server.url}/cc" in err.reason
    assert "SSL_CERT_FILE" in err.reason
