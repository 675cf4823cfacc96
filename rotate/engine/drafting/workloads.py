"""What the workloads of a cluster read, for ``rotate init`` (rotate.engine.drafting): which
Secret keys each Deployment, StatefulSet and DaemonSet reads, and how a provider most likely
takes its password.  Reads only object specs (never a Secret's data)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")


@dataclass(frozen=True)
class Workload:
    kind: str
    namespace: str
    name: str
    obj: Mapping[str, Any] = field(compare=False, hash=False, repr=False)

    @property
    def ref(self) -> dict[str, str]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name}

    @property
    def pod(self) -> Mapping[str, Any]:
        return ((self.obj.get("spec") or {}).get("template") or {}).get("spec") or {}

    @property
    def labels(self) -> Mapping[str, str]:
        template = (self.obj.get("spec") or {}).get("template") or {}
        return (template.get("metadata") or {}).get("labels") or {}

    def containers(self) -> Iterator[Mapping[str, Any]]:
        yield from self.pod.get("initContainers") or []
        yield from self.pod.get("containers") or []

    def __str__(self) -> str:
        return f"{self.kind.lower()}/{self.namespace}/{self.name}"


@dataclass(frozen=True)
class SecretRead:
    """``workload`` reads ``key`` of Secret ``secret`` in its namespace (``key`` None: every
    key — envFrom, a secret volume); ``env``: the variable it lands in, when it is one."""

    workload: Workload
    secret: str
    key: str | None
    env: str | None = None

    def covers(self, key: str) -> bool:
        return self.key is None or self.key == key


def workload_of(kind: str, obj: Mapping[str, Any]) -> Workload:
    meta = obj.get("metadata") or {}
    return Workload(kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""), obj)


def secret_reads(workload: Workload) -> list[SecretRead]:
    """Every Secret read of the pod template: env ``valueFrom.secretKeyRef``,
    ``envFrom.secretRef``, ``secret`` volumes and ``projected`` volumes' secret sources."""
    reads: list[SecretRead] = []
    for container in workload.containers():
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef") or {}
            if ref.get("name") and ref.get("key"):
                reads.append(SecretRead(workload, ref["name"], ref["key"], env.get("name")))
        for source in container.get("envFrom") or []:
            ref = source.get("secretRef") or {}
            if ref.get("name"):
                reads.append(SecretRead(workload, ref["name"], None))
    for volume in workload.pod.get("volumes") or []:
        secret = volume.get("secret") or {}
        if secret.get("secretName"):
            reads.extend(_items(workload, secret["secretName"], secret.get("items")))
        for source in (volume.get("projected") or {}).get("sources") or []:
            projected = source.get("secret") or {}
            if projected.get("name"):
                reads.extend(_items(workload, projected["name"], projected.get("items")))
    return reads


def _items(workload: Workload, secret: str, items: Any) -> list[SecretRead]:
    if not items:
        return [SecretRead(workload, secret, None)]
    return [SecretRead(workload, secret, item["key"]) for item in items if item.get("key")]


_REDIS_IMAGE = re.compile(r"dragonfly|redis|valkey|keydb", re.IGNORECASE)
_POSTGRES_IMAGE = re.compile(r"postgres", re.IGNORECASE)


def apply_guess(read: SecretRead) -> tuple[dict[str, Any], str]:
    """The provider entry's apply fields for ``read`` and why (the ``# guess:`` text).

    A Redis-protocol server whose password reaches ``--requirepass $(VAR)`` or an ACL line
    ``NAME on … >$(VAR)`` is changed live (``redis-acl``, user ``default`` or NAME); a
    PostgreSQL server reads its password only at initdb, which no draft can repair without
    the role's name, so it is left at ``rollout`` with the reason; everything else reads the
    Secret when it starts (``rollout``)."""
    containers = list(read.workload.containers())
    image = " ".join(str(c.get("image") or "") for c in containers)
    if read.env and _REDIS_IMAGE.search(image):
        marker = f"$({read.env})"
        for container in containers:
            words = [str(w) for w in [*(container.get("command") or []),
                                      *(container.get("args") or [])]]
            for i, word in enumerate(words):
                if marker not in word:
                    continue
                before = words[i - 1] if i else ""
                if before == "--requirepass" or re.search(r"requirepass\s+\S*$", word[:word.find(
                        marker)]):
                    return ({"apply": "redis-acl", "user": "default"},
                            f"{read.env} reaches --requirepass: the ACL user `default`, "
                            "changed live over a connection that authenticates with the "
                            "current value")
                acl = re.match(r"^\s*(\S+)\s+on\b", word)
                if acl:
                    return ({"apply": "redis-acl", "user": acl.group(1)},
                            f"{read.env} is a password of the ACL user `{acl.group(1)}`, "
                            "changed live")
        return {}, ("a Redis-protocol server that reads the Secret when it starts (apply: "
                    "rollout); if it holds the password as an ACL user, use apply: redis-acl")
    if _POSTGRES_IMAGE.search(image):
        return {}, ("PostgreSQL reads its password only at initdb, so a rollout changes "
                    "nothing: set apply: postgres with the role (user, or users for "
                    "overlap) and admin (docs/chain-file.md \"Provider apply methods\")")
    return {}, "apply: rollout (the default): the workload reads the Secret when it starts"
