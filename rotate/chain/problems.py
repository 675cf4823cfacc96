"""Problems in a chain file, each as ``file:line: /json/path: reason``.

Two sources: JSON Schema errors, explained in our own words (jsonschema's messages embed the
whole failing instance — a mapping may run to dozens of lines — and a chain file is not the
place to echo values back; only names such as keys and enum choices appear), and the semantic
checks the schema cannot express (template references and cycles, overlapping pointers,
schema files, reserved credential names, ambiguous Secret targets).

Line numbers come from ruamel's round-trip nodes at the failing instance path, falling back
to the nearest ancestor that has one (a key brought in by a ``<<`` merge has none).
jsonschema is imported inside :func:`schema_problems`: ``rotate --help`` must not pay for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rotate.chain.apply_fields import provider_problems
from rotate.chain.model import RESERVED_CREDENTIAL_NAMES
from rotate.chain.schedule import schedule_problem
from rotate.chain.templates import is_json_pointer, template_problems, template_refs
from rotate.core.errors import ChainFileProblem
from rotate.core.secret import ALPHABETS

if TYPE_CHECKING:
    from jsonschema import ValidationError

PathParts = Sequence[str | int]


def line_of(root: Any, parts: PathParts) -> int | None:
    """1-based line of the deepest node on ``parts`` that ruamel recorded a position for."""
    line: int | None = None
    lc = getattr(root, "lc", None)
    if lc is not None and lc.line is not None:
        line = lc.line + 1
    node = root
    for part in parts:
        lc = getattr(node, "lc", None)
        try:
            if isinstance(node, Mapping):
                if lc is not None and part in lc.data:
                    line = lc.key(part)[0] + 1
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int):
                if lc is not None and part in lc.data:
                    line = lc.item(part)[0] + 1
                node = node[part]
            else:
                break
        except (KeyError, IndexError, TypeError):
            break
    return line


def json_path(parts: PathParts) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


# --------------------------------------------------------------------------- JSON Schema


def schema_problems(
    schema: dict[str, Any], data: dict[str, Any], root: Any, file: str
) -> list[ChainFileProblem]:
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema)
    problems = []
    for error in validator.iter_errors(data):
        for parts, reason in _explain(error, schema):
            problems.append(ChainFileProblem(file, line_of(root, parts), json_path(parts), reason))
    return problems


_PATTERN_HINTS = {
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": "use lowercase letters, digits and '-' (a DNS label)",
    "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$": "use lowercase letters, digits, '-' and '.'",
    "^[A-Za-z_][A-Za-z0-9_]*$": "must be an environment variable name",
    "^(/([^~]|~[01])*)+$": "must be a JSON Pointer such as /dragonfly/password",
    "^[-._a-zA-Z0-9]+$": "use letters, digits, '-', '_' and '.'",
    "^https?://": "must be an http:// or https:// URL",
    "^/": "must start with '/'",
    "^[^/\\s]+(/[^/\\s]+)*$": "must be a path like infra/dragonfly (no leading or trailing '/')",
}

_TYPE_NAMES = {
    "object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
    "number": "a number", "boolean": "true or false", "null": "null",
}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null"


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, str | int | float | bool) else _json_type(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _explain(
    error: ValidationError, schema: dict[str, Any]
) -> Iterator[tuple[list[str | int], str]]:
    """(instance path, reason) pairs for one jsonschema error, in our own words."""
    parts: list[str | int] = list(error.absolute_path)
    kind = error.validator
    value = error.validator_value
    inst = error.instance
    defs = schema["$defs"]
    if "propertyNames" in error.absolute_schema_path:
        hint = _PATTERN_HINTS.get(str(value), "") if kind == "pattern" else ""
        if kind == "maxLength":
            hint = f"at most {value} characters"
        yield [*parts, str(inst)], f"name {_short(inst)} is not allowed: {hint or 'invalid name'}"
    elif kind == "additionalProperties" and isinstance(inst, dict):
        known = set(error.schema.get("properties", {}))
        patterns = list(error.schema.get("patternProperties", {}))
        for key in inst:
            if key not in known and not any(re.search(p, key) for p in patterns):
                expected = ", ".join(sorted(known))
                yield [*parts, key], f"unknown field {key!r} (expected: {expected})"
    elif kind == "required":
        missing = [k for k in value if isinstance(inst, dict) and k not in inst]
        for key in missing[:1] or ["?"]:
            yield parts, f"missing required field {key!r}"
    elif kind == "type":
        yield parts, f"must be {_TYPE_NAMES.get(str(value), str(value))}, not {_json_type(inst)}"
    elif kind == "enum":
        yield parts, f"{_short(inst)} is not one of: {', '.join(map(str, value))}"
    elif kind == "const":
        yield parts, f"must be {value!r}, not {_short(inst)}"
    elif kind == "pattern":
        yield parts, f"{_short(inst)} {_PATTERN_HINTS.get(str(value), 'has the wrong format')}"
    elif kind in ("minimum", "maximum"):
        yield parts, f"must be {'at least' if kind == 'minimum' else 'at most'} {value}"
    elif kind == "minLength":
        yield parts, "must not be empty"
    elif kind == "maxLength":
        yield parts, f"is too long (at most {value} characters)"
    elif kind == "minItems":
        yield parts, f"needs at least {value} item(s)"
    elif kind in ("minProperties", "maxProperties"):
        if "literal" in error.schema.get("properties", {}):
            yield parts, ("a value source needs exactly one of: "
                          "literal, secretKey, service, template")
        elif kind == "minProperties":
            yield parts, f"needs at least {value} entr{'y' if value == 1 else 'ies'}"
        else:
            yield parts, f"has more than {value} entries"
    elif kind == "oneOf" and error.schema == defs["duration"]:
        yield parts, "must be a duration such as 90s, 5m, 1h30m, 500ms, or seconds"
    elif kind == "oneOf" and error.schema == defs["port"]:
        yield parts, "must be a port number (1-65535) or a port name"
    elif kind == "oneOf" and all(isinstance(s, dict) and "required" in s for s in value):
        if not isinstance(inst, dict):
            return  # the "type" error already says it; "required" is moot on a non-mapping
        choices = " | ".join(" + ".join(s["required"]) for s in value)
        yield parts, f"needs exactly one of: {choices}"
    else:
        yield parts, f"is not valid here ({kind})"


# --------------------------------------------------------------------------- semantics


def semantic_problems(
    data: dict[str, Any], root: Any, file: str, base: Path
) -> list[ChainFileProblem]:
    """What the schema cannot say. Written defensively: it runs on schema-invalid data too,
    so one pass reports structural and semantic problems together."""
    problems: list[ChainFileProblem] = []

    def add(parts: list[str | int], reason: str) -> None:
        problems.append(ChainFileProblem(file, line_of(root, parts), json_path(parts), reason))

    credentials = data.get("credentials")
    targets: dict[tuple[str, str, str], str] = {}
    if isinstance(credentials, dict):
        for name, cred in credentials.items():
            where: list[str | int] = ["credentials", name]
            if name in RESERVED_CREDENTIAL_NAMES:
                add(where, f"credential name {name!r} is a rotate command "
                           f"({', '.join(RESERVED_CREDENTIAL_NAMES)}); choose another name")
            if not isinstance(cred, dict):
                continue
            gen = cred.get("generate")
            if isinstance(gen, dict) and isinstance(gen.get("alphabet"), str):
                alphabet = gen["alphabet"]
                if alphabet not in ALPHABETS and len(set(alphabet)) < 10:
                    add([*where, "generate", "alphabet"],
                        f"alphabet must be one of {', '.join(ALPHABETS)} "
                        "or at least 10 distinct characters")
            secret = cred.get("secret")
            if isinstance(secret, dict):
                target = (str(secret.get("namespace")), str(secret.get("name")),
                          str(secret.get("key")))
                if target in targets:
                    add([*where, "secret"], f"the same Secret key is the target of credential "
                                            f"{targets[target]!r}: consumers would be ambiguous")
                targets.setdefault(target, name)
            overlap = cred.get("overlap")
            if isinstance(overlap, dict) and isinstance(secret, dict):
                prev = overlap.get("previousKey")
                backend = cred.get("backend")
                bkey = backend.get("key") if isinstance(backend, dict) else None
                if prev is not None and prev in (secret.get("key"), bkey):
                    add([*where, "overlap", "previousKey"],
                        "previousKey must differ from the credential's key")
            if "schedule" in cred and isinstance(cred["schedule"], str):
                problem = schedule_problem(cred["schedule"])
                if problem is not None:
                    add([*where, "schedule"], problem)
            for parts, reason in provider_problems(cred):
                add([*where, *parts], reason)

    services = data.get("services")
    if isinstance(services, dict):
        for name, svc in services.items():
            if not isinstance(svc, dict):
                continue
            where = ["services", name]
            schema = svc.get("schema")
            if isinstance(schema, str) and schema:
                problems.extend(
                    _schema_file_problems(base / schema, file, root, [*where, "schema"]))
            values = svc.get("values")
            if isinstance(values, dict):
                for parts, reason in _value_problems(values):
                    add([*where, "values", *parts], reason)
    return problems


def _schema_file_problems(
    target: Path, file: str, root: Any, parts: list[str | int]
) -> list[ChainFileProblem]:
    reason = schema_file_problem(target)
    if reason is None:
        return []
    return [ChainFileProblem(file, line_of(root, parts), json_path(parts), reason)]


def schema_file_problem(target: Path) -> str | None:
    """What is wrong with a service's schema file (absent, unreadable, not JSON), or None.

    The one check of a chain file that depends on other files: the validated-chain cache
    repeats it on every hit (rotate.chain.cache)."""
    if not target.is_file():
        return f"schema file not found: {target.resolve()}"
    try:
        json.loads(target.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return f"schema file cannot be read: {target.resolve()}"
    except json.JSONDecodeError as exc:
        return f"schema file is not valid JSON (its line {exc.lineno}): {target.resolve()}"
    return None


def _value_problems(values: dict[str, Any]) -> Iterator[tuple[list[str | int], str]]:
    """Pointer overlaps, unknown template references and template cycles in one document."""
    pointers = [p for p in values if is_json_pointer(p)]
    for p in pointers:
        for q in pointers:
            if q != p and q.startswith(p + "/"):
                yield [q], f"{q} lies inside {p}, which already has a value"
    graph: dict[str, list[str]] = {}
    for pointer, source in values.items():
        if not (isinstance(source, dict) and isinstance(source.get("template"), str)):
            continue
        for reason in template_problems(source["template"]):
            yield [pointer, "template"], reason
        refs = template_refs(source["template"])
        graph[pointer] = refs
        for ref in refs:
            if ref not in values:
                yield [pointer, "template"], (
                    f"template references {ref}, which is not a value of this document")
    # Cycle detection: colour DFS; each cycle reported once, at its first member in file order.
    state: dict[str, int] = {}
    reported: set[frozenset[str]] = set()

    def visit(node: str, stack: list[str]) -> Iterator[tuple[list[str | int], str]]:
        state[node] = 1
        for ref in graph.get(node, []):
            if state.get(ref) == 1:
                cycle = [*stack[stack.index(ref):], ref] if ref in stack else [node, ref]
                key = frozenset(cycle)
                if key not in reported:
                    reported.add(key)
                    yield [cycle[0], "template"], "template cycle: " + " → ".join(cycle)
            elif ref in graph and state.get(ref) is None:
                yield from visit(ref, [*stack, ref])
        state[node] = 2

    for pointer in graph:
        if state.get(pointer) is None:
            yield from visit(pointer, [pointer])
