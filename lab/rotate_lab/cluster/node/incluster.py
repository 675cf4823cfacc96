"""What makes a lab pod "in the cluster": its ServiceAccount token mount, the API server's
address, and the ``rotate`` image played by the installed ``rotate`` console script.

Pure functions over the pod spec and the store, used by :mod:`rotate_lab.cluster.node.pod_runtime`.

- **ServiceAccount token.**  Unless ``automountServiceAccountToken: false`` (pod or
  ServiceAccount), the kubelet writes ``token``, ``ca.crt`` and ``namespace`` into
  ``<pod dir>/serviceaccount/`` at each container start — the files a real kubelet projects
  at :data:`SERVICEACCOUNT_PATH`.  The token is a bound service-account JWT signed by the
  API server's own issuer (audience: the issuer, one hour), so a TokenReview — the lab's or
  one OpenBao's kubernetes auth sends — authenticates it as
  ``system:serviceaccount:NS:NAME`` and RBAC objects decide what it may do.  A missing
  ServiceAccount keeps the container waiting (``CreateContainerConfigError``), as the
  ServiceAccount admission would refuse the pod upstream.
- **Where the API server is.**  ``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT`` (and
  ``_HTTPS``) are the lab API server's loopback address, for every container.
- **Paths.**  Pods here are processes without a mount namespace, so a container path exists
  only as its host directory.  For the ``rotate`` image, every argument and environment
  value that names a mount path (``/etc/rotate/rotate.yaml``, ``ROTATE_STATE_DIR=/var/...``,
  ``--report-file=/var/...``) is translated to the host directory of that mount — the
  postgres image's rule too.  The one path the program knows by itself, the kubelet's fixed
  ServiceAccount directory, is passed as ``ROTATE_SERVICEACCOUNT_DIR`` (the product honours
  it for its in-cluster Kubernetes config and for OpenBao's kubernetes auth); no patching of
  the product, no root, no namespaces.
- **The image.**  Any image whose repository's last segment is ``rotate``
  (``rotate:latest``, ``ghcr.io/acme/rotate:1.2``, ``…/rotate@sha256:…``) runs the
  ``rotate`` console script next to the lab's interpreter: the image's entrypoint is
  ``rotate``, so ``command`` is empty or starts with ``rotate`` and ``args`` follow.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Protocol

from rotate_lab.cluster.context import ApiEndpoint
from rotate_lab.cluster.node.containers import ConfigError, Launch, UnknownImage, expand

Obj = dict[str, Any]

#: where a real kubelet mounts the ServiceAccount's token, CA and namespace
SERVICEACCOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
#: the product's override of that fixed path (rotate/engine/wiring.py)
SERVICEACCOUNT_DIR_ENV = "ROTATE_SERVICEACCOUNT_DIR"
TOKEN_SECONDS = 3607  # what a real kubelet asks for: one hour (+7 s, the "warn after")


class Issuer(Protocol):
    def claims_for(self, namespace: str, name: str, uid: str, audiences: list[str],
                   expiration_seconds: int, now: int | None = None) -> dict[str, Any]: ...

    def sign(self, claims: dict[str, Any]) -> str: ...


class ObjectReader(Protocol):
    def get(self, kind: str, namespace: str | None, name: str) -> Obj: ...


def is_rotate_image(image: str) -> bool:
    repo = image.split("@", 1)[0]
    last = repo.rsplit("/", 1)[-1]
    return last.split(":", 1)[0] == "rotate"


def automounts(pod: Obj, store: ObjectReader) -> bool:
    spec = pod.get("spec") or {}
    if "automountServiceAccountToken" in spec:
        return bool(spec["automountServiceAccountToken"])
    sa = _service_account(pod, store)
    return sa is None or sa.get("automountServiceAccountToken") is not False


def _service_account(pod: Obj, store: ObjectReader) -> Obj | None:
    ns = str(pod["metadata"].get("namespace") or "default")
    name = str((pod.get("spec") or {}).get("serviceAccountName") or "default")
    try:
        return store.get("ServiceAccount", ns, name)
    except Exception as exc:
        if getattr(exc, "code", None) == 404:
            return None
        raise


def mount_service_account(pod: Obj, store: ObjectReader, issuer: Issuer, api: ApiEndpoint,
                          pod_dir: Path) -> Path:
    """Write the pod's token, CA and namespace under ``pod_dir/serviceaccount``; that dir.

    The ``default`` ServiceAccount needs no object (every namespace has one upstream); any
    other must exist, and the token carries its uid so that deleting it revokes the token."""
    ns = str(pod["metadata"].get("namespace") or "default")
    name = str((pod.get("spec") or {}).get("serviceAccountName") or "default")
    sa = _service_account(pod, store)
    if sa is None and name != "default":
        raise ConfigError(f'error looking up service account {ns}/{name}: '
                          f'serviceaccount "{name}" not found')
    uid = str(((sa or {}).get("metadata") or {}).get("uid") or "")
    token = issuer.sign(issuer.claims_for(ns, name, uid, [], TOKEN_SECONDS))
    target = pod_dir / "serviceaccount"
    target.mkdir(parents=True, exist_ok=True)
    for file, data, mode in (("token", token.encode(), 0o600), ("ca.crt", api.ca_pem, 0o644),
                             ("namespace", ns.encode(), 0o644)):
        tmp = target / f".{file}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target / file)
    return target


def translate(value: str, mounts: dict[str, Path]) -> str:
    """``value`` with a leading container mount path replaced by its host directory; also
    inside ``--flag=/path``.  The longest mount path wins (``/a/b`` before ``/a``)."""
    flag, eq, rest = value.partition("=")
    if eq and flag.startswith("-"):
        return f"{flag}={translate(rest, mounts)}"
    for mount in sorted(mounts, key=len, reverse=True):
        base = mount.rstrip("/")
        if value == base or value.startswith(base + "/"):
            return str(mounts[mount]) + value[len(base):]
    return value


def link_nested_mounts(mounts: dict[str, Path]) -> None:
    """A mount inside another (``/etc/rotate/schemas`` in ``/etc/rotate``) becomes a symlink
    in the outer one's host directory, so paths relative to a file of the outer mount (the
    chain file's ``schemas/…``) reach it — what the mount itself does in a container."""
    for inner in sorted(mounts, key=len):
        for outer in mounts:
            base = outer.rstrip("/")
            if inner != outer and inner.startswith(base + "/"):
                link = mounts[outer] / inner[len(base) + 1:]
                if not link.is_symlink() and not link.exists():
                    link.parent.mkdir(parents=True, exist_ok=True)
                    link.symlink_to(mounts[inner], target_is_directory=True)


def rotate_launch(container: Obj, env: dict[str, str], *, base_env: dict[str, str],
                  mounts: dict[str, Path], sa_dir: Path | None) -> Launch:
    """The ``rotate`` console script of this interpreter, with paths translated."""
    command = [expand(str(c), env) for c in container.get("command") or []]
    args = [expand(str(a), env) for a in container.get("args") or []]
    if command and Path(command[0]).name != "rotate":
        raise UnknownImage(f'lab: the rotate image runs only "rotate" (command {command[0]!r})')
    for host in mounts.values():  # a claim's or emptyDir's directory, as a kubelet makes it
        host.mkdir(parents=True, exist_ok=True)
    link_nested_mounts(mounts)
    script = Path(sys.executable).parent / "rotate"
    argv = [str(script), *(translate(a, mounts) for a in command[1:] + args)]
    full_env = {**base_env, **{k: translate(v, mounts) for k, v in env.items()}}
    if sa_dir is not None:
        full_env[SERVICEACCOUNT_DIR_ENV] = str(sa_dir)
    return Launch(argv, full_env, None, "rotate")
