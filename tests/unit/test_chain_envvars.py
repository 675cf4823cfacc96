"""``${VAR}`` in the chain file (rotate/chain/envvars.py, docs/chain-file.md "Environment
variables"): values expand from the environment, an unset variable is a chain-file error
(exit 2) naming it and its line, ``$${`` escapes, keys never expand, and the validated-chain
cache never serves a chain expanded from other values."""

from __future__ import annotations

from pathlib import Path

import pytest

from rotate.chain.cache import load_chain_cached
from rotate.chain.loader import load_chain
from rotate.core.errors import EXIT_USAGE, ChainFileError

CHAIN = """\
apiVersion: rotate/v1
kind: Chain
x-ns: &ns {namespace: "${SHOP_NS}"}
backend:
  kvMount: secret
  auth: {method: token}
cluster: {lockNamespace: rotate-system}
configCenter: {urlEnv: CONFIG_CENTER_URL, tokenEnv: CONFIG_CENTER_TOKEN}
credentials:
  dragonfly:
    description: "costs $${PRICE} in ${ENV_NAME}"
    backend: {path: "${ENV_NAME}/dragonfly", key: password}
    generate: {length: 40, alphabet: alnum}
    externalSecret: {namespace: dragonfly, name: dragonfly-password}
    secret: {namespace: dragonfly, name: dragonfly-password-secret, key: password}
    providers:
      - {kind: Deployment, namespace: dragonfly, name: dragonfly}
services:
  cart:
    <<: *ns
    workload: {kind: Deployment, name: cart}
    schema: cart.schema.json
    values:
      /env: {literal: "${ENV_NAME}"}
      /url: {template: "redis://:{/env}@host:6379/0"}
    token: {secret: {name: cart-config-token, key: token}}
    readyz: {service: cart, port: http}
"""

ENV = {"ENV_NAME": "staging", "SHOP_NS": "shop-staging"}


@pytest.fixture
def chain_file(tmp_path: Path) -> Path:
    (tmp_path / "cart.schema.json").write_text('{"type": "object"}')
    path = tmp_path / "rotate.yaml"
    path.write_text(CHAIN)
    return path


def test_values_expand_and_the_escape_stays_literal(chain_file: Path) -> None:
    chain = load_chain(chain_file, ENV)
    cred = chain.credentials["dragonfly"]
    assert cred.backend.path == "staging/dragonfly"
    assert cred.description == "costs ${PRICE} in staging"
    cart = chain.services["cart"]
    assert cart.namespace == "shop-staging"  # through a merge key: the anchor expanded once
    assert cart.values["/env"].value == "staging"  # type: ignore[union-attr]
    assert cart.values["/url"].template == "redis://:{/env}@host:6379/0"  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "expanded"), [
    ("${/pointer} and $HOME and $$ and $${A}", "${/pointer} and $HOME and $$ and ${A}"),
    ("${A}${A}-$$${A}", "aa-$${A}"),  # a lone $, then the escape
    ("${EMPTY}x", "x"),
])
def test_only_a_named_reference_expands(text: str, expanded: str) -> None:
    from rotate.chain.envvars import expand_text

    assert expand_text(text, {"A": "a", "EMPTY": "", "HOME": "/root"}) == (expanded, [])


def test_a_value_is_never_expanded_twice(chain_file: Path) -> None:
    chain = load_chain(chain_file, {**ENV, "ENV_NAME": "${SHOP_NS}"})
    assert chain.credentials["dragonfly"].backend.path == "${SHOP_NS}/dragonfly"


def test_an_unset_variable_is_an_error_naming_it_and_its_line(chain_file: Path) -> None:
    with pytest.raises(ChainFileError) as info:
        load_chain(chain_file, {"SHOP_NS": "shop"})
    assert info.value.exit_code == EXIT_USAGE
    problems = [str(p) for p in info.value.problems]
    assert problems == [
        f"{chain_file}:11: /credentials/dragonfly/description: environment variable ENV_NAME "
        "is not set (write $${ENV_NAME} for the literal text ${ENV_NAME})",
        f"{chain_file}:12: /credentials/dragonfly/backend/path: environment variable "
        "ENV_NAME is not set (write $${ENV_NAME} for the literal text ${ENV_NAME})",
        f"{chain_file}:24: /services/cart/values/~1env/literal: environment variable "
        "ENV_NAME is not set (write $${ENV_NAME} for the literal text ${ENV_NAME})",
    ]


def test_keys_are_never_expanded(tmp_path: Path) -> None:
    (tmp_path / "cart.schema.json").write_text('{"type": "object"}')
    path = tmp_path / "rotate.yaml"
    path.write_text(CHAIN.replace("  dragonfly:\n    description", "  ${NAME}:\n    description"))
    with pytest.raises(ChainFileError) as info:
        load_chain(path, {**ENV, "NAME": "dragonfly"})
    assert any("${NAME}" in str(p) for p in info.value.problems)


def test_the_cache_never_serves_a_chain_expanded_from_other_values(
    chain_file: Path, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache"
    first = load_chain_cached(chain_file, cache_dir, ENV)
    assert first.credentials["dragonfly"].backend.path == "staging/dragonfly"
    assert len(list(cache_dir.glob("*.json"))) == 1
    second = load_chain_cached(chain_file, cache_dir, {**ENV, "ENV_NAME": "production"})
    assert second.credentials["dragonfly"].backend.path == "production/dragonfly"
    assert len(list(cache_dir.glob("*.json"))) == 2
    again = load_chain_cached(chain_file, cache_dir, ENV)  # a hit, with its own values
    assert again == first
    with pytest.raises(ChainFileError):  # unset now: never an entry made when it was set
        load_chain_cached(chain_file, cache_dir, {"SHOP_NS": "shop"})


def test_the_cache_key_ignores_variables_the_file_does_not_reference(
    chain_file: Path, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache"
    load_chain_cached(chain_file, cache_dir, ENV)
    load_chain_cached(chain_file, cache_dir, {**ENV, "UNRELATED": "x"})
    assert len(list(cache_dir.glob("*.json"))) == 1
