"""Builds the real adapters from the environment, the chain file and the CLI options.

Lazy by design: importing this module imports none of hvac, kubernetes or httpx — each
adapter module is imported inside its builder, so ``rotate --help`` and ``rotate list``
stay cheap and a broken optional dependency only hurts the command that needs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rotate.chain.model import Chain
from rotate.clients.seams import ConfigCenter, Kube, Readyz, Vault
from rotate.core.errors import UsageError
from rotate.core.secret import Secret
from rotate.engine.preflight import Adapters

if TYPE_CHECKING:
    from rotate.engine.api import Options


def build_vault(chain: Chain, environ: Mapping[str, str]) -> Vault:
    from rotate.clients.vault import vault_from_env

    return vault_from_env(chain.backend, environ)


def build_kube(chain: Chain, options: Options, environ: Mapping[str, str]) -> Kube:
    from rotate.clients.kube import KubeClient

    context = options.context or chain.cluster.context
    kubeconfig = options.kubeconfig or environ.get("KUBECONFIG") or None
    return KubeClient(kubeconfig=kubeconfig, context=context)


def build_config_center(chain: Chain, environ: Mapping[str, str]) -> ConfigCenter:
    from rotate.clients.configcenter import HttpConfigCenter

    cfg = chain.config_center
    url = cfg.resolve_url(environ)
    if not url:
        raise UsageError(f"no Config Center URL: set {cfg.url_env} (or configCenter.url)")
    token = environ.get(cfg.token_env)
    if not token:
        raise UsageError(f"no Config Center admin token: set {cfg.token_env}")
    return HttpConfigCenter(url, Secret(token))


def build_readyz(kube: Kube) -> Readyz:
    from rotate.clients.readyz import ReadyzRouter

    return ReadyzRouter(kube)


def build(chain: Chain, options: Options, environ: Mapping[str, str]) -> Adapters:
    kube = build_kube(chain, options, environ)
    return Adapters(
        vault=build_vault(chain, environ),
        kube=kube,
        config_center=build_config_center(chain, environ),
        readyz=build_readyz(kube),
    )
