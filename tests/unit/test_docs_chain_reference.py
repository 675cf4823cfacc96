"""docs/chain-file.md covers every field of the chain file's JSON Schema.

The schema is walked (``$ref``, ``properties``, maps, arrays, ``allOf``/``oneOf``/``if``…)
into dotted field paths such as ``credentials.<name>.providers[].kind``; each must appear
in the reference in backticks. A field added to the schema without a line in the reference
fails this test; the synthetic-schema tests prove that it can fail.

The schema is found the way the product finds it: package data read through
``importlib.resources`` (``rotate/chain/chain.schema.json``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any

from tests.support.paths import ROTATE_PACKAGE

#: the repository's docs/ beside the (editable) product package
REFERENCE = ROTATE_PACKAGE.parent / "docs" / "chain-file.md"


def load_schema() -> dict[str, Any]:
    packaged = resources.files("rotate.chain").joinpath("chain.schema.json")
    return dict(json.loads(packaged.read_text(encoding="utf-8")))


def _resolve(root: Mapping[str, Any], ref: str) -> Mapping[str, Any]:
    assert ref.startswith("#/"), f"only local $refs are walked: {ref}"
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return dict(node)


def _map_key(schema: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    """How a map's keys are written in the reference: ``<name>``, ``<pointer>`` or ``<key>``."""
    names = schema.get("propertyNames")
    if isinstance(names, Mapping):
        if names.get("$ref") == "#/$defs/name":
            return "<name>"
        if str(names.get("pattern", "")).startswith("^(/"):
            return "<pointer>"
    return "<key>"


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def schema_fields(root: Mapping[str, Any]) -> list[str]:
    """Every field path of ``root``, in schema order, without duplicates."""
    seen: set[tuple[int, str]] = set()

    def walk(schema: Any, prefix: str) -> Iterator[str]:
        if not isinstance(schema, Mapping):
            return
        if (id(schema), prefix) in seen:
            return
        seen.add((id(schema), prefix))
        if "$ref" in schema:
            yield from walk(_resolve(root, str(schema["$ref"])), prefix)
        for name, sub in (schema.get("properties") or {}).items():
            path = _join(prefix, name)
            yield path
            yield from walk(sub, path)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            path = _join(prefix, _map_key(schema, root))
            yield path
            yield from walk(extra, path)
        for pattern, sub in (schema.get("patternProperties") or {}).items():
            path = _join(prefix, pattern.lstrip("^") + "*")
            yield path
            yield from walk(sub, path)
        if isinstance(schema.get("items"), Mapping):
            yield from walk(schema["items"], prefix + "[]")
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in schema.get(key) or []:
                yield from walk(sub, prefix)
        for key in ("if", "then", "else", "not"):
            yield from walk(schema.get(key), prefix)

    return list(dict.fromkeys(walk(root, "")))


def missing_fields(schema: Mapping[str, Any], reference: str) -> list[str]:
    """The field paths of ``schema`` that ``reference`` does not name in backticks."""
    return [f for f in schema_fields(schema) if f"`{f}`" not in reference]


# -- the real schema against the real reference -----------------------------------------------
def test_the_reference_names_every_field_of_the_schema() -> None:
    schema = load_schema()
    fields = schema_fields(schema)
    assert "credentials.<name>.providers[].kind" in fields  # the walk reaches deep fields
    assert "services.<name>.values.<pointer>.service.part" in fields
    missing = missing_fields(schema, REFERENCE.read_text(encoding="utf-8"))
    assert missing == [], (
        f"docs/chain-file.md does not mention {missing}: add a row per field (its path in "
        "backticks) saying what it means")


# -- proof that the check can fail --------------------------------------------------------------
def test_a_field_added_to_the_schema_is_reported_missing() -> None:
    schema = copy.deepcopy(load_schema())
    schema["$defs"]["credential"]["properties"]["rotationWindow"] = {"type": "string"}
    schema["$defs"]["backend"]["properties"]["auth"]["properties"]["tlsServerName"] = {
        "type": "string"}
    missing = missing_fields(schema, REFERENCE.read_text(encoding="utf-8"))
    assert missing == ["backend.auth.tlsServerName", "credentials.<name>.rotationWindow"]


SYNTHETIC: dict[str, Any] = {
    "type": "object",
    "properties": {
        "top": {"$ref": "#/$defs/thing"},
        "list": {"type": "array", "items": {"properties": {"a": {}}}},
        "byName": {"type": "object", "propertyNames": {"$ref": "#/$defs/name"},
                   "additionalProperties": {"$ref": "#/$defs/thing"}},
    },
    "patternProperties": {"^x-": {}},
    "$defs": {
        "name": {"type": "string"},
        "thing": {"properties": {"b": {}},
                  "oneOf": [{"properties": {"c": {}}}],
                  "if": {"properties": {"b": {"const": 1}}}, "then": {"properties": {"d": {}}}},
    },
}


def test_the_walk_follows_refs_maps_arrays_and_conditionals() -> None:
    assert schema_fields(SYNTHETIC) == [
        "top", "top.b", "top.c", "top.d", "list", "list[].a", "byName", "byName.<name>",
        "byName.<name>.b", "byName.<name>.c", "byName.<name>.d", "x-*"]
    reference = "`top` `top.b` `top.c` `top.d` `list` `list[].a` `byName` `byName.<name>` " \
                "`byName.<name>.b` `byName.<name>.c` `x-*`"
    assert missing_fields(SYNTHETIC, reference) == ["byName.<name>.d"]
    assert missing_fields(SYNTHETIC, reference + " `byName.<name>.d`") == []
