"""Provider plug-ins (docs/providers.md "Writing a plug-in"): a distribution installed on the
path declares a MethodSpec in the entry point group ``rotate.providers``; a chain naming it
loads it then (never before), validates its fields with line numbers, picks the default
strategy from what it declares, and a plug-in that raises or is missing is worded for the
operator, never with the plug-in's own text."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotate.chain import methods
from rotate.chain.loader import load_chain
from rotate.core.errors import EXIT_USAGE, ChainFileError, PermanentError
from rotate.core.strategy import Strategy
from rotate.engine.access import permissions_needed, vault_grants
from rotate.providers import method_of, unregister

LEAK = "s3cr3t-value-in-a-plugin-error"

HEAD = """\
apiVersion: rotate/v1
kind: Chain
backend: {kvMount: secret, auth: {method: token}}
cluster: {lockNamespace: rotate-system}
configCenter: {urlEnv: CONFIG_CENTER_URL, tokenEnv: CONFIG_CENTER_TOKEN}
credentials:
  db:
    backend: {path: infra/db, key: password}
    generate: {length: 32}
    externalSecret: {namespace: db, name: db-app}
    secret: {namespace: db, name: db-app, key: password}
    providers:
      - kind: StatefulSet
        namespace: db
        name: demo
"""

PLUGIN = f'''
from rotate.chain.methods import KubeAccess, MethodSpec, VaultAccess


def _access(applied):
    return [KubeAccess("get", "ConfigMap", "db", "demo-tuning"),
            VaultAccess("secret/data/demo/admin", ("read",), "the demo admin password")]


def _problems(entry):
    if entry.get("charset") == "latin1" and "users" in entry:
        yield ["charset"], "latin1 cannot name alternating users"


SPEC = MethodSpec(
    name="demo", protocol="demo", factory="rotate_provider_demo:DemoMethod",
    default_port=4000, default_admin_user="root",
    fields={{"charset": {{"enum": ["utf8", "latin1"]}}}},
    alternating_users=True, one_value="a demo account holds one password at a time",
    problems=_problems, access=_access)


class DemoMethod:
    restart_hint = "use apply: demo"

    @property
    def values(self):
        raise RuntimeError("{LEAK}")

    def describe_apply(self, applied, *, overlap):
        raise ValueError("{LEAK}")

    def describe_retire(self, applied):
        return "lock the account the consumers left"
'''


@pytest.fixture
def plugin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A distribution ``rotate-provider-demo`` on sys.path, as pip would leave it."""
    site = tmp_path / "site"
    dist = site / "rotate_provider_demo-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rotate-provider-demo\n"
                                   "Version: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[rotate.providers]\ndemo = rotate_provider_demo:SPEC\n"
        "broken = rotate_provider_broken:SPEC\n")
    (site / "rotate_provider_demo.py").write_text(PLUGIN)
    (site / "rotate_provider_broken.py").write_text(f'raise ImportError("{LEAK}")\n')
    monkeypatch.syspath_prepend(str(site))
    methods._MISSING.clear()
    yield site
    for name in ("demo", "broken"):
        unregister(name)
    methods._MISSING.clear()


def _chain(tmp_path: Path, provider: str, strategy: str = "") -> Path:
    path = tmp_path / "rotate.yaml"
    path.write_text(HEAD + textwrap.indent(textwrap.dedent(provider), " " * 8)
                    + (f"    strategy: {strategy}\n" if strategy else ""))
    return path


def _problems(path: Path) -> str:
    with pytest.raises(ChainFileError) as err:
        load_chain(path)
    assert err.value.exit_code == EXIT_USAGE
    return str(err.value)


def test_a_method_nothing_provides_is_a_usage_error_naming_the_package(
        tmp_path: Path, plugin_path: Path) -> None:
    text = _problems(_chain(tmp_path, "apply: cockroach\nuser: app\n"))
    assert "rotate.yaml:16: /credentials/db/providers/0/apply: apply: cockroach is not a " \
           "built-in method and no installed package provides it; install the package " \
           "that provides it, e.g. pip install rotate-provider-cockroach" in text


def test_a_plugin_that_fails_to_load_is_named_without_its_text(
        tmp_path: Path, plugin_path: Path) -> None:
    text = _problems(_chain(tmp_path, "apply: broken\nuser: app\n"))
    assert "the plug-in rotate-provider-demo failed to load (ImportError)" in text
    assert "pip install --force-reinstall rotate-provider-demo" in text
    assert LEAK not in text


def test_the_plugins_fields_are_validated_with_line_numbers(
        tmp_path: Path, plugin_path: Path) -> None:
    text = _problems(_chain(tmp_path, "apply: demo\nuser: app\ncharset: ebcdic\n"))
    assert "rotate.yaml:18: /credentials/db/providers/0/charset: 'ebcdic' is not one of: " \
           "utf8, latin1" in text
    text = _problems(_chain(tmp_path, "apply: redis-acl\ncharset: utf8\n"))
    assert "/providers/0/charset: charset is not a field of redis providers (a field of demo " \
           "providers)" in text
    text = _problems(_chain(tmp_path, "apply: demo\nusers: [a, b]\nusernameKey: username\n"
                                      "charset: latin1\nadmin: {user: root, secretKey: "
                                      "{namespace: db, name: admin, key: password}}\n"))
    assert "/providers/0/charset: latin1 cannot name alternating users" in text


def test_the_plugins_fields_reach_the_connection_and_the_default_strategy(
        tmp_path: Path, plugin_path: Path) -> None:
    chain = load_chain(_chain(tmp_path, "apply: demo\nuser: app\ncharset: utf8\n"))
    cred = chain.credentials["db"]
    applied = cred.applies[0]
    assert applied.connection is not None
    assert (applied.connection.protocol, applied.connection.service.port) == ("demo", 4000)
    assert applied.connection.options == {"charset": "utf8"}
    assert cred.strategy == Strategy.restart
    assert cred.strategy_reason == ("default restart: statefulset/db/demo (apply: demo) holds "
                                    "one value without two alternating login roles "
                                    "(users: [a, b])")
    alternating = load_chain(_chain(tmp_path, (
        "apply: demo\nusers: [a, b]\nusernameKey: username\nadmin: {user: root, secretKey: "
        "{namespace: db, name: admin, key: password}}\n"))).credentials["db"]
    assert alternating.strategy == Strategy.overlap
    assert alternating.strategy_reason == ("default overlap: every provider holds two values "
                                           "(demo + users)")
    text = _problems(_chain(tmp_path, "apply: demo\nuser: app\n", strategy="overlap"))
    assert "strategy overlap with apply: demo needs two alternating login roles (users: " \
           "[a, b]): a demo account holds one password at a time" in text


def test_a_plugins_protocol_needs_no_driver_of_rotates(tmp_path: Path,
                                                       plugin_path: Path) -> None:
    """The plug-in brings its own driver: rotate's driver check (exit 2 naming an extra)
    knows only its own protocols and passes a plug-in's by."""
    from rotate.clients.drivers import missing_drivers

    chain = load_chain(_chain(tmp_path, "apply: demo\nuser: app\n"))
    assert missing_drivers([chain.credentials["db"]]) == []


def test_what_the_plugin_needs_is_granted(tmp_path: Path, plugin_path: Path) -> None:
    chain = load_chain(_chain(tmp_path, "apply: demo\nuser: app\n"))
    cred = chain.credentials["db"]
    perms = permissions_needed(chain, cred)
    assert any((p.verb, p.kind, p.namespace, p.name) == ("get", "ConfigMap", "db",
                                                         "demo-tuning") for p in perms)
    assert any(g.path == "secret/data/demo/admin" and g.capabilities == ("read",)
               for g in vault_grants(chain, cred))


def test_a_plugin_that_raises_is_translated_without_its_text(
        tmp_path: Path, plugin_path: Path) -> None:
    chain = load_chain(_chain(tmp_path, "apply: demo\nuser: app\n"))
    method = method_of("demo")
    applied = chain.credentials["db"].applies[0]
    assert method.describe_retire(applied) == "lock the account the consumers left"
    for call in (lambda: method.describe_apply(applied, overlap=False),
                 lambda: method.values):
        with pytest.raises(PermanentError) as err:
            call()
        assert "plug-in rotate-provider-demo" in str(err.value)
        assert "raised" in str(err.value) and LEAK not in str(err.value)


def test_a_chain_of_built_ins_never_reads_the_installed_distributions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(name: str | None = None) -> list[object]:
        raise AssertionError("entry points were read")

    monkeypatch.setattr(methods, "_entry_points", refuse)
    chain = load_chain(_chain(tmp_path, "apply: redis-acl\n"))
    cred = chain.credentials["db"]
    assert cred.strategy == Strategy.overlap
    assert cred.strategy_reason == "default overlap: every provider holds two values (redis-acl)"
