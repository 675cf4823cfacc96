"""The vault CLI's TLS variables against a real ``bao server`` with a TLS listener on loopback.

The server's certificate is for ``vault.rotate.test`` only (signed by a CA made here), so a
client connecting to ``https://127.0.0.1:PORT`` verifies it only with the CA *and*
``*_TLS_SERVER_NAME``; without the CA, only ``*_SKIP_VERIFY`` gets through (with a warning).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from rotate_lab.cluster.api import tls

from rotate.chain.sections import AuthConfig, BackendConfig
from rotate.clients.vault import HvacVault, vault_from_env
from rotate.core.errors import PermanentError, TemporaryError, UsageError
from rotate.core.secret import Secret
from rotate.core.waiting import Deadline, wait_for
from tests.support.bao import BAO, free_port

pytestmark = pytest.mark.bao

ROOT = "dev-root-" + uuid.uuid4().hex
NAME = "vault.rotate.test"
BACKEND = BackendConfig("secret", AuthConfig("token"))


@dataclass
class TlsBao:
    url: str  # the TLS listener, by IP: the certificate does not name it
    ca: Path
    capath: Path


@pytest.fixture(scope="module")
def bao(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBao]:
    tmp = tmp_path_factory.mktemp("bao-tls")
    ca, cert, key = tls.generate(hosts=(NAME,)).write(tmp / "pki")
    capath = tmp / "capath"  # the CA among other CAs, under plain (unhashed) names
    capath.mkdir()
    (capath / "other.pem").write_bytes(tls.generate().ca_pem)
    (capath / "ours.crt").write_bytes(ca.read_bytes())
    plain, secure = free_port(), free_port()
    (tmp / "tls.hcl").write_text(
        f'listener "tcp" {{\n  address = "127.0.0.1:{secure}"\n'
        f'  tls_cert_file = "{cert}"\n  tls_key_file = "{key}"\n}}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BAO_", "VAULT_"))}
    env.update(BAO_DEV_ROOT_TOKEN_ID=ROOT, HOME=str(tmp))
    with (tmp / "bao.log").open("wb") as log:
        proc = subprocess.Popen(
            [str(BAO), "server", "-dev", f"-dev-listen-address=127.0.0.1:{plain}",
             "-dev-no-store-token", f"-config={tmp / 'tls.hcl'}"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp)

    def healthy() -> bool | None:
        if proc.poll() is not None:
            raise AssertionError("bao exited: " + (tmp / "bao.log").read_text()[-2000:])
        try:
            return httpx.get(f"http://127.0.0.1:{plain}/v1/sys/health",
                             timeout=1).status_code == 200 or None
        except httpx.HTTPError:
            return None

    try:
        wait_for(healthy, deadline=Deadline.after(20), what="bao with a TLS listener")
        yield TlsBao(f"https://127.0.0.1:{secure}", ca, capath)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _vault(bao: TlsBao, warnings: list[str] | None = None, **env: str) -> HvacVault:
    environ = {"BAO_ADDR": bao.url, "BAO_TOKEN": ROOT, **env}
    return vault_from_env(BACKEND, environ, timeout=5,
                          warn=(warnings.append if warnings is not None else lambda _: None))


def _round_trip(vault: HvacVault) -> None:
    vault.health()
    path = f"tls/{uuid.uuid4().hex[:8]}"
    version = vault.write(path, {"password": Secret("tls-value-0123456789")}, cas=0)
    assert vault.read(path)["password"].reveal() == "tls-value-0123456789"
    assert version == 1


def test_cacert_and_tls_server_name_verify_the_server(bao: TlsBao) -> None:
    _round_trip(_vault(bao, BAO_CACERT=str(bao.ca), BAO_TLS_SERVER_NAME=NAME))
    _round_trip(_vault(bao, VAULT_CACERT=str(bao.ca), VAULT_TLS_SERVER_NAME=NAME))


def test_capath_reads_every_file_of_the_directory(bao: TlsBao) -> None:
    _round_trip(_vault(bao, VAULT_CAPATH=str(bao.capath), VAULT_TLS_SERVER_NAME=NAME))


def test_the_ca_alone_does_not_accept_a_certificate_for_another_name(bao: TlsBao) -> None:
    vault = _vault(bao, BAO_CACERT=str(bao.ca))
    with pytest.raises(PermanentError) as info:
        vault.health()
    assert f"TLS verification failed for {bao.url}" in info.value.reason
    assert "BAO_CACERT" in info.value.reason


def test_without_a_ca_verification_fails_and_names_the_setting(bao: TlsBao) -> None:
    vault = _vault(bao, BAO_TLS_SERVER_NAME=NAME)
    with pytest.raises(PermanentError) as info:
        vault.health()
    assert "TLS verification failed" in info.value.reason
    assert "BAO_CACERT or VAULT_CACERT" in info.value.reason


def test_skip_verify_connects_and_warns(bao: TlsBao) -> None:
    warnings: list[str] = []
    _round_trip(_vault(bao, warnings, VAULT_SKIP_VERIFY="true"))
    assert warnings == ["VAULT_SKIP_VERIFY is set: the OpenBao/Vault server's certificate is "
                        "not verified"]
    with pytest.raises(UsageError, match="BAO_SKIP_VERIFY must be true or false"):
        _vault(bao, BAO_SKIP_VERIFY="maybe")


def test_unreadable_tls_files_are_usage_errors_naming_the_variable(
        bao: TlsBao, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="VAULT_CACERT"):
        _vault(bao, VAULT_CACERT=str(tmp_path / "missing.pem"))
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(UsageError, match="BAO_CAPATH"):
        _vault(bao, BAO_CAPATH=str(tmp_path))
    with pytest.raises(UsageError, match="go together"):
        _vault(bao, BAO_CLIENT_CERT=str(bao.ca))


def test_missing_settings_are_listed_at_once_and_unreachable_names_the_address() -> None:
    with pytest.raises(UsageError) as info:
        vault_from_env(BACKEND, {"VAULT_SKIP_VERIFY": "perhaps"})
    message = info.value.message
    assert "BAO_ADDR or VAULT_ADDR" in message and "BAO_TOKEN or VAULT_TOKEN" in message
    assert "VAULT_SKIP_VERIFY must be true or false" in message
    port = free_port()
    down = vault_from_env(BACKEND, {"BAO_ADDR": f"http://user:pw@127.0.0.1:{port}",
                                    "BAO_TOKEN": ROOT}, timeout=2)
    with pytest.raises(TemporaryError) as err:
        down.read_metadata("x")
    assert err.value.reason == f"unreachable at http://127.0.0.1:{port}"
    assert "pw" not in str(err.value)


def test_a_token_over_plain_http_to_a_remote_host_is_warned_about() -> None:
    warnings: list[str] = []
    for addr in ("http://127.0.0.1:8200", "http://localhost:8200", "http://[::1]:8200",
                 "https://vault.example.test"):
        vault_from_env(BACKEND, {"BAO_ADDR": addr, "BAO_TOKEN": ROOT}, warn=warnings.append)
    assert warnings == []
    vault_from_env(BACKEND, {"BAO_ADDR": "http://vault.example.test:8200", "BAO_TOKEN": ROOT},
                   warn=warnings.append)
    assert warnings == ["the OpenBao/Vault token goes over plain http:// to vault.example.test, "
                        "which is not loopback: use https://"]
