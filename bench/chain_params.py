"""What the runbook needs to know about one credential, read from the chain file.

Invariants:

- Read-only: the chain file (``ROTATE_CHAIN`` of the lab's env) is parsed, never written.
- The document change is one jq filter for every consumer (``$pw`` = the new value): a
  ``secretKey`` value of the credential's Secret becomes ``$pw``; a ``template`` value that
  names such a pointer is re-rendered from the document. Consumers whose documents would
  need different filters are refused: a runbook has one procedure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.world import BenchError


@dataclass(frozen=True)
class ChainParams:
    credential: str
    strategy: str  # what --strategy names; "" = the chain's default, chosen by rotate itself
    kv_mount: str
    kv_path: str
    kv_key: str
    kv_verb: str
    externalsecret: str  # ns/name
    secret: str  # ns/name
    secret_key: str
    provider: str  # ns/name of a Deployment
    consumers: tuple[str, ...]  # ns/name
    doc_key: str
    doc_filter: str
    max_parallel: int

    def strategy_args(self) -> list[str]:
        return ["--strategy", self.strategy] if self.strategy else []

    def strategy_label(self) -> str:
        return self.strategy or "the chain's default"

    def runbook_env(self) -> dict[str, str]:
        return {"RUNBOOK_KV_MOUNT": self.kv_mount, "RUNBOOK_KV_PATH": self.kv_path,
                "RUNBOOK_KV_KEY": self.kv_key, "RUNBOOK_KV_VERB": self.kv_verb,
                "RUNBOOK_EXTERNALSECRET": self.externalsecret, "RUNBOOK_SECRET": self.secret,
                "RUNBOOK_SECRET_KEY": self.secret_key, "RUNBOOK_PROVIDER": self.provider,
                "RUNBOOK_CONSUMERS": " ".join(self.consumers), "RUNBOOK_DOC_KEY": self.doc_key,
                "RUNBOOK_DOC_FILTER": self.doc_filter}


def jq_path(pointer: str) -> str:
    """``/dragonfly/password`` → ``.dragonfly.password`` (``.["a-b"]`` when needed)."""
    out = ""
    for raw in pointer.strip("/").split("/"):
        seg = raw.replace("~1", "/").replace("~0", "~")
        out += f".{seg}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", seg) else f'.["{seg}"]'
    return out or "."


def jq_template(template: str) -> str:
    """``redis://:{/a/b}@x`` → a jq string ``"redis://:\\(.a.b)@x"``."""
    parts = re.split(r"(\{/[^}]*\})", template)
    body = ""
    for part in parts:
        if part.startswith("{/") and part.endswith("}"):
            body += "\\(" + jq_path(part[1:-1]) + ")"
        else:
            body += part.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{body}"'


def doc_filter(values: dict[str, Any], secret_ns: str, secret_name: str, key: str) -> str:
    """The jq filter that moves one document to ``$pw`` (see the module invariant)."""
    direct = [p for p, v in values.items() if isinstance(v, dict) and
              (v.get("secretKey") or {}) == {"namespace": secret_ns, "name": secret_name,
                                              "key": key}]
    parts = [f"{jq_path(p)} = $pw" for p in direct]
    for p, v in values.items():
        tpl = v.get("template") if isinstance(v, dict) else None
        if isinstance(tpl, str) and any("{" + d + "}" in tpl for d in direct):
            parts.append(f"{jq_path(p)} = {jq_template(tpl)}")
    return " | ".join(parts)


def load(chain_file: Path, credential: str, strategy: str | None,
         max_parallel: int | None) -> ChainParams:
    from ruamel.yaml import YAML

    try:
        doc = YAML(typ="safe").load(chain_file.read_text())
    except (OSError, ValueError) as exc:
        raise BenchError(f"cannot read the chain file {chain_file}: {type(exc).__name__}") \
            from None
    creds = doc.get("credentials") or {}
    if credential not in creds:
        raise BenchError(f"--credential {credential}: not in {chain_file} "
                         f"(one of: {', '.join(creds)})")
    cred = creds[credential]
    providers = [p for p in cred.get("providers") or [] if p.get("kind") == "Deployment"]
    if len(providers) != 1:
        raise BenchError(f"the runbook restarts one provider Deployment; {credential} has "
                         f"{len(cred.get('providers') or [])} provider(s)")
    sec = cred["secret"]
    consumers: list[str] = []
    filters: set[str] = set()
    doc_keys: set[str] = set()
    for name, svc in (doc.get("services") or {}).items():
        f = doc_filter(svc.get("values") or {}, sec["namespace"], sec["name"], sec["key"])
        if not f:
            continue
        if (svc.get("token") or {}).get("secret", {}).get("name") != f"{name}-config-token":
            raise BenchError(f"the runbook expects the token Secret {name}-config-token")
        consumers.append(f"{svc['namespace']}/{name}")
        filters.add(f)
        doc_keys.add(str(svc.get("configKey", "bootstrap")))
    if len(filters) > 1 or len(doc_keys) > 1:
        raise BenchError(f"the consumers of {credential} need different document changes; "
                         "the runbook has one procedure for all of them")
    es = cred["externalSecret"]
    # No --strategy: the command is the plain `rotate CRED --confirm` and rotate picks the
    # strategy (the chain's, else overlap wherever every provider holds two values).
    return ChainParams(
        credential=credential, strategy=strategy or "",
        kv_mount=str((doc.get("backend") or {}).get("kvMount", "secret")),
        kv_path=str(cred["backend"]["path"]), kv_key=str(cred["backend"]["key"]),
        kv_verb="patch" if cred.get("overlap") else "put",
        externalsecret=f"{es['namespace']}/{es['name']}",
        secret=f"{sec['namespace']}/{sec['name']}", secret_key=str(sec["key"]),
        provider=f"{providers[0]['namespace']}/{providers[0]['name']}",
        consumers=tuple(consumers), doc_key=doc_keys.pop() if doc_keys else "bootstrap",
        doc_filter=filters.pop() if filters else ".",
        max_parallel=max_parallel or int((doc.get("defaults") or {}).get("maxParallel", 3)))
