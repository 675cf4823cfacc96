"""Chain-file templates: each substituted value is encoded for the part of the URL it lands
in, so the URL parses back to the exact value; ill-formed placeholders are chain-file errors."""

from __future__ import annotations

import textwrap
import urllib.parse
from pathlib import Path

import pytest

from rotate.chain.loader import load_chain
from rotate.chain.model import render_template, template_refs
from rotate.core.errors import ChainFileError
from rotate.core.secret import Secret

HOSTILE = "p@ss:w/rd%20?x#y &+=é"
URL = "redis://:{/dragonfly/password}@{/dragonfly/host}:{/dragonfly/port}/0"


def render(template: str, **values: object) -> str:
    table = {"/" + k.replace("__", "/"): v for k, v in values.items()}
    out = render_template(template, table.__getitem__)
    return out.reveal() if isinstance(out, Secret) else out


def test_a_hostile_password_parses_back_exactly_from_a_redis_url() -> None:
    url = render(URL, dragonfly__password=Secret(HOSTILE), dragonfly__host="df.ns.svc",
                 dragonfly__port=6379)
    parts = urllib.parse.urlsplit(url)
    assert parts.scheme == "redis"
    assert urllib.parse.unquote(parts.password or "") == HOSTILE
    assert (parts.hostname, parts.port, parts.path) == ("df.ns.svc", 6379, "/0")


def test_user_path_query_and_fragment_values_are_encoded_for_their_part() -> None:
    template = "postgres://{/u}:{/p}@{/hp}/{/db}?sslmode={/m}&application_name={/a}#{/f}"
    url = render(template, u="a:b@c", p=Secret("x/y?z"), hp="db.example:5432", db="my db/1",
                 m="verify full&x=1", a="+plus", f="frag#1")
    parts = urllib.parse.urlsplit(url)
    assert urllib.parse.unquote(parts.username or "") == "a:b@c"
    assert urllib.parse.unquote(parts.password or "") == "x/y?z"
    assert (parts.hostname, parts.port) == ("db.example", 5432)
    assert urllib.parse.unquote(parts.path) == "/my db/1" and parts.path.count("/") == 1
    assert urllib.parse.parse_qs(parts.query) == {"sslmode": ["verify full&x=1"],
                                                  "application_name": ["+plus"]}
    assert urllib.parse.unquote(parts.fragment) == "frag#1"


def test_ipv6_host_and_hostport_values_keep_their_brackets_and_colons() -> None:
    assert render("http://{/h}:8200/v1", h="[::1]") == "http://[::1]:8200/v1"
    assert render("http://{/hp}/x", hp="cc.ns.svc:8080") == "http://cc.ns.svc:8080/x"


def test_templates_that_are_not_urls_are_filled_verbatim() -> None:
    assert render("host={/h} password={/p}", h="x", p=Secret("a b@c")) == "host=x password=a b@c"
    assert render("{/a}-{/b}", a=True, b=1) == "true-1"


def test_explicit_filters_override_or_force_the_encoding() -> None:
    assert render("redis://h/{/path|raw}", path="a/b") == "redis://h/a/b"
    assert render("{/base}/x?t={/tok|query}", base="http://h", tok="a&b") == "http://h/x?t=a%26b"
    assert render("{/p|userinfo}", p="@:/") == "%40%3A%2F"


def test_placeholder_syntax() -> None:
    assert template_refs("redis://:{/a|raw}@{/b}/{not-a-ref}") == ["/a", "/b"]


def write_chain(tmp_path: Path, template: str) -> Path:
    (tmp_path / "s.json").write_text('{"type": "object"}')
    path = tmp_path / "rotate.yaml"
    path.write_text(textwrap.dedent(f"""\
        apiVersion: rotate/v1
        kind: Chain
        backend: {{kvMount: secret, auth: {{method: token}}}}
        cluster: {{lockNamespace: rotate-system}}
        configCenter: {{urlEnv: CONFIG_CENTER_URL, tokenEnv: CONFIG_CENTER_TOKEN}}
        credentials:
          dragonfly:
            backend: {{path: infra/dragonfly, key: password}}
            generate: {{length: 40}}
            externalSecret: {{namespace: dragonfly, name: dragonfly-password}}
            secret: {{namespace: dragonfly, name: dragonfly-password-secret, key: password}}
            providers: [{{kind: Deployment, namespace: dragonfly, name: dragonfly}}]
        services:
          cart:
            namespace: shop
            workload: {{kind: Deployment, name: cart}}
            schema: s.json
            values:
              /a: {{literal: x}}
              /b:
                secretKey: {{namespace: dragonfly, name: dragonfly-password-secret, key: password}}
              /url: {{template: '{template}'}}
            token: {{secret: {{name: cart-config-token, key: token}}}}
            readyz: {{service: cart, port: http}}
        """))
    return path


@pytest.mark.parametrize(("template", "reason"), [
    ("redis://{/a@{/b}", "placeholder {/a@ is not closed before the next '{'"),
    ("redis://{/a", "placeholder {/a is not closed"),
    ("redis://{/b|base64}", "unknown filter 'base64' in {/b|base64} "
                            "(filters: raw, userinfo, host, path, query, fragment)"),
    ("redis://{/a~2}", "{/a~2} is not a well-formed JSON Pointer"),
])
def test_ill_formed_templates_are_chain_file_errors(
    tmp_path: Path, template: str, reason: str
) -> None:
    path = write_chain(tmp_path, template)
    with pytest.raises(ChainFileError) as info:
        load_chain(path)
    problems = [str(p) for p in info.value.problems]
    assert problems == [f"{path}:22: /services/cart/values/~1url/template: {reason}"]
    assert info.value.exit_code == 2
