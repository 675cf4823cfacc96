"""The three patch formats Kubernetes accepts: JSON merge patch (RFC 7386), strategic merge
patch, JSON patch (RFC 6902).

All functions are pure: they return a new document and never mutate their inputs.  They
raise :class:`PatchError` for a patch that cannot apply (the API server answers 422 for a
failed JSON-patch ``test`` or a missing path, 400 for a malformed patch document).

Strategic merge without the OpenAPI schema: Kubernetes decides per field (from Go struct
tags) whether a list merges by a key or is replaced.  We use the same decisions for the
fields the lab's kinds have, by field name — :data:`MERGE_KEYS`.  ``ports`` is keyed by
``containerPort`` in a container and by ``port`` in a Service; we tell them apart by which
key the elements carry.  Directives: ``$patch: delete|replace|merge`` in maps and list
elements, ``$deleteFromPrimitiveList/F``, and ``$setElementOrder/F``/``$retainKeys`` (which
kubectl sends and which only affect ordering/pruning — accepted and ignored).
"""

from __future__ import annotations

import copy
from typing import Any

#: list field name → merge key ("" = merge as a set of primitives)
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "finalizers": "",
    "ports": "containerPort",  # or "port": see _merge_key
}


class PatchError(ValueError):
    def __init__(self, message: str, *, invalid: bool = True) -> None:
        super().__init__(message)
        #: True: the patch is well-formed but does not apply (422); False: malformed (400)
        self.invalid = invalid


# --- JSON merge patch ------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# --- strategic merge patch -------------------------------------------------------------------


def _merge_key(field: str, items: list[Any]) -> str | None:
    key = MERGE_KEYS.get(field)
    if field == "ports":
        dicts = [i for i in items if isinstance(i, dict)]
        if dicts and all("containerPort" not in i for i in dicts):
            return "port"
    return key


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object", invalid=False)
    return _smp_map(target if isinstance(target, dict) else {}, patch)


def _smp_map(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    out = copy.deepcopy(target)
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            drop = value if isinstance(value, list) else []
            if isinstance(out.get(field), list):
                out[field] = [v for v in out[field] if v not in drop]
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            cur = out.get(key)
            merged = _smp_map(cur if isinstance(cur, dict) else {}, value)
            if value.get("$patch") == "delete":
                out.pop(key, None)
            else:
                out[key] = merged
        elif isinstance(value, list):
            out[key] = _smp_list(key, out.get(key), value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _smp_list(field: str, target: Any, patch: list[Any]) -> list[Any]:
    current: list[Any] = copy.deepcopy(target) if isinstance(target, list) else []
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    key = _merge_key(field, patch + current)
    if key is None:
        return [copy.deepcopy(i) for i in patch]
    if key == "":
        return current + [copy.deepcopy(i) for i in patch if i not in current]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"{field}: element without merge key {key!r}")
        idx = next((n for n, c in enumerate(current)
                    if isinstance(c, dict) and c.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                current.pop(idx)
        elif idx is None:
            current.append(_smp_map({}, item))
        else:
            current[idx] = _smp_map(current[idx], item)
    return current


# --- JSON patch ------------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}", invalid=False)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise PatchError(f"path {path!r} does not exist")
    return cur


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent, last = _parent(doc, parts, path), parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise PatchError(f"path {path!r} does not exist")


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent, last = _parent(doc, parts, path), parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError(f"index out of range in {path!r}")
    else:
        raise PatchError(f"path {path!r} does not exist")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise PatchError("cannot remove the whole document")
    _get(doc, path)
    parent, last = _parent(doc, parts, path), parts[-1]
    if isinstance(parent, dict):
        del parent[last]
    else:
        parent.pop(int(last))
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchError("JSON patch must be a list of operations", invalid=False)
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError("JSON patch operation needs 'op' and 'path'", invalid=False)
        kind, path = op["op"], str(op["path"])
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"JSON patch {kind} needs 'value'", invalid=False)
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            value = copy.deepcopy(op["value"])
            doc = _add(_remove(doc, path), path, value) if path else value
        elif kind in ("move", "copy"):
            value = copy.deepcopy(_get(doc, str(op.get("from", ""))))
            if kind == "move":
                doc = _remove(doc, str(op["from"]))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError(f"test failed at {path!r}")
        else:
            raise PatchError(f"unknown JSON patch op {kind!r}", invalid=False)
    return doc


def apply_patch(target: Any, patch: Any, patch_type: str) -> Any:
    """Dispatch on ``merge`` / ``strategic`` / ``json`` / ``apply``.

    ``apply`` (server-side apply) is approximated by a strategic merge of the applied
    configuration: no field managers, no conflicts — adequate for ``kubectl apply
    --server-side`` of whole manifests, which is all the lab needs.
    """
    if patch_type == "merge":
        if not isinstance(patch, dict):
            raise PatchError("merge patch must be a JSON object", invalid=False)
        return merge_patch(target, patch)
    if patch_type in ("strategic", "apply"):
        return strategic_merge_patch(target, patch)
    if patch_type == "json":
        return json_patch(target, patch)
    raise PatchError(f"unsupported patch type {patch_type!r}", invalid=False)
