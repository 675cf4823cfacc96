"""Load the chain file: YAML with line numbers → JSON Schema → semantic checks → :class:`Chain`.

Every problem is collected before anything is raised, so an operator fixing a file sees all of
them at once (:mod:`rotate.chain.problems` finds and words them).  Only a file without
problems is turned into frozen values, so :class:`Chain` can rely on every checked invariant.

ruamel (and, in problems.py, jsonschema) are imported inside the functions: ``rotate --help``
must not pay for them.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import rotate
from rotate.chain.apply_fields import build_applies
from rotate.chain.model import (
    AuthConfig,
    BackendConfig,
    BackendRef,
    Chain,
    ClusterConfig,
    ConfigCenterConfig,
    Credential,
    Defaults,
    Generate,
    LiteralSource,
    OverlapConfig,
    ReadyzConfig,
    SecretKeyRef,
    SecretKeySource,
    Service,
    ServiceSource,
    TemplateSource,
    TokenTarget,
    ValueSource,
)
from rotate.chain.problems import schema_problems, semantic_problems
from rotate.core.durations import parse_duration
from rotate.core.errors import ChainFileError, ChainFileProblem
from rotate.core.refs import ObjectRef

SCHEMA_NAME = "chain.schema.json"


def schema_path() -> Path:
    """``schemas/chain.schema.json`` at the repository root (a checkout or an editable
    install: both have ``rotate/`` and ``schemas/`` side by side)."""
    return Path(rotate.__file__).resolve().parent.parent / "schemas" / SCHEMA_NAME


@functools.lru_cache(maxsize=1)
def chain_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(schema_path().read_text(encoding="utf-8"))
    return data


def load_chain(path: Path, *, schema_check: bool = True) -> Chain:
    """Parse, validate and build the chain file at ``path``; ChainFileError lists every problem.

    ``schema_check=False`` is for read-only listings (``rotate list``) that must stay cheap:
    jsonschema is then imported only when building the model fails, to explain why.  Every
    command that changes anything validates fully.
    """
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not readable UTF-8"
        problem = ChainFileProblem(file, None, "", f"cannot read the file: {why}")
        raise ChainFileError([problem]) from None
    root = _parse_yaml(text, file)
    data = _plain(root)
    if not isinstance(data, dict):
        raise ChainFileError([ChainFileProblem(file, 1, "", "the file must be a YAML mapping")])
    base = path.resolve().parent
    if not schema_check:
        try:
            return _build(data, path.resolve())
        except Exception:
            pass
    problems = _dedupe([*schema_problems(chain_schema(), data, root, file),
                        *semantic_problems(data, root, file, base)])
    if problems:
        problems.sort(key=lambda p: (p.line or 0, p.path))
        raise ChainFileError(problems)
    return _build(data, path.resolve())


# --------------------------------------------------------------------------- YAML


def _parse_yaml(text: str, file: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    yaml = YAML(typ="rt")
    try:
        return yaml.load(text)
    except DuplicateKeyError as exc:
        # ruamel's message quotes both values; name only the key.
        m = re.search(r'duplicate key "([^"]*)"', str(exc.problem or ""))
        key = m.group(1) if m else "?"
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise ChainFileError([ChainFileProblem(file, line, "", f"duplicate key {key!r}")]) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        reason = f"YAML syntax error: {(exc.problem or exc.context or 'invalid YAML')[:120]}"
        raise ChainFileError([ChainFileProblem(file, line, "", reason)]) from None
    except YAMLError:
        raise ChainFileError([ChainFileProblem(file, None, "", "YAML syntax error")]) from None


def _plain(node: Any) -> Any:
    """ruamel's round-trip types → plain JSON types (merge keys already applied by items())."""
    from datetime import date

    if isinstance(node, Mapping):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, bool):
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, date):
        return node.isoformat()  # unquoted timestamps: the schema will say "must be a string"
    return node


def _dedupe(problems: list[ChainFileProblem]) -> list[ChainFileProblem]:
    return list(dict.fromkeys(problems))


# --------------------------------------------------------------------------- build


def _source(raw: dict[str, Any]) -> ValueSource:
    if "literal" in raw:
        return LiteralSource(raw["literal"])
    if "secretKey" in raw:
        s = raw["secretKey"]
        return SecretKeySource(s["namespace"], s["name"], s["key"])
    if "service" in raw:
        s = raw["service"]
        return ServiceSource(s["namespace"], s["name"], s["port"], s["part"])
    return TemplateSource(raw["template"])


def _credential(name: str, raw: dict[str, Any]) -> Credential:
    gen = raw.get("generate")
    overlap = raw.get("overlap")
    es = raw["externalSecret"]
    sec = raw["secret"]
    return Credential(
        name=name,
        description=raw.get("description", ""),
        backend=BackendRef(raw["backend"]["path"], raw["backend"]["key"]),
        generate=Generate(gen.get("length", 40), gen.get("alphabet", "alnum"))
        if gen is not None else None,
        value_from=raw.get("valueFrom"),
        external_secret=ObjectRef("ExternalSecret", es["namespace"], es["name"]),
        secret=SecretKeyRef(sec["namespace"], sec["name"], sec["key"]),
        providers=tuple(ObjectRef(p["kind"], p["namespace"], p["name"]) for p in raw["providers"]),
        strategy=raw.get("strategy", "restart"),
        timeout=parse_duration(raw["timeout"]) if "timeout" in raw else None,
        overlap=OverlapConfig(overlap["previousKey"]) if overlap else None,
        applies=build_applies(raw["providers"]),
    )


def _service(name: str, raw: dict[str, Any], base: Path) -> Service:
    ns = raw["namespace"]
    tok = raw["token"]["secret"]
    rz = raw["readyz"]
    return Service(
        name=name,
        namespace=ns,
        workload=ObjectRef(raw["workload"]["kind"], ns, raw["workload"]["name"]),
        schema=(base / raw["schema"]).resolve(),
        config_key=raw.get("configKey", "bootstrap"),
        values={p: _source(s) for p, s in raw["values"].items()},
        token=TokenTarget(tok.get("namespace", ns), tok["name"], tok["key"]),
        readyz=ReadyzConfig(service=rz.get("service"), port=rz.get("port"),
                            path=rz.get("path", "/readyz"), url=rz.get("url")),
    )


def _build(data: dict[str, Any], file: Path) -> Chain:
    base = file.parent
    b = data["backend"]
    a = b["auth"]
    d = data.get("defaults", {})
    cc = data["configCenter"]
    auth_kwargs: dict[str, Any] = {}
    if "jwtPath" in a:
        auth_kwargs["jwt_path"] = a["jwtPath"]
    defaults = Defaults()
    return Chain(
        file=file,
        backend=BackendConfig(
            kv_mount=b["kvMount"],
            auth=AuthConfig(method=a["method"], role=a.get("role"), mount=a.get("mount"),
                            role_id_env=a.get("roleIdEnv"), secret_id_env=a.get("secretIdEnv"),
                            **auth_kwargs),
            address_env=b.get("addressEnv"),
        ),
        cluster=ClusterConfig(data["cluster"]["lockNamespace"], data["cluster"].get("context")),
        config_center=ConfigCenterConfig(token_env=cc["tokenEnv"], url=cc.get("url"),
                                         url_env=cc.get("urlEnv")),
        defaults=Defaults(
            timeout=parse_duration(d.get("timeout", defaults.timeout)),
            max_parallel=d.get("maxParallel", defaults.max_parallel),
            reloader_grace=parse_duration(d.get("reloaderGrace", defaults.reloader_grace)),
            lease_duration=parse_duration(d.get("leaseDuration", defaults.lease_duration)),
        ),
        credentials={n: _credential(n, c) for n, c in data["credentials"].items()},
        services={n: _service(n, s, base) for n, s in data.get("services", {}).items()},
    )
