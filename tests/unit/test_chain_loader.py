"""The chain file: the canonical example, every problem reported at once with its line,
and the semantic checks the JSON Schema cannot express."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rotate.chain.loader import load_chain
from rotate.chain.model import (
    RESERVED_CREDENTIAL_NAMES,
    LiteralSource,
    SecretKeyRef,
    SecretKeySource,
    ServiceSource,
    TemplateSource,
    ValueSource,
    render_template,
    template_refs,
)
from rotate.chain.value_graph import (
    consumers_of,
    credentials_consumed_by,
    depends_on_secret,
    resolution_order,
)
from rotate.core.errors import ChainFileError, UsageError
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from tests.support.chains import MINIMAL, write_chain
from tests.support.paths import EXAMPLE_CHAIN

EXAMPLE = EXAMPLE_CHAIN


def problems_of(path: Path) -> list[str]:
    with pytest.raises(ChainFileError) as info:
        load_chain(path)
    return [str(p) for p in info.value.problems]


# --------------------------------------------------------------------------- the example


def test_the_example_loads() -> None:
    chain = load_chain(EXAMPLE)
    assert chain.file == EXAMPLE.resolve()
    assert chain.backend.kv_mount == "secret"
    assert chain.backend.auth.method == "token"
    assert chain.cluster.lock_namespace == "rotate-system"
    assert chain.config_center.url_env == "CONFIG_CENTER_URL"
    assert chain.config_center.resolve_url({"CONFIG_CENTER_URL": "http://cc"}) == "http://cc"
    assert (chain.defaults.timeout, chain.defaults.max_parallel) == (120.0, 10)
    assert chain.defaults.reloader_grace == 5.0

    cred = chain.credential("dragonfly")
    assert cred.backend.path == "infra/dragonfly" and cred.backend.key == "password"
    assert cred.generate is not None and cred.generate.length == 40
    assert cred.external_secret == ObjectRef("ExternalSecret", "dragonfly", "dragonfly-password")
    assert cred.secret == SecretKeyRef("dragonfly", "dragonfly-password-secret", "password")
    assert cred.providers == (ObjectRef("Deployment", "dragonfly", "dragonfly"),)
    assert cred.strategy == "overlap"  # no strategy: an ACL user holds two values
    assert chain.timeout_for(cred) == 120.0

    assert len(chain.services) == 10
    cart = chain.services["cart"]
    assert cart.workload == ObjectRef("Deployment", "shop", "cart")
    assert cart.schema.is_absolute() and cart.schema.is_file()
    assert cart.config_key == "bootstrap"
    assert cart.token.namespace == "shop" and cart.token.name == "cart-config-token"
    assert (cart.readyz.service, cart.readyz.port, cart.readyz.path) == ("cart", "http", "/readyz")
    assert next(iter(cart.values)) == "/service/name"
    assert cart.values["/service/name"] == LiteralSource("cart")
    assert cart.values["/dragonfly/port"] == ServiceSource("dragonfly", "dragonfly", 6379, "port")
    assert isinstance(cart.values["/dragonfly/url"], TemplateSource)


def test_consumers_are_derived_in_file_order() -> None:
    chain = load_chain(EXAMPLE)
    assert consumers_of(chain, "dragonfly") == ("cart", "order", "user")
    assert credentials_consumed_by(chain, "cart") == ("dragonfly",)
    assert credentials_consumed_by(chain, "product") == ()


def test_unknown_credential_is_a_usage_error() -> None:
    chain = load_chain(EXAMPLE)
    with pytest.raises(UsageError, match="dragonfly"):
        chain.credential("mysql")


# --------------------------------------------------------------------------- pure functions


def test_template_refs_and_rendering() -> None:
    template = "redis://:{/dragonfly/password}@{/dragonfly/host}:{/dragonfly/port}/0 {not-a-ref}"
    assert template_refs(template) == ["/dragonfly/password", "/dragonfly/host", "/dragonfly/port"]
    values = {"/dragonfly/password": Secret("s3cret-value"), "/dragonfly/host": "h",
              "/dragonfly/port": 6379}
    rendered = render_template(template, values.__getitem__)
    assert isinstance(rendered, Secret)
    assert rendered.reveal() == "redis://:s3cret-value@h:6379/0 {not-a-ref}"
    assert "s3cret" not in str(rendered)
    assert render_template("{/a}-{/b}", {"/a": True, "/b": 1}.__getitem__) == "true-1"


def test_resolution_order_puts_templates_after_their_references() -> None:
    values: dict[str, ValueSource] = {
        "/url": TemplateSource("{/user}:{/pw}@{/host}"),
        "/user": TemplateSource("{/name}-rw"),
        "/pw": SecretKeySource("ns", "s", "k"),
        "/name": LiteralSource("app"),
        "/host": LiteralSource("h"),
    }
    order = resolution_order(values)
    assert sorted(order) == sorted(values)
    for pointer, source in values.items():
        if isinstance(source, TemplateSource):
            assert all(order.index(ref) < order.index(pointer) for ref in source.refs)


def test_consumption_through_templates_is_transitive() -> None:
    target = SecretKeyRef("ns", "s", "k")
    values: dict[str, ValueSource] = {
        "/a": TemplateSource("x{/b}"),
        "/b": TemplateSource("{/c}"),
        "/c": SecretKeySource("ns", "s", "k"),
        "/d": LiteralSource(1),
        "/e": SecretKeySource("ns", "s", "other-key"),
    }
    assert depends_on_secret(values, "/a", target)
    assert not depends_on_secret(values, "/d", target)
    assert not depends_on_secret(values, "/e", target)


# --------------------------------------------------------------------------- problems


def test_minimal_chain_loads(tmp_path: Path) -> None:
    chain = load_chain(write_chain(tmp_path, MINIMAL))
    assert consumers_of(chain, "dragonfly") == ("cart",)
    assert chain.defaults.timeout == 120.0  # defaults section is optional


def test_broken_file_reports_every_problem_with_line_and_path(tmp_path: Path) -> None:
    text = MINIMAL.replace("apiVersion: rotate/v1", "apiVersion: rotate/v9")
    text = text.replace("cluster: {lockNamespace: rotate-system}",
                        "cluster: {lockNamespace: rotate-system, colour: blue}")
    text = text.replace("generate: {length: 40, alphabet: alnum}", "generate: {length: 4}")
    text = text.replace("{kind: Deployment, namespace: dragonfly, name: dragonfly}",
                        "{kind: Job, namespace: dragonfly, name: dragonfly}")
    text = text.replace("readyz: {service: cart, port: http}", "readyz: {port: http}")
    path = write_chain(tmp_path, text)
    problems = problems_of(path)
    f = str(path)
    expected = [
        f"{f}:1: /apiVersion: must be 'rotate/v1'",
        f"{f}:6: /cluster/colour: unknown field 'colour'",
        f"{f}:11: /credentials/dragonfly/generate/length: must be at least 8",
        f"{f}:15: /credentials/dragonfly/providers/0/kind: 'Job' is not one of",
        f"{f}:26: /services/cart/readyz: needs exactly one of: service + port | url",
    ]
    assert len(problems) == len(expected), problems
    for line, prefix in zip(problems, expected, strict=True):
        assert line.startswith(prefix), (line, prefix)


def test_missing_sections_are_named(tmp_path: Path) -> None:
    text = MINIMAL.replace("cluster: {lockNamespace: rotate-system}\n", "")
    text = text.replace("    token: {secret: {name: cart-config-token, key: token}}\n", "")
    problems = problems_of(write_chain(tmp_path, text))
    assert any(p.endswith(": /: missing required field 'cluster'") for p in problems), problems
    assert any(":16: /services/cart: missing required field 'token'" in p for p in problems)


def test_template_cycle_is_refused(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        '/dragonfly/url: {template: "redis://:{/dragonfly/password}@host:6379/0"}',
        '/dragonfly/url: {template: "{/a}"}\n      /a: {template: "x{/b}"}\n'
        '      /b: {template: "{/dragonfly/url}"}')
    problems = problems_of(write_chain(tmp_path, text))
    assert len(problems) == 1, problems
    assert ":24: /services/cart/values/~1dragonfly~1url/template: template cycle: " in problems[0]
    assert "/dragonfly/url → /a → /b → /dragonfly/url" in problems[0]


def test_self_reference_is_a_cycle(tmp_path: Path) -> None:
    text = MINIMAL.replace("{/dragonfly/password}@host", "{/dragonfly/url}@host")
    problems = problems_of(write_chain(tmp_path, text))
    assert len(problems) == 1 and "template cycle: /dragonfly/url → /dragonfly/url" in problems[0]


def test_unknown_template_reference_is_refused(tmp_path: Path) -> None:
    text = MINIMAL.replace("@host:6379", "@{/dragonfly/host}:6379")
    problems = problems_of(write_chain(tmp_path, text))
    assert problems == [
        f"{tmp_path / 'rotate.yaml'}:24: /services/cart/values/~1dragonfly~1url/template: "
        "template references /dragonfly/host, which is not a value of this document"
    ]


def test_malformed_pointers_and_overlapping_values(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        "      /dragonfly/url:",
        "      dragonfly/host: {literal: h}\n      /bad~2escape: {literal: 1}\n"
        "      /dragonfly: {literal: {}}\n      /dragonfly/url:")
    problems = problems_of(write_chain(tmp_path, text))
    assert any(":24: /services/cart/values/dragonfly~1host: name 'dragonfly/host' is not allowed"
               in p for p in problems), problems
    assert any("/services/cart/values/~1bad~02escape: name" in p for p in problems), problems
    assert any("/dragonfly/password lies inside /dragonfly" in p for p in problems), problems


@pytest.mark.parametrize("name", RESERVED_CREDENTIAL_NAMES)
def test_credentials_may_not_be_named_like_commands(tmp_path: Path, name: str) -> None:
    text = MINIMAL.replace("credentials:\n  dragonfly:", f"credentials:\n  {name}:")
    problems = problems_of(write_chain(tmp_path, text))
    assert problems == [
        f"{tmp_path / 'rotate.yaml'}:9: /credentials/{name}: credential name {name!r} is a "
        f"rotate command ({', '.join(RESERVED_CREDENTIAL_NAMES)}); choose another name"
    ]


def test_schema_file_is_resolved_against_the_chain_file(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    path = write_chain(sub, MINIMAL.replace("schema: cart.schema.json", "schema: ../cart.json"))
    problems = problems_of(path)
    assert problems == [f"{path}:20: /services/cart/schema: schema file not found: "
                        f"{(tmp_path / 'cart.json').resolve()}"]
    (tmp_path / "cart.json").write_text("{not json")
    assert "schema file is not valid JSON" in problems_of(path)[0]
    (tmp_path / "cart.json").write_text("{}")
    assert load_chain(path).services["cart"].schema == (tmp_path / "cart.json").resolve()


def test_overlap_strategy_needs_its_previous_key(tmp_path: Path) -> None:
    text = MINIMAL.replace("    providers:\n", "    strategy: overlap\n    providers:\n")
    assert problems_of(write_chain(tmp_path, text)) == [
        f"{tmp_path / 'rotate.yaml'}:9: /credentials/dragonfly: missing required field 'overlap'"
    ]
    text = text.replace("    strategy: overlap\n",
                        "    strategy: overlap\n    overlap: {previousKey: password-previous}\n")
    cred = load_chain(write_chain(tmp_path, text)).credential("dragonfly")
    assert cred.overlap is not None and cred.overlap.previous_key == "password-previous"


def test_generate_and_stdin_are_exclusive(tmp_path: Path) -> None:
    text = MINIMAL.replace("    generate: {length: 40, alphabet: alnum}\n",
                           "    generate: {length: 40, alphabet: alnum}\n    valueFrom: stdin\n")
    assert problems_of(write_chain(tmp_path, text)) == [
        f"{tmp_path / 'rotate.yaml'}:9: /credentials/dragonfly: "
        "needs exactly one of: generate | valueFrom"
    ]
    text = MINIMAL.replace("generate: {length: 40, alphabet: alnum}", "valueFrom: stdin")
    cred = load_chain(write_chain(tmp_path, text)).credential("dragonfly")
    assert cred.generate is None and cred.value_from == "stdin"


def test_merge_keys(tmp_path: Path) -> None:
    text = MINIMAL.replace("services:\n", """\
x-shop: &shop
  namespace: shop
  readyz: {port: http, path: /ready}
x-dragonfly: &dragonfly
  /dragonfly/password:
    secretKey: {namespace: dragonfly, name: dragonfly-password-secret, key: password}
services:
  order:
    <<: *shop
    workload: {kind: Deployment, name: order}
    schema: cart.schema.json
    values:
      <<: *dragonfly
      /service/name: {literal: order}
    token: {secret: {name: order-config-token, key: token}}
    readyz: {service: order, port: 8080}
""")
    chain = load_chain(write_chain(tmp_path, text))
    order = chain.services["order"]
    assert order.namespace == "shop"
    assert order.readyz.service == "order" and order.readyz.port == 8080  # local key wins
    assert set(order.values) == {"/dragonfly/password", "/service/name"}
    assert consumers_of(chain, "dragonfly") == ("order", "cart")


def test_problem_in_a_merged_mapping_points_at_a_line(tmp_path: Path) -> None:
    text = MINIMAL.replace("services:\n", """\
x-shop: &shop
  namespace: Not_A_Namespace
services:
  order:
    <<: *shop
    workload: {kind: Deployment, name: order}
    schema: cart.schema.json
    values: {/a: {literal: 1}}
    token: {secret: {name: t, key: token}}
    readyz: {service: order, port: 8080}
""")
    problems = problems_of(write_chain(tmp_path, text))
    # The merged key has no line of its own: the service's line is the nearest one.
    assert problems == [f"{tmp_path / 'rotate.yaml'}:19: /services/order/namespace: "
                        "'Not_A_Namespace' use lowercase letters, digits and '-' (a DNS label)"]


def test_yaml_syntax_error_has_a_line(tmp_path: Path) -> None:
    path = write_chain(tmp_path, MINIMAL.replace("auth: {method: token}", "auth: {method: token"))
    problems = problems_of(path)
    assert len(problems) == 1
    assert problems[0].startswith(f"{path}:6: /: YAML syntax error")


def test_duplicate_key_names_the_key_not_the_values(tmp_path: Path) -> None:
    text = MINIMAL.replace("  kvMount: secret\n", "  kvMount: secret\n  kvMount: hunter2\n")
    problems = problems_of(write_chain(tmp_path, text))
    assert problems == [f"{tmp_path / 'rotate.yaml'}:5: /: duplicate key 'kvMount'"]


def test_problems_do_not_echo_mappings(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        "configCenter: {urlEnv: CONFIG_CENTER_URL, tokenEnv: CONFIG_CENTER_TOKEN}",
        "configCenter: [{tokenEnv: hunter2}]")
    problems = problems_of(write_chain(tmp_path, text))
    path = tmp_path / "rotate.yaml"
    assert problems == [f"{path}:7: /configCenter: must be a mapping, not array"]


def test_unreadable_and_non_mapping_files(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    assert problems_of(missing) == [
        f"{missing}: /: cannot read the file: No such file or directory"]
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")
    assert problems_of(scalar) == [f"{scalar}:1: /: the file must be a YAML mapping"]


def test_importing_the_chain_and_client_modules_stays_cheap() -> None:
    # `rotate --help` imports these modules; the heavy libraries load only when used.
    modules = ("rotate.chain.loader", "rotate.chain.yaml_reader", "rotate.chain.problems",
               "rotate.chain.model", "rotate.clients.vault", "rotate.clients.kube",
               "rotate.clients.kube_transport", "rotate.clients.kube_kinds",
               "rotate.clients.configcenter",
               "rotate.clients.readyz")
    heavy = ("jsonschema", "ruamel", "hvac", "kubernetes", "httpx", "requests", "urllib3")
    code = (f"import sys, importlib; [importlib.import_module(m) for m in {modules!r}]; "
            f"found = [m for m in {heavy!r} if m in sys.modules]; "
            "print(found); sys.exit(1 if found else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
