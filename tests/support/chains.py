"""A minimal chain file (one credential, one consumer) and a writer for chain text, for the
chain loader and cache tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

MINIMAL = """\
apiVersion: rotate/v1
kind: Chain
backend:
  kvMount: secret
  auth: {method: token}
cluster: {lockNamespace: rotate-system}
configCenter: {urlEnv: CONFIG_CENTER_URL, tokenEnv: CONFIG_CENTER_TOKEN}
credentials:
  dragonfly:
    backend: {path: infra/dragonfly, key: password}
    generate: {length: 40, alphabet: alnum}
    externalSecret: {namespace: dragonfly, name: dragonfly-password}
    secret: {namespace: dragonfly, name: dragonfly-password-secret, key: password}
    providers:
      - {kind: Deployment, namespace: dragonfly, name: dragonfly}
services:
  cart:
    namespace: shop
    workload: {kind: Deployment, name: cart}
    schema: cart.schema.json
    values:
      /dragonfly/password:
        secretKey: {namespace: dragonfly, name: dragonfly-password-secret, key: password}
      /dragonfly/url: {template: "redis://:{/dragonfly/password}@host:6379/0"}
    token: {secret: {name: cart-config-token, key: token}}
    readyz: {service: cart, port: http}
"""


def write_chain(tmp_path: Path, text: str) -> Path:
    (tmp_path / "cart.schema.json").write_text('{"type": "object"}')
    path = tmp_path / "rotate.yaml"
    path.write_text(textwrap.dedent(text))
    return path
