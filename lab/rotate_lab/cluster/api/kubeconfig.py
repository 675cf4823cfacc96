"""The lab's kubeconfig: cluster ``lab``, users ``lab-admin`` / ``lab-restricted``, contexts
``lab`` (current, admin) and ``lab-restricted``.

Tokens are written here and nowhere else (file mode 0600): they are lab credentials, but the
habit of keeping bearer tokens out of argv and logs holds in the lab too.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

CLUSTER = "lab"
ADMIN_USER = "lab-admin"
RESTRICTED_USER = "lab-restricted"
ADMIN_CONTEXT = "lab"
RESTRICTED_CONTEXT = "lab-restricted"


def render(server: str, ca_pem: bytes, admin_token: str, restricted_token: str,
           namespace: str = "default") -> str:
    """The kubeconfig as text (JSON, which every kubeconfig reader accepts as YAML)."""
    ca = base64.b64encode(ca_pem).decode()
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER, "cluster": {"server": server,
                                                   "certificate-authority-data": ca}}],
        "users": [{"name": ADMIN_USER, "user": {"token": admin_token}},
                  {"name": RESTRICTED_USER, "user": {"token": restricted_token}}],
        "contexts": [
            {"name": ADMIN_CONTEXT, "context": {"cluster": CLUSTER, "user": ADMIN_USER,
                                                "namespace": namespace}},
            {"name": RESTRICTED_CONTEXT, "context": {"cluster": CLUSTER,
                                                     "user": RESTRICTED_USER,
                                                     "namespace": namespace}},
        ],
        "current-context": ADMIN_CONTEXT,
        "preferences": {},
    }
    return json.dumps(doc, indent=2) + "\n"


def write(path: Path, server: str, ca_pem: bytes, admin_token: str,
          restricted_token: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(render(server, ca_pem, admin_token, restricted_token))
    os.replace(tmp, path)
    return path
