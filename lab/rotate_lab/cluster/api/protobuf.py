"""Just enough of Kubernetes' protobuf wire format to read the request bodies kubectl sends.

kubectl's typed commands (``auth can-i``, ``create secret|configmap|namespace|token``) POST
``application/vnd.kubernetes.protobuf`` bodies, and client-go does not fall back to JSON on
415 (that fallback exists only for CBOR).  Responses are always JSON, which those clients
accept (``Accept: application/vnd.kubernetes.protobuf,application/json``).

Body layout: the magic ``k8s\\0``, then a ``runtime.Unknown`` message (1: TypeMeta{1:
apiVersion, 2: kind}, 2: raw object bytes).  The objects are decoded against the small field
tables below (field numbers from the Kubernetes ``generated.proto`` files, checked against
what kubectl 1.32 sends).  Any other kind is answered 415 with a hint to use JSON.
"""

from __future__ import annotations

import base64
from typing import Any

from rotate_lab.cluster.api.apierrors import ApiError

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"

# field number → (json name, type); type is "str", "int", "bytes", a table name, or
# "map:str" / "map:bytes" (map<string, string|bytes>), "list:str" / "list:<table>"
_Table = dict[int, tuple[str, str]]
_TABLES: dict[str, _Table] = {
    "ObjectMeta": {1: ("name", "str"), 2: ("generateName", "str"), 3: ("namespace", "str"),
                   5: ("uid", "str"), 6: ("resourceVersion", "str"), 7: ("generation", "int"),
                   11: ("labels", "map:str"), 12: ("annotations", "map:str"),
                   14: ("finalizers", "list:str")},
    "Secret": {1: ("metadata", "ObjectMeta"), 2: ("data", "map:bytes"), 3: ("type", "str"),
               4: ("stringData", "map:str"), 5: ("immutable", "bool")},
    "ConfigMap": {1: ("metadata", "ObjectMeta"), 2: ("data", "map:str"),
                  3: ("binaryData", "map:bytes"), 4: ("immutable", "bool")},
    "Namespace": {1: ("metadata", "ObjectMeta"), 2: ("spec", "NamespaceSpec")},
    "NamespaceSpec": {1: ("finalizers", "list:str")},
    "SelfSubjectAccessReview": {1: ("metadata", "ObjectMeta"),
                                2: ("spec", "SelfSubjectAccessReviewSpec")},
    "SelfSubjectAccessReviewSpec": {1: ("resourceAttributes", "ResourceAttributes"),
                                    2: ("nonResourceAttributes", "NonResourceAttributes")},
    "ResourceAttributes": {1: ("namespace", "str"), 2: ("verb", "str"), 3: ("group", "str"),
                           4: ("version", "str"), 5: ("resource", "str"),
                           6: ("subresource", "str"), 7: ("name", "str")},
    "NonResourceAttributes": {1: ("path", "str"), 2: ("verb", "str")},
    # ``kubectl create token`` (serviceaccounts/token); status (3) is empty on a request
    "TokenRequest": {1: ("metadata", "ObjectMeta"), 2: ("spec", "TokenRequestSpec")},
    "TokenRequestSpec": {1: ("audiences", "list:str"), 3: ("boundObjectRef", "BoundObjectRef"),
                         4: ("expirationSeconds", "int")},
    "BoundObjectRef": {1: ("kind", "str"), 2: ("apiVersion", "str"), 3: ("name", "str"),
                       4: ("uid", "str")},
    "TokenReview": {1: ("metadata", "ObjectMeta"), 2: ("spec", "TokenReviewSpec")},
    "TokenReviewSpec": {1: ("token", "str"), 2: ("audiences", "list:str")},
}
KINDS = ("Secret", "ConfigMap", "Namespace", "SelfSubjectAccessReview", "TokenRequest",
         "TokenReview")


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            out.append((number, value))
        elif wire == 2:
            length, i = _varint(buf, i)
            if i + length > len(buf):
                raise ValueError("truncated field")
            out.append((number, buf[i:i + length]))
            i += length
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def _message(buf: bytes, table: str) -> dict[str, Any]:
    fields = _TABLES[table]
    out: dict[str, Any] = {}
    for number, raw in _fields(buf):
        if number not in fields:
            continue
        name, typ = fields[number]
        if typ in ("int", "bool"):
            value: Any = int(raw) if isinstance(raw, int) else 0
            if typ == "bool":
                value = bool(value)
            if value:
                out[name] = value
            continue
        if not isinstance(raw, bytes):
            raise ValueError(f"field {name}: expected bytes")
        if typ == "str":
            if raw:
                out[name] = raw.decode()
        elif typ.startswith("map:"):
            entry = dict(_fields(raw))
            key, value = entry.get(1, b""), entry.get(2, b"")
            assert isinstance(key, bytes) and isinstance(value, bytes)
            text = base64.b64encode(value).decode() if typ == "map:bytes" else value.decode()
            out.setdefault(name, {})[key.decode()] = text
        elif typ == "list:str":
            out.setdefault(name, []).append(raw.decode())
        else:
            sub = _message(raw, typ)
            if sub:
                out[name] = sub
    return out


def _bytes(value: int | bytes | None) -> bytes:
    if value is None:
        return b""
    if not isinstance(value, bytes):
        raise ValueError("expected a length-delimited field")
    return value


def decode(body: bytes) -> dict[str, Any]:
    """A protobuf request body as the JSON object it stands for; 415/400 if we cannot."""
    if not body.startswith(_MAGIC):
        raise ApiError(400, "BadRequest", "the protobuf body lacks the Kubernetes envelope")
    try:
        envelope = dict(_fields(body[len(_MAGIC):]))
        type_meta = dict(_fields(_bytes(envelope.get(1))))
        api_version = _bytes(type_meta.get(1)).decode()
        kind = _bytes(type_meta.get(2)).decode()
        if kind not in KINDS:
            raise ApiError(415, "UnsupportedMediaType",
                           f"the lab's API server reads protobuf only for {', '.join(KINDS)}; "
                           f"send {kind or 'this object'} as JSON (e.g. kubectl apply -f)")
        obj = _message(_bytes(envelope.get(2)), kind)
    except (ValueError, AssertionError, UnicodeDecodeError):
        raise ApiError(400, "BadRequest", "the protobuf body could not be decoded") from None
    return {"apiVersion": api_version, "kind": kind, **obj}
