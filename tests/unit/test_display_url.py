"""An address as `rotate` shows it never carries what may be a credential: user info, query
string and fragment are dropped, whatever the address's shape (path or none, IPv6, port, no
scheme); and `rotate doctor` over unreachable addresses holding a token never prints it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rotate.cli.app import app
from rotate.core.urls import UNPARSEABLE, display_url
from tests.support.paths import EXAMPLE_CHAIN

SECRET = "s3cr3t"


@pytest.mark.parametrize(("url", "shown"), [
    # query and fragment, with and without a path
    ("http://127.0.0.1:9?token=s3cr3t", "http://127.0.0.1:9"),
    ("http://127.0.0.1:9/?token=s3cr3t", "http://127.0.0.1:9/"),
    ("https://bao.example:8200/v1/sys?token=s3cr3t#s3cr3t", "https://bao.example:8200/v1/sys"),
    ("https://bao.example#s3cr3t", "https://bao.example"),
    ("https://bao.example?#s3cr3t", "https://bao.example"),
    # user info, with and without a path, with a port
    ("https://admin:s3cr3t@cc.example:8443", "https://cc.example:8443"),
    ("https://admin:s3cr3t@cc.example/api?x=s3cr3t", "https://cc.example/api"),
    ("http://s3cr3t@cc.example", "http://cc.example"),
    ("http://us%40er:s3cr3t@cc.example/", "http://cc.example/"),
    # IPv6, with a port, user info and a zone
    ("http://[::1]:8200?token=s3cr3t", "http://[::1]:8200"),
    ("http://u:s3cr3t@[fe80::1%25eth0]:8200/v1#s3cr3t", "http://[fe80::1%25eth0]:8200/v1"),
    ("https://[2001:db8::7]/readyz?s3cr3t", "https://[2001:db8::7]/readyz"),
    # no scheme: the address is an authority, never "host:" read as a scheme
    ("127.0.0.1:8200?token=s3cr3t", "127.0.0.1:8200"),
    ("localhost:8200/v1?token=s3cr3t", "localhost:8200/v1"),
    ("admin:s3cr3t@cc.example:80/x", "cc.example:80/x"),
    ("cc.example", "cc.example"),
    # plain addresses are shown as they are
    ("http://127.0.0.1:8200", "http://127.0.0.1:8200"),
    ("https://kube.example:6443/", "https://kube.example:6443/"),
    # what the standard parser refuses is not shown at all
    ("http://[::1?token=s3cr3t", UNPARSEABLE),
])
def test_an_address_is_shown_without_user_info_query_or_fragment(url: str, shown: str) -> None:
    assert display_url(url) == shown
    assert SECRET not in display_url(url)


def test_doctor_never_prints_a_token_in_an_address(tmp_path: Path) -> None:
    """Every system's address holds the token (in a query right after the port, in user
    info): doctor names each one unreachable, and the token appears nowhere."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9?token=s3cr3t'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n")
    env = {"NO_COLOR": "1", "COLUMNS": "200", "ROTATE_CHAIN": None, "VAULT_ADDR": None,
           "CONFIG_CENTER_URL": "http://127.0.0.1:9?token=s3cr3t",
           "CONFIG_CENTER_TOKEN": "t", "BAO_ADDR": "http://x:s3cr3t@127.0.0.1:9?token=s3cr3t",
           "BAO_TOKEN": "t", "KUBECONFIG": str(kubeconfig)}
    for output in ("text", "json"):
        result = CliRunner().invoke(app, ["doctor", "--chain", str(EXAMPLE_CHAIN),
                                          "--state-dir", str(tmp_path), "-o", output],
                                    env=env, catch_exceptions=False)
        assert result.exit_code == 3, result.output
        assert "unreachable at http://127.0.0.1:9" in result.stdout
        assert SECRET not in result.stdout + result.stderr
