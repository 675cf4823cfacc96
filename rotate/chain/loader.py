"""Load the chain file: YAML with line numbers → JSON Schema → semantic checks → :class:`Chain`.

Every problem is collected before anything is raised, so an operator fixing a file sees all of
them at once (:mod:`rotate.chain.problems` finds and words them).  Only a file without
problems is turned into frozen values, so :class:`Chain` can rely on every checked invariant.

The file's bytes and YAML are read, within limits, by :mod:`rotate.chain.yaml_reader`.
ruamel (there) and jsonschema (in problems.py) are imported inside the functions:
``rotate --help`` must not pay for them.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rotate.chain.apply_fields import build_applies
from rotate.chain.envvars import expand_tree
from rotate.chain.method_schema import schema_with_methods, unavailable_methods
from rotate.chain.methods import registered
from rotate.chain.model import (
    BackendRef,
    Chain,
    Credential,
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
from rotate.chain.notify import notify_from
from rotate.chain.problems import json_path, line_of, schema_problems, semantic_problems
from rotate.chain.schedule import parse_schedule
from rotate.chain.sections import (
    AuthConfig,
    BackendConfig,
    ClusterConfig,
    ConfigCenterConfig,
    Defaults,
    WorkloadConsumers,
)
from rotate.chain.strategy_rules import default_strategy
from rotate.chain.waves import Canary, PromQuery, Waves
from rotate.chain.yaml_reader import parse_yaml, plain, read_chain_bytes
from rotate.core.durations import parse_duration
from rotate.core.errors import ChainFileError, ChainFileProblem
from rotate.core.refs import ObjectRef
from rotate.core.strategy import Strategy

SCHEMA_NAME = "chain.schema.json"



@functools.lru_cache(maxsize=1)
def chain_schema() -> dict[str, Any]:
    """``rotate/chain/chain.schema.json``, package data of ``rotate``: read through
    importlib.resources so that a wheel install finds it as a checkout does."""
    from importlib import resources  # here: a cached load never needs the schema

    text = (resources.files("rotate.chain") / SCHEMA_NAME).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def effective_schema() -> dict[str, Any]:
    """:func:`chain_schema` with the fields of every registered method merged in
    (rotate.chain.method_schema); rebuilt only when the registered methods change."""
    key = tuple((spec.name, id(spec)) for spec in registered())
    return _merged_schema(key)


@functools.lru_cache(maxsize=4)
def _merged_schema(key: tuple[tuple[str, int], ...]) -> dict[str, Any]:
    return schema_with_methods(chain_schema())


def load_chain(path: Path, environ: Mapping[str, str] | None = None) -> Chain:
    """Parse, validate and build the chain file at ``path``; ChainFileError lists every problem.

    Every command validates fully, ``rotate list`` included: a file that ``rotate CRED``
    refuses must not list. (:mod:`rotate.chain.cache` skips the parse and the validation
    for bytes it has seen validate, with these same three steps.)
    """
    return build_chain(validated_data(path, read_chain_bytes(path), environ), path)


def validated_data(
    path: Path, raw: bytes, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The chain file's content ``raw`` (from :func:`read_chain_bytes`) as plain JSON data —
    parsed, its ``${VAR}`` references expanded from ``environ`` (default: the process's
    environment; rotate.chain.envvars), schema-checked and semantically checked;
    ChainFileError lists every problem."""
    file = str(path)
    root = parse_yaml(raw, file)
    unset = expand_tree(root, file, os.environ if environ is None else environ)
    if unset:
        raise ChainFileError(unset)
    data = plain(root)
    if not isinstance(data, dict):
        raise ChainFileError([ChainFileProblem(file, 1, "", "the file must be a YAML mapping")])
    base = path.resolve().parent
    unavailable = [ChainFileProblem(file, line_of(root, parts), json_path(parts), reason)
                   for parts, reason in unavailable_methods(data)]  # loads named plug-ins
    problems = _dedupe([*unavailable, *schema_problems(effective_schema(), data, root, file),
                        *semantic_problems(data, root, file, base)])
    if problems:
        problems.sort(key=lambda p: (p.line or 0, p.path))
        raise ChainFileError(problems)
    return data


def build_chain(data: dict[str, Any], path: Path) -> Chain:
    """The frozen :class:`Chain` of ``data`` that :func:`validated_data` accepted for the
    file at ``path`` (Chain relies on every checked invariant: never build unchecked data)."""
    return _build(data, path.resolve())


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
    """The credential; without ``strategy`` in the file, the safest one its providers allow
    (rotate.chain.strategy_rules.default_strategy) and the plan's one-line reason."""
    built = _credential_as_written(name, raw)
    if "strategy" in raw:
        return built
    strategy, reason = default_strategy(built)
    return replace(built, strategy=strategy, strategy_reason=reason)


def _credential_as_written(name: str, raw: dict[str, Any]) -> Credential:
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
        strategy=Strategy(raw.get("strategy", "restart")),
        timeout=parse_duration(raw["timeout"]) if "timeout" in raw else None,
        max_age=parse_duration(raw["maxAge"]) if "maxAge" in raw else None,
        schedule=parse_schedule(raw["schedule"]) if "schedule" in raw else None,
        overlap=OverlapConfig(overlap["previousKey"]) if overlap else None,
        applies=build_applies(raw["providers"]),
        waves=_waves(raw.get("waves")),
        canary=_canary(raw.get("canary")),
    )


def _waves(raw: Any) -> Waves | None:
    if raw is None:
        return None
    if isinstance(raw, dict):
        return Waves(after={n: tuple(e["after"]) for n, e in raw.items()})
    return Waves(explicit=tuple(tuple(w) for w in raw))


def _canary(raw: dict[str, Any] | None) -> Canary | None:
    if raw is None:
        return None
    q = raw.get("query")
    consumers = raw["consumers"]
    return Canary(
        consumers=consumers if isinstance(consumers, int) else tuple(consumers),
        bake=parse_duration(raw["bake"]),
        query=PromQuery(q["expr"], float(q["max"]), url=q["prometheus"].get("url"),
                        url_env=q["prometheus"].get("urlEnv")) if q else None)


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
    cc = data.get("configCenter")
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
                                         url_env=cc.get("urlEnv")) if cc else None,
        defaults=Defaults(
            timeout=parse_duration(d.get("timeout", defaults.timeout)),
            max_parallel=d.get("maxParallel", defaults.max_parallel),
            reloader_grace=parse_duration(d.get("reloaderGrace", defaults.reloader_grace)),
            lease_duration=parse_duration(d.get("leaseDuration", defaults.lease_duration)),
        ),
        credentials={n: _credential(n, c) for n, c in data["credentials"].items()},
        services={n: _service(n, s, base) for n, s in data.get("services", {}).items()},
        notify=notify_from(data.get("notify")),
        workload_consumers=WorkloadConsumers(
            tuple((data.get("consumers") or {}).get("namespaces") or ()),
            (data.get("consumers") or {}).get("allNamespaces") is True),
    )
