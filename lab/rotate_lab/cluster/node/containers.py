"""How a container spec becomes a local process: environment, ``$(VAR)``, volumes.

Pure functions over the pod spec and the store, used by the kubelet's pod runtime.

- Environment is resolved the way the kubelet does it, at container start: ``envFrom`` first,
  then ``env`` in order (later entries win), each ``value`` expanded against the variables
  defined before it; ``valueFrom`` reads ``secretKeyRef``, ``configMapKeyRef`` and
  ``fieldRef`` (``metadata.name|namespace|uid|labels['k']|annotations['k']``,
  ``status.podIP``, ``status.hostIP``, ``spec.nodeName``, ``spec.serviceAccountName``).
  A missing non-optional Secret/ConfigMap or key is a :class:`ConfigError` with upstream's
  wording — the container then waits with reason ``CreateContainerConfigError``.
- ``$(VAR)`` in command/args expands to VAR when it is defined and stays literal otherwise;
  ``$$`` is a literal ``$`` (so ``$$(VAR)`` gives ``$(VAR)``) — Kubernetes' rules.
- Images map to programs in :mod:`rotate_lab.cluster.node.images`; the redis configuration
  a Dragonfly image's flags (``--flag=value`` or ``--flag value``) become is built here
  (:func:`redis_config`).
- ``--user "NAME on >pw1 >pw2 ~* &* +@all"`` (repeatable) becomes a redis ACL ``user`` line,
  each rule its own (quoted) argument: how the lab plays a Dragonfly ACL user with two
  passwords, the provider side of the overlap strategy.  (Real Dragonfly reads ACL users from
  ``--aclfile``; the flag keeps the lab's manifests to one container spec.)
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

Obj = dict[str, Any]


#: redis.conf directives a container flag may set; every other flag is ignored (Dragonfly's
#: own flags such as --logtostderr or --proactor_threads have no redis equivalent).
REDIS_DIRECTIVES = {
    "requirepass", "port", "maxmemory", "maxmemory-policy", "databases", "timeout",
    "tcp-keepalive", "maxclients", "loglevel", "masterauth",
}
_REDIS_ALIASES = {"dbnum": "databases"}


class ConfigError(Exception):
    """A container's environment cannot be built yet (missing Secret, key, ConfigMap)."""


class UnknownImage(Exception):
    """No local program plays this image."""


class ObjectReader(Protocol):
    def get(self, kind: str, namespace: str | None, name: str) -> Obj: ...


@dataclass(frozen=True)
class Launch:
    """What to exec: argv (never a secret), env, and bytes for stdin (redis config)."""

    argv: list[str]
    env: dict[str, str]
    stdin: bytes | None = None
    program: str = ""
    notes: list[str] = field(default_factory=list)


def expand(text: str, env: dict[str, str]) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "$" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            end = text.find(")", i + 2)
            if end < 0:  # unterminated reference: literal, as upstream
                out.append(text[i:])
                break
            name = text[i + 2:end]
            out.append(env[name] if name in env else text[i:end + 1])
            i = end + 1
        else:
            out.append("$")
            i += 1
    return "".join(out)


def _get(store: ObjectReader, kind: str, ns: str, name: str) -> Obj | None:
    try:
        return store.get(kind, ns, name)
    except Exception as exc:
        if getattr(exc, "code", None) == 404:
            return None
        raise


def _data(obj: Obj, kind: str) -> dict[str, str]:
    if kind == "Secret":
        return {k: base64.b64decode(str(v)).decode("utf-8", errors="replace")
                for k, v in (obj.get("data") or {}).items()}
    return {str(k): str(v) for k, v in (obj.get("data") or {}).items()}


def _key_ref(store: ObjectReader, ns: str, ref: Obj, kind: str) -> str | None:
    name, key = str(ref.get("name") or ""), str(ref.get("key") or "")
    obj = _get(store, kind, ns, name)
    label = "secret" if kind == "Secret" else "configmap"
    if obj is None:
        if ref.get("optional"):
            return None
        raise ConfigError(f'{label} "{name}" not found')
    data = _data(obj, kind)
    if key not in data:
        if ref.get("optional"):
            return None
        raise ConfigError(f"couldn't find key {key} in {kind} {ns}/{name}")
    return data[key]


_LABEL_REF = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


def field_ref(pod: Obj, path: str) -> str:
    md, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    simple = {
        "metadata.name": md.get("name"), "metadata.namespace": md.get("namespace"),
        "metadata.uid": md.get("uid"), "status.podIP": status.get("podIP"),
        "status.hostIP": status.get("hostIP"), "spec.nodeName": spec.get("nodeName", "lab"),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
    }
    if path in simple:
        return str(simple[path] or "")
    m = _LABEL_REF.match(path)
    if m:
        return str((md.get(m.group(1)) or {}).get(m.group(2), ""))
    raise ConfigError(f"unsupported fieldRef {path!r}")


def container_env(store: ObjectReader, pod: Obj, container: Obj) -> dict[str, str]:
    """The container's own variables (no process basics), resolved now."""
    ns = str(pod["metadata"].get("namespace") or "default")
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        for kind, ref in (("Secret", source.get("secretRef")),
                          ("ConfigMap", source.get("configMapRef"))):
            if not isinstance(ref, dict):
                continue
            obj = _get(store, kind, ns, str(ref.get("name") or ""))
            if obj is None:
                if ref.get("optional"):
                    continue
                raise ConfigError(f'{"secret" if kind == "Secret" else "configmap"} '
                                  f'"{ref.get("name")}" not found')
            env.update({prefix + k: v for k, v in _data(obj, kind).items()})
    for var in container.get("env") or []:
        name = str(var.get("name") or "")
        if "value" in var or "valueFrom" not in var:
            env[name] = expand(str(var.get("value") or ""), env)
            continue
        vf = var.get("valueFrom") or {}
        value: str | None
        if "secretKeyRef" in vf:
            value = _key_ref(store, ns, vf["secretKeyRef"], "Secret")
        elif "configMapKeyRef" in vf:
            value = _key_ref(store, ns, vf["configMapKeyRef"], "ConfigMap")
        elif "fieldRef" in vf:
            value = field_ref(pod, str(vf["fieldRef"].get("fieldPath") or ""))
        else:
            raise ConfigError(f"unsupported valueFrom for env {name}")
        if value is not None:
            env[name] = value
    return env


def _redis_quote(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable() and ord(ch) < 128:
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode())
    out.append('"')
    return "".join(out)


def redis_config(flags: list[str], *, bind: str, default_port: int, workdir: Path
                 ) -> tuple[str, list[str]]:
    """(redis.conf text, names of ignored flags) for Dragonfly/redis-style flags."""
    settings: dict[str, str] = {"port": str(default_port)}
    users: list[str] = []
    ignored: list[str] = []
    i = 0
    while i < len(flags):
        flag = flags[i]
        i += 1
        if not flag.startswith("--"):
            ignored.append("<positional>")
            continue
        name, eq, value = flag[2:].partition("=")
        if not eq:
            if i < len(flags) and not flags[i].startswith("--"):
                value = flags[i]
                i += 1
            else:
                value = "yes"
        name = name.replace("_", "-")
        name = _REDIS_ALIASES.get(name, name)
        if name == "user":
            users.append(" ".join(_redis_quote(rule) for rule in value.split()))
        elif name in REDIS_DIRECTIVES:
            settings[name] = value
        else:
            ignored.append(name)
    lines = [f"bind {bind}", "protected-mode no", 'save ""', "appendonly no",
             "daemonize no", f"dir {_redis_quote(str(workdir))}"]
    lines += [f"{k} {_redis_quote(v)}" for k, v in settings.items()]
    lines += [f"user {rules}" for rules in users if rules]
    return "\n".join(lines) + "\n", ignored


def first_port(container: Obj) -> int | None:
    for p in container.get("ports") or []:
        if isinstance(p, dict) and "containerPort" in p:
            return int(p["containerPort"])
    return None


def volume_mounts(pod: Obj, container: Obj, pod_dir: Path, lab_dir: Path) -> dict[str, Path]:
    """{mountPath: host directory} of the container's volumeMounts: secret/configMap volumes
    are the kubelet's files (``pod_dir/volumes/<vol>``), ``emptyDir`` lives and dies with the
    pod directory, and a ``persistentVolumeClaim`` is ``lab_dir/pvc/<ns>/<claimName>`` — it
    outlives the pod, so a StatefulSet pod recreated under its name finds its data again."""
    ns = str((pod.get("metadata") or {}).get("namespace") or "default")
    volumes = {str(v.get("name")): v for v in (pod.get("spec") or {}).get("volumes") or []}
    out: dict[str, Path] = {}
    for m in container.get("volumeMounts") or []:
        vol = volumes.get(str(m.get("name")))
        if vol is None or not m.get("mountPath"):
            continue
        if "persistentVolumeClaim" in vol:
            host = lab_dir / "pvc" / ns / str(vol["persistentVolumeClaim"].get("claimName"))
        elif "emptyDir" in vol:
            host = pod_dir / "emptydir" / str(vol["name"])
        else:
            host = pod_dir / "volumes" / str(vol["name"])
        if m.get("subPath"):
            host = host / str(m["subPath"])
        out[str(m["mountPath"])] = host
    return out


def host_path(container_path: str, mounts: dict[str, Path]) -> Path | None:
    """The host path of ``container_path`` through the container's volume mounts."""
    for mount_path, host in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
        mount_path = mount_path.rstrip("/") or "/"
        if container_path == mount_path or container_path.startswith(mount_path + "/"):
            return host / container_path[len(mount_path):].lstrip("/")
    return None
