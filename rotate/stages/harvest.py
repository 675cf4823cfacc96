"""Stage ④ harvest: resolve a service's value sources, build its document, validate it.

The document is built in memory with :class:`Secret` leaves wherever a value came from a
Secret (directly or through a template), so it can be shown masked and is revealed only
for schema validation and for the Config Center PUT body.

Validation errors are reported as (service, JSON path, reason) with the reason built from
the failing schema keyword and the *schema's* value (``minLength 32``, ``pattern ^redis://``).
jsonschema's own message is never used: it embeds the instance — the password.

``overrides`` replaces what a Secret key currently holds with a candidate value, so that
preflight validates every document with the value about to be written, before anything
changes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from rotate.chain.model import (
    LiteralSource,
    SecretKeyRef,
    SecretKeySource,
    Service,
    ServiceSource,
    TemplateSource,
    render_template,
)
from rotate.chain.value_graph import pointer_tokens, resolution_order
from rotate.core.errors import ClientError, NotFoundError
from rotate.core.secret import Secret, reveal_tree


@dataclass(frozen=True)
class HarvestProblem:
    service: str
    path: str  # JSON Pointer into the document ("/dragonfly/password")
    reason: str  # never contains a value

    def __str__(self) -> str:
        return f"{self.service}: {self.path or '/'}: {self.reason}"


@dataclass(frozen=True)
class Document:
    service: str
    value: Mapping[str, Any] = field(repr=False)  # Secret leaves
    problems: tuple[HarvestProblem, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


K = TypeVar("K")
V = TypeVar("V")


class SourceReader(Protocol):
    """The cluster reads a harvest makes: a Service (a named port) and a Secret's key."""

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]: ...

    def read_secret_key(self, namespace: str, name: str, key: str) -> Secret | None: ...


class SharedReads:
    """The reads of one harvest of many consumers, each object read once.

    Consumers of one credential mostly resolve the same sources — the credential's Secret,
    the provider's Service — read per consumer, 100 consumers would read the same Secret 100 times.
    Here the first read of a (kind, object) is kept for the rest of the harvest, which also
    builds every document from one snapshot of each source.  Only successful reads are kept
    (a failure is read again by the next consumer that needs it, and reported by each).
    Thread-safe: preflight harvests on its pool; two threads missing the same key at once
    both read it, and the first answer stored is the one every caller gets.  Callers only
    read what :meth:`get` returns.
    """

    def __init__(self, kube: SourceReader) -> None:
        self._kube = kube
        self._lock = threading.Lock()
        self._objects: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        self._keys: dict[tuple[str, str, str], Secret | None] = {}

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        return self._once(self._objects, (kind, namespace, name),
                          lambda: self._kube.get(kind, namespace, name))

    def read_secret_key(self, namespace: str, name: str, key: str) -> Secret | None:
        return self._once(self._keys, (namespace, name, key),
                          lambda: self._kube.read_secret_key(namespace, name, key))

    def _once(self, kept: dict[K, V], at: K, read: Callable[[], V]) -> V:
        with self._lock:
            if at in kept:
                return kept[at]
        value = read()  # outside the lock: the other consumers' reads go on meanwhile
        with self._lock:
            return kept.setdefault(at, value)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _service_port(kube: SourceReader, src: ServiceSource) -> int:
    if isinstance(src.port, int):
        return src.port
    svc = kube.get("Service", src.namespace, src.name)
    for port in (svc.get("spec") or {}).get("ports") or []:
        if port.get("name") == src.port:
            return int(port["port"])
    raise NotFoundError("kubernetes", f"service/{src.namespace}/{src.name}",
                        f"has no port named {src.port!r}")


def resolve(
    kube: SourceReader, service: Service, overrides: Mapping[SecretKeyRef, Secret] | None = None
) -> tuple[dict[str, Any], list[HarvestProblem]]:
    """Pointer → resolved value, in dependency order; problems for what could not resolve."""
    values: dict[str, Any] = {}
    problems: list[HarvestProblem] = []
    failed: set[str] = set()
    for pointer in resolution_order(service.values):
        src = service.values[pointer]
        try:
            if isinstance(src, LiteralSource):
                values[pointer] = src.value
            elif isinstance(src, SecretKeySource):
                ref = src.secret
                if overrides and ref in overrides:
                    values[pointer] = overrides[ref]
                    continue
                got = kube.read_secret_key(src.namespace, src.name, src.key)
                if got is None:
                    raise NotFoundError("kubernetes", f"secret {ref}", "key absent")
                values[pointer] = got
            elif isinstance(src, ServiceSource):
                if src.part == "host":
                    values[pointer] = src.host
                elif src.part == "port":
                    values[pointer] = _service_port(kube, src)
                else:
                    values[pointer] = f"{src.host}:{_service_port(kube, src)}"
            elif isinstance(src, TemplateSource):
                missing = [r for r in src.refs if r in failed or r not in values]
                if missing:
                    failed.add(pointer)
                    problems.append(HarvestProblem(
                        service.name, pointer, f"template references unresolved {missing[0]}"))
                    continue
                values[pointer] = render_template(src.template, values.__getitem__)
        except ClientError as exc:
            failed.add(pointer)
            problems.append(HarvestProblem(service.name, pointer,
                                           f"cannot resolve: {exc.operation}: {exc.reason}"))
    return values, problems


def build(service: str, values: Mapping[str, Any]) -> tuple[dict[str, Any], list[HarvestProblem]]:
    """The document with every pointer set, intermediate objects created."""
    doc: dict[str, Any] = {}
    problems: list[HarvestProblem] = []
    for pointer, value in values.items():
        tokens = pointer_tokens(pointer)
        node: Any = doc
        ok = True
        for token in tokens[:-1]:
            nxt = node.setdefault(token, {})
            if not isinstance(nxt, dict):
                problems.append(HarvestProblem(service, pointer,
                                               f"parent {token!r} is set to a non-object value"))
                ok = False
                break
            node = nxt
        if ok:
            node[tokens[-1]] = value
    return doc, problems


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


_REASONS = {
    "type": "must be of type {v}",
    "minLength": "must be at least {v} characters long",
    "maxLength": "must be at most {v} characters long",
    "pattern": "must match pattern {v}",
    "format": "must be a valid {v}",
    "enum": "must be one of {v}",
    "const": "must equal {v}",
    "minimum": "must be >= {v}",
    "maximum": "must be <= {v}",
    "exclusiveMinimum": "must be > {v}",
    "exclusiveMaximum": "must be < {v}",
    "minItems": "must have at least {v} items",
    "maxItems": "must have at most {v} items",
    "minProperties": "must have at least {v} properties",
    "maxProperties": "must have at most {v} properties",
    "multipleOf": "must be a multiple of {v}",
    "uniqueItems": "items must be unique",
    "additionalProperties": "has properties the schema does not allow",
    "unevaluatedProperties": "has properties the schema does not allow",
    "not": "must not match the excluded schema",
}


def _problems_from(service: str, errors: Iterable[Any]) -> list[HarvestProblem]:
    out: list[HarvestProblem] = []
    for err in errors:
        path = "".join("/" + _escape(str(p)) for p in err.absolute_path)
        keyword = str(err.validator)
        value = err.validator_value
        if keyword == "required":
            instance = err.instance if isinstance(err.instance, dict) else {}
            for name in value:
                if name not in instance:
                    out.append(HarvestProblem(service, f"{path}/{_escape(str(name))}",
                                              "required property is missing"))
            continue
        if keyword in ("oneOf", "anyOf", "allOf"):
            reason = f"does not match {keyword} of the schema"
        elif keyword in _REASONS:
            shown = value if keyword in ("pattern", "format") else _short(value)
            reason = _REASONS[keyword].format(v=shown)
        else:
            reason = f"fails {keyword} {_short(value)}"
        out.append(HarvestProblem(service, path, reason))
    return sorted(out, key=lambda p: (p.path, p.reason))


def validate(
    service: str, document: Mapping[str, Any], schema: Mapping[str, Any]
) -> list[HarvestProblem]:
    """Schema problems of ``document`` (validated on a revealed copy, discarded right after)."""
    import jsonschema  # lazily: only harvest and the chain loader need it

    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    return _problems_from(service, validator.iter_errors(reveal_tree(document)))


def load_schema(service: Service) -> dict[str, Any]:
    try:
        with open(service.schema, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        raise NotFoundError("rotate", f"schema of {service.name}",
                            f"cannot read JSON Schema {service.schema}") from None
    if not isinstance(data, dict):
        raise NotFoundError("rotate", f"schema of {service.name}", "schema is not an object")
    return data


def harvest(
    kube: SourceReader, service: Service, overrides: Mapping[SecretKeyRef, Secret] | None = None,
    schema: Mapping[str, Any] | None = None,
) -> Document:
    """Resolve, build and validate one service's document; problems listed, never raised."""
    values, problems = resolve(kube, service, overrides)
    doc, build_problems = build(service.name, values)
    problems.extend(build_problems)
    if not problems:
        try:
            problems.extend(validate(service.name, doc, schema or load_schema(service)))
        except NotFoundError as exc:
            problems.append(HarvestProblem(service.name, "", exc.reason))
    return Document(service.name, doc, tuple(problems))
