"""``rotate init``'s engine side: the real sources it reads and the files it writes.

Invariants: nothing is written unless every file it would write is absent or ``force`` is
given (so a refusal leaves the directory as it was); the chain file is written last, each
file through a temporary file renamed into place (a reader never sees half a file).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rotate.chain.model import Chain
from rotate.chain.sections import (
    AuthConfig,
    BackendConfig,
    ClusterConfig,
    ConfigCenterConfig,
    Defaults,
)
from rotate.clients.seams import ConfigCenter, Kube
from rotate.core.errors import UsageError
from rotate.engine.drafting.draft import (
    DEFAULT_NAMES,
    LOCK_NAMESPACE,
    ConfigCenterNames,
    Drafted,
    draft_chain,
)
from rotate.engine.wiring import SERVICEACCOUNT_DIR_ENV, RealAdapters


def real_sources(environ: Mapping[str, str], *, context: str | None, kubeconfig: str | None,
                 names: ConfigCenterNames) -> tuple[Kube, ConfigCenter | None]:
    """The cluster of the kubeconfig (as kubectl), and the Config Center when its URL
    variable is set (UsageError when its token is then missing, as for every command)."""
    from rotate.clients.kube import KubeClient

    kube = KubeClient(kubeconfig=kubeconfig or environ.get("KUBECONFIG") or None,
                      context=context,
                      serviceaccount_dir=environ.get(SERVICEACCOUNT_DIR_ENV) or None)
    if not environ.get(names.url_env):
        return kube, None
    bootstrap = Chain(
        file=Path("rotate.yaml").resolve(),
        backend=BackendConfig("secret", AuthConfig("token")),
        cluster=ClusterConfig(LOCK_NAMESPACE),
        config_center=ConfigCenterConfig(token_env=names.token_env, url_env=names.url_env),
        defaults=Defaults(), credentials={}, services={})
    return kube, RealAdapters().config_center(bootstrap, environ)


@dataclass(frozen=True)
class InitResult:
    text: str  # the chain file
    draft: Drafted
    written: tuple[Path, ...]  # every file written, the chain file last ((): stdout)


def init_chain(kube: Kube, config_center: ConfigCenter | None, target: Path | None, *,
               force: bool = False, names: ConfigCenterNames = DEFAULT_NAMES
               ) -> InitResult:
    """Draft the chain file and write it to ``target`` with the services' schemas beside it
    (``schemas/NAME.schema.json``); ``target`` None: write nothing (the caller prints the
    text).  UsageError when a file exists and ``force`` is not given."""
    from rotate.engine.drafting.render import render

    draft = draft_chain(kube, config_center, names)
    text = render(draft, config_center is not None)
    if target is None:
        return InitResult(text, draft, ())
    files = [(target.parent / rel, json.dumps(schema, indent=2) + "\n")
             for rel, schema in draft.schemas.items()]
    files.append((target, text))
    existing = [path for path, _ in files if path.exists() or path.is_symlink()]
    if existing and not force:
        named = [str(p) for p in existing[-1:] if p == target]
        schemas = len(existing) - len(named)
        if schemas:
            named.append(f"{schemas} schema file(s) in {target.parent / 'schemas'}")
        raise UsageError(f"refusing to overwrite {' and '.join(named)}: pass --force to "
                         "replace them, or --chain to write elsewhere")
    for path, content in files:
        _write(path, content)
    return InitResult(text, draft, tuple(path for path, _ in files))


def _write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".rotate-init-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
