"""The Config Center's CA (CONFIG_CENTER_CACERT) and admin token file (<tokenEnv>_FILE), and
every missing setting of every system reported at once (issue 9). Real TLS on loopback: the
lab's API server with a CA made here stands in for an HTTPS Config Center."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from rotate_lab.cluster.api import tls
from rotate_lab.cluster.api.apiserver import ApiServer, Identity
from rotate_lab.cluster.api.store import Store

from rotate.clients.configcenter import HttpConfigCenter
from rotate.core.errors import ClientError, PermanentError, UsageError
from rotate.core.secret import Secret
from rotate.engine.api import Engine
from rotate.engine.model import Options
from rotate.engine.wiring import RealAdapters, load_chain
from tests.support.paths import EXAMPLE_CHAIN

MATERIAL = tls.generate()


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    token = "adm-" + secrets.token_hex(12)
    api = ApiServer(Store(), tls=MATERIAL, identities={token: Identity.admin()}).start()
    yield api
    api.stop()


def _ca(tmp_path: Path, pem: bytes) -> str:
    path = tmp_path / "ca.pem"
    path.write_bytes(pem)
    return str(path)


def test_the_config_center_ca_file_verifies_its_certificate(
        server: ApiServer, tmp_path: Path) -> None:
    good = HttpConfigCenter(server.url + "/cc", Secret("admin"), timeout=5,
                            ca_file=_ca(tmp_path, MATERIAL.ca_pem))
    with pytest.raises(ClientError) as info:  # TLS passes: the API server answers (no cc)
        good.health()
    assert "TLS" not in info.value.reason
    other = tmp_path / "other"
    other.mkdir()
    bad = HttpConfigCenter(server.url + "/cc", Secret("admin"), timeout=5,
                           ca_file=_ca(other, tls.generate().ca_pem))
    with pytest.raises(PermanentError) as err:
        bad.health()
    assert f"TLS verification failed for {server.url}/cc" in err.value.reason
    assert "CONFIG_CENTER_CACERT" in err.value.reason


def test_the_admin_token_file_and_the_plain_http_warning(tmp_path: Path) -> None:
    chain = load_chain(EXAMPLE_CHAIN)
    factory_warnings: list[str] = []
    factory = RealAdapters(warn=factory_warnings.append)
    token_file = tmp_path / "token"
    token_file.write_text("file-admin-token\n")
    env = {"CONFIG_CENTER_URL": "http://127.0.0.1:1", "CONFIG_CENTER_TOKEN_FILE":
           str(token_file)}
    cfg = replace(chain.config_center, url=None, url_env="CONFIG_CENTER_URL",
                  token_env="CONFIG_CENTER_TOKEN")
    chain = replace(chain, config_center=cfg)
    assert factory.config_center(chain, env).url == "http://127.0.0.1:1"
    assert factory_warnings == []
    factory.config_center(chain, {**env, "CONFIG_CENTER_URL": "http://cc.example.test"})
    assert factory_warnings == ["the Config Center admin token goes over plain http:// to "
                                "cc.example.test, which is not loopback: use https://"]
    with pytest.raises(UsageError, match="is empty"):
        token_file.write_text("\n")
        factory.config_center(chain, env)


def test_every_missing_setting_is_reported_at_once(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "
        "'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: "
        "[{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
    chain = load_chain(EXAMPLE_CHAIN)
    url_env = chain.config_center.url_env
    env = {"KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}
    if url_env:
        env[url_env] = "http://127.0.0.1:1"
    with pytest.raises(UsageError) as info:
        engine = Engine(RealAdapters(warn=lambda _: None), load_chain, environ=env)
        engine.plan(Options(chain_file=EXAMPLE_CHAIN, state_dir=tmp_path,
                            context=None), "dragonfly")
    message = info.value.message
    assert "BAO_ADDR or VAULT_ADDR" in message and "BAO_TOKEN or VAULT_TOKEN" in message
    assert f"set {chain.config_center.token_env}" in message
    assert info.value.exit_code == 2
