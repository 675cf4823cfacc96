"""The real adapters and the real chain loader, as the CLI hands them to the Engine.

Lazy by design: importing this module imports none of hvac, kubernetes, httpx or jsonschema
— each is imported inside the builder that needs it, so ``rotate --help`` and ``rotate list``
stay cheap and a broken optional dependency only hurts the command that needs it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rotate.chain.model import Chain
from rotate.core.errors import UsageError
from rotate.core.secret import Secret
from rotate.core.urls import plain_remote_host
from rotate.engine.model import Options

if TYPE_CHECKING:  # annotations only (start-up: the seams are Protocols, slow to build)
    from rotate.clients.provider_seams import ProviderConnector
    from rotate.clients.seams import ConfigCenter, Kube, Metrics, Readyz, Vault

#: moves the in-cluster ServiceAccount directory (token, ca.crt) from the kubelet's fixed path
SERVICEACCOUNT_DIR_ENV = "ROTATE_SERVICEACCOUNT_DIR"


def _stderr_warning(text: str) -> None:
    sys.stderr.write(f"warning: {text}\n")


class RealAdapters:
    """The :class:`~rotate.engine.model.AdapterFactory` of production: the environment and
    the chain file say where each system is and how to authenticate.

    ``warn`` receives what is allowed but unsafe (verification off, a token over plain
    http:// to a remote host); each warning is given once per factory."""

    def __init__(self, warn: Callable[[str], None] = _stderr_warning) -> None:
        self._warn = warn
        self._warned: set[str] = set()

    def _warn_once(self, text: str) -> None:
        if text not in self._warned:
            self._warned.add(text)
            self._warn(text)

    def vault(self, chain: Chain, environ: Mapping[str, str]) -> Vault:
        from rotate.clients.vault import vault_from_env

        return vault_from_env(chain.backend, environ, warn=self._warn_once,
                              serviceaccount_dir=environ.get(SERVICEACCOUNT_DIR_ENV) or None)

    def kube(self, chain: Chain, options: Options, environ: Mapping[str, str]) -> Kube:
        from rotate.clients.kube import KubeClient

        context = options.context or chain.cluster.context
        kubeconfig = options.kubeconfig or environ.get("KUBECONFIG") or None
        return KubeClient(kubeconfig=kubeconfig, context=context,
                          serviceaccount_dir=environ.get(SERVICEACCOUNT_DIR_ENV) or None)

    def config_center(self, chain: Chain, environ: Mapping[str, str]) -> ConfigCenter:
        """URL from the chain file (or its ``urlEnv``); admin token from ``tokenEnv``, else
        from the file named by ``<tokenEnv>_FILE`` (a mounted Secret); CA from
        CONFIG_CENTER_CACERT.  UsageError listing everything missing at once."""
        from rotate.clients.configcenter import CA_ENV, HttpConfigCenter

        cfg = chain.config_center
        if cfg is None:  # no service reads a Config Center: nothing to reach, nothing demanded
            from rotate.clients.configcenter_absent import AbsentConfigCenter

            return AbsentConfigCenter()
        problems: list[str] = []
        url = cfg.resolve_url(environ)
        if not url:
            problems.append(f"no Config Center URL: set {cfg.url_env} (or configCenter.url)")
        token = _token(environ, cfg.token_env, problems)
        if problems or not url or token is None:
            raise UsageError("; ".join(problems))
        plain = plain_remote_host(url)
        if plain:
            self._warn_once(f"the Config Center admin token goes over plain http:// to "
                            f"{plain}, which is not loopback: use https://")
        return HttpConfigCenter(url, token, ca_file=environ.get(CA_ENV) or None)

    def readyz(self, kube: Kube) -> Readyz:
        from rotate.clients.readyz import ReadyzRouter

        return ReadyzRouter(kube)

    def metrics(self) -> Metrics:
        from rotate.clients.prometheus import PrometheusQuery

        return PrometheusQuery()

    def providers(self) -> ProviderConnector:
        from rotate.clients.provider_connect import Connector

        return Connector()


def load_chain(path: Path) -> Chain:
    """``rotate.chain.loader.load_chain`` through the validated-chain cache in the user's
    XDG cache directory (rotate.chain.cache), imported when first called."""
    from rotate.chain.cache import default_cache_dir, load_chain_cached

    return load_chain_cached(path, default_cache_dir(os.environ))


def _token(environ: Mapping[str, str], name: str, problems: list[str]) -> Secret | None:
    """``$NAME``, else the content of the file ``$NAME_FILE`` (trailing newline dropped)."""
    value = environ.get(name)
    if value:
        return Secret(value)
    file_var = f"{name}_FILE"
    path = environ.get(file_var)
    if not path:
        problems.append(f"no Config Center admin token: set {name} (or {file_var})")
        return None
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError:
        problems.append(f"cannot read the Config Center admin token file {path} ({file_var})")
        return None
    if not text:
        problems.append(f"the Config Center admin token file {path} ({file_var}) is empty")
        return None
    return Secret(text)
