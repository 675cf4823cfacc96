"""The real adapters and the real chain loader, as the CLI hands them to the Engine.

Lazy by design: importing this module imports none of hvac, kubernetes, httpx or jsonschema
— each is imported inside the builder that needs it, so ``rotate --help`` and ``rotate list``
stay cheap and a broken optional dependency only hurts the command that needs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rotate.chain.model import Chain
from rotate.clients.seams import ConfigCenter, Kube, ProviderConnector, Readyz, Vault
from rotate.core.errors import UsageError
from rotate.core.secret import Secret
from rotate.engine.model import Options


class RealAdapters:
    """The :class:`~rotate.engine.model.AdapterFactory` of production: the environment and
    the chain file say where each system is and how to authenticate."""

    def vault(self, chain: Chain, environ: Mapping[str, str]) -> Vault:
        from rotate.clients.vault import vault_from_env

        return vault_from_env(chain.backend, environ)

    def kube(self, chain: Chain, options: Options, environ: Mapping[str, str]) -> Kube:
        from rotate.clients.kube import KubeClient

        context = options.context or chain.cluster.context
        kubeconfig = options.kubeconfig or environ.get("KUBECONFIG") or None
        return KubeClient(kubeconfig=kubeconfig, context=context)

    def config_center(self, chain: Chain, environ: Mapping[str, str]) -> ConfigCenter:
        from rotate.clients.configcenter import HttpConfigCenter

        cfg = chain.config_center
        url = cfg.resolve_url(environ)
        if not url:
            raise UsageError(f"no Config Center URL: set {cfg.url_env} (or configCenter.url)")
        token = environ.get(cfg.token_env)
        if not token:
            raise UsageError(f"no Config Center admin token: set {cfg.token_env}")
        return HttpConfigCenter(url, Secret(token))

    def readyz(self, kube: Kube) -> Readyz:
        from rotate.clients.readyz import ReadyzRouter

        return ReadyzRouter(kube)

    def providers(self) -> ProviderConnector:
        from rotate.clients.provider_connect import Connector

        return Connector()


def load_chain(path: Path, *, schema_check: bool = True) -> Chain:
    """``rotate.chain.loader.load_chain``, imported when first called (jsonschema is slow)."""
    from rotate.chain.loader import load_chain as load

    return load(path, schema_check=schema_check)
