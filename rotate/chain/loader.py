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
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rotate.chain.apply_fields import build_applies
from rotate.chain.envvars import expand_tree
from rotate.chain.method_schema import schema_with_methods, unavailable_methods
from rotate.chain.methods import registered
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
    WorkloadConsumers,
)
from rotate.chain.notify import notify_from
from rotate.chain.problems import json_path, line_of, schema_problems, semantic_problems
from rotate.chain.schedule import parse_schedule
from rotate.chain.strategy_rules import default_strategy
from rotate.chain.waves import Canary, PromQuery, Waves
from rotate.core.durations import parse_duration
from rotate.core.errors import ChainFileError, ChainFileProblem, UsageError
from rotate.core.refs import ObjectRef
from rotate.core.strategy import Strategy

SCHEMA_NAME = "chain.schema.json"

#: Limits that keep a hostile file (an alias bomb, a huge flow list, deep nesting) from hanging
#: or crashing the loader; each refusal is a chain-file error (exit 2) well within a second.
#: The canonical example (10 services) is 7 KB and ~760 nodes; 10 000 nodes is ~130 services
#: (ruamel's round-trip parser costs ~50 µs a node: 10 000 nodes stay near half a second).
MAX_BYTES = 1 << 20
MAX_NODES = 10_000  # after alias expansion: what _plain and jsonschema will walk
MAX_DEPTH = 64


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
    root = _parse_yaml(_decode(raw, file), file)
    unset = expand_tree(root, file, os.environ if environ is None else environ)
    if unset:
        raise ChainFileError(unset)
    data = _plain(root)
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


# --------------------------------------------------------------------------- YAML


def _refuse(file: str, reason: str) -> ChainFileError:
    return ChainFileError([ChainFileProblem(file, None, "", reason)])


#: what a non-regular file is, in the words of the refusal
_NOT_REGULAR = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISDIR, "a directory"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                (stat.S_ISSOCK, "a socket"))


def read_chain_bytes(path: Path) -> bytes:
    """The file's bytes; ChainFileError when unreadable or over MAX_BYTES.

    Only a regular file is read (UsageError, exit 2, naming the path, otherwise): a named
    pipe would block the command until something writes to it, a device never ends.  The
    file is opened non-blocking (opening a FIFO waits for a writer) and checked on the
    opened descriptor, so what is checked is what is read."""
    file = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                what = next((name for test, name in _NOT_REGULAR if test(st.st_mode)),
                            "not a regular file")
                raise UsageError(f"the chain file {file} is {what}, not a regular file",
                                 hint="point --chain (or ROTATE_CHAIN) at the chain file "
                                      "itself")
            with open(fd, "rb", closefd=False) as fh:
                raw = fh.read(MAX_BYTES + 1)
        finally:
            os.close(fd)
        size = max(len(raw), st.st_size)
    except OSError as exc:
        raise _refuse(file, f"cannot read the file: {exc.strerror or 'not readable'}") from None
    if size > MAX_BYTES:
        raise _refuse(file, f"the file is {size / (1 << 20):.1f} MiB; a chain file is at most "
                            f"{MAX_BYTES >> 20} MiB")
    return raw


def _decode(raw: bytes, file: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _refuse(file, "cannot read the file: not readable UTF-8") from None


@functools.lru_cache(maxsize=1)
def _bounded_classes() -> tuple[type, type]:
    """ruamel's round-trip parser, refusing a document deeper than MAX_DEPTH or expanding to
    more than MAX_NODES nodes — checked event by event, before the (recursive) composer
    descends and before anything walks the aliases (a shared node is walked once per alias).
    """
    from ruamel.yaml.events import (
        AliasEvent,
        CollectionStartEvent,
        MappingEndEvent,
        ScalarEvent,
        SequenceEndEvent,
    )
    from ruamel.yaml.parser import RoundTripParser
    from ruamel.yaml.scanner import RoundTripScanner

    class BoundedScanner(RoundTripScanner):
        """Refuses deep flow nesting as it is scanned: ruamel's scanner reads ahead and keeps
        a possible key per flow level, so ``[[[[…`` costs quadratic time before any event."""

        def fetch_flow_collection_start(self, token_class: Any, to_push: str) -> None:
            if self.flow_level >= MAX_DEPTH:
                raise _Refused(self.reader.line + 1,
                               f"the YAML nests deeper than {MAX_DEPTH} levels")
            super().fetch_flow_collection_start(token_class, to_push)

    class BoundedParser(RoundTripParser):
        def get_event(self) -> Any:
            event = super().get_event()
            budget: _Budget = self.__dict__.setdefault("_budget", _Budget())
            line = event.start_mark.line + 1 if event.start_mark else None
            if isinstance(event, CollectionStartEvent):
                budget.open(event.anchor, line)
            elif isinstance(event, MappingEndEvent | SequenceEndEvent):
                budget.close()
            elif isinstance(event, ScalarEvent):
                budget.node(1, event.anchor, line)
            elif isinstance(event, AliasEvent):
                budget.node(budget.anchors.get(event.anchor, 1), None, line)
            return event

    return BoundedScanner, BoundedParser


class _Budget:
    """Expanded node count and nesting depth of the document parsed so far."""

    def __init__(self) -> None:
        self.total = 0
        self.anchors: dict[str, int] = {}  # anchor → expanded size of its node
        self.stack: list[list[Any]] = []  # open collections: [size so far, anchor]

    def _spend(self, size: int, line: int | None) -> None:
        self.total += size
        if self.total > MAX_NODES:
            raise _Refused(line, f"the YAML expands to more than {MAX_NODES} nodes "
                                 "(aliases count once per use)")

    def open(self, anchor: str | None, line: int | None) -> None:
        self._spend(1, line)
        self.stack.append([1, anchor])
        if len(self.stack) > MAX_DEPTH:
            raise _Refused(line, f"the YAML nests deeper than {MAX_DEPTH} levels")

    def close(self) -> None:
        size, anchor = self.stack.pop()
        self._done(size, anchor)

    def node(self, size: int, anchor: str | None, line: int | None) -> None:
        """A scalar (size 1) or an alias (the expanded size of the node it repeats)."""
        self._spend(size, line)
        self._done(size, anchor)

    def _done(self, size: int, anchor: str | None) -> None:
        if anchor:
            self.anchors[anchor] = size
        if self.stack:
            self.stack[-1][0] += size


class _Refused(Exception):
    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


def _parse_yaml(text: str, file: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    yaml = YAML(typ="rt")
    yaml.Scanner, yaml.Parser = _bounded_classes()
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
    except _Refused as exc:
        raise ChainFileError([ChainFileProblem(file, exc.line, "", exc.reason)]) from None


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
