"""The ``values`` of a drafted service: a Config Center document turned back into sources
(``rotate init``, rotate.engine.drafting).

Invariants: a document value is compared with Secret values only by fingerprint
(:class:`rotate.core.fingerprint.Comparer`); a value that matches a Secret, or sits under a
name that looks secret, is never returned as a ``literal`` — it becomes a ``secretKey`` or a
``template`` over one, or it is left out with a note naming only its pointer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from rotate.core.fingerprint import Comparer
from rotate.core.secret import Secret

#: a pointer's last token that says its value is a credential
SECRET_NAME = re.compile(r"pass|secret|token|key|credential|auth", re.IGNORECASE)
CLUSTER_DOMAIN = "svc.cluster.local"


@dataclass(frozen=True)
class SecretPlace:
    namespace: str
    name: str
    key: str

    def source(self) -> dict[str, Any]:
        return {"secretKey": {"namespace": self.namespace, "name": self.name, "key": self.key}}


@dataclass(frozen=True)
class ServicePlace:
    namespace: str
    name: str
    ports: tuple[int, ...]

    @property
    def host(self) -> str:
        return f"{self.name}.{self.namespace}.{CLUSTER_DOMAIN}"

    def source(self, port: int, part: str) -> dict[str, Any]:
        return {"service": {"namespace": self.namespace, "name": self.name, "port": port,
                            "part": part}}


@dataclass
class DraftValues:
    """Pointer → source in document order; ``guesses`` and ``left_out`` by pointer."""

    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    guesses: dict[str, str] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def leaves(doc: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(pointer, value) of every leaf; a list or an empty mapping is one leaf."""
    out: list[tuple[str, Any]] = []
    for key, value in doc.items():
        pointer = f"{prefix}/{_escape(str(key))}"
        if isinstance(value, Mapping) and value:
            out.extend(leaves(value, pointer))
        else:
            out.append((pointer, value))
    return out


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _names_agree(pointer: str, key: str) -> bool:
    """Whether a pointer's last token and a Secret key name the same thing (``password`` and
    ``/db/password``, ``username`` and ``/db/user``): a value match under another name may be
    a coincidence (a short value), so it is marked as a guess."""
    last = pointer.rsplit("/", 1)[-1].lower()
    key = key.lower()
    return bool(last) and (last in key or key in last)


def _parent(pointer: str) -> str:
    return pointer.rsplit("/", 1)[0]


class ValueMatcher:
    """Knows the fingerprints of the candidate Secret keys and the cluster's Services."""

    def __init__(self, comparer: Comparer, secrets: Mapping[bytes, list[SecretPlace]],
                 services: list[ServicePlace]) -> None:
        self._comparer = comparer
        self._secrets = secrets
        self._hosts = {s.host: s for s in services}

    def secret(self, value: str) -> list[SecretPlace]:
        return list(self._secrets.get(self._comparer.of(Secret(value)), ()))

    def draft(self, doc: Mapping[str, Any]) -> DraftValues:
        out = DraftValues()
        found = leaves(doc)
        secret_at: dict[str, SecretPlace] = {}
        host_at: dict[str, ServicePlace] = {}
        scalars = {p: v for p, v in found if isinstance(v, str | int) and not isinstance(v, bool)}
        for pointer, value in found:
            if isinstance(value, str):
                places = self.secret(value)
                if places:
                    secret_at[pointer] = places[0]
                    out.values[pointer] = places[0].source()
                    if len(places) > 1:
                        others = ", ".join(f"{p.namespace}/{p.name}#{p.key}" for p in places[1:])
                        out.guesses[pointer] = f"the same value is also in {others}"
                    elif not _names_agree(pointer, places[0].key):
                        out.guesses[pointer] = (f"the value equals {places[0].namespace}/"
                                                f"{places[0].name}#{places[0].key}")
                    continue
                host = self._hosts.get(value)
                if host is not None:
                    host_at[pointer] = host
                    out.values[pointer] = host.source(host.ports[0] if host.ports else 0,
                                                      "host")
                    continue
            out.values[pointer] = {}  # placeholder keeps document order; filled below
        for pointer, value in found:
            if out.values[pointer]:
                continue
            source, why = self._other(pointer, value, secret_at, host_at, scalars)
            if source is None:
                del out.values[pointer]
                out.left_out[pointer] = why
            else:
                out.values[pointer] = source
                if why:
                    out.guesses[pointer] = why
        return out

    def _other(self, pointer: str, value: Any, secret_at: Mapping[str, SecretPlace],
               host_at: Mapping[str, ServicePlace], scalars: Mapping[str, Any]
               ) -> tuple[dict[str, Any] | None, str]:
        if isinstance(value, int) and not isinstance(value, bool):
            for host_pointer, svc in host_at.items():
                if _parent(host_pointer) == _parent(pointer) and value in svc.ports:
                    return svc.source(value, "port"), ""
        if isinstance(value, str):
            hostport = self._hostport(value)
            if hostport is not None:
                return hostport, ""
            if "://" in value:
                template = self._url_template(value, secret_at, scalars)
                if template is not None:
                    return template
        if any(self.secret(s) for s in _strings(value)):
            return None, "holds a Secret's value inside a larger value: write it as a template"
        last = pointer.rsplit("/", 1)[-1]
        if _strings(value) and SECRET_NAME.search(last):
            return None, ("looks like a credential that no Secret rotate knows holds: source "
                          "it from its Secret (secretKey) yourself; its value is not written")
        return {"literal": value}, ""

    def _hostport(self, value: str) -> dict[str, Any] | None:
        host, sep, port = value.rpartition(":")
        svc = self._hosts.get(host) if sep and port.isdigit() else None
        if svc is None or int(port) not in svc.ports:
            return None
        return svc.source(int(port), "hostport")

    def _url_template(self, value: str, secret_at: Mapping[str, SecretPlace],
                      scalars: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str] | None:
        """A URL whose password is a Secret's value, as a template over the pointer that
        holds that Secret in the same document (and over its host and port, when they are
        values of it too).  None: the URL holds no known Secret."""
        try:
            parts = urlsplit(value)
            port = parts.port
        except ValueError:
            return None
        if parts.password is None or not self.secret(unquote(parts.password)):
            return None
        wanted = self.secret(unquote(parts.password))
        password_ptr = next((p for p, place in secret_at.items() if place in wanted), None)
        if password_ptr is None:
            return None, ("a URL holding a Secret's value, but no other value of the document "
                          "holds that Secret: add one (secretKey) and write this as a template")

        def ref(found: Any) -> str | None:
            return next((f"{{{p}}}" for p, v in scalars.items() if v == found), None)

        user = parts.username or ""
        user_places = self.secret(unquote(user)) if user else []
        user_ptr = next((p for p, place in secret_at.items() if place in user_places), None)
        user_text = f"{{{user_ptr}}}" if user_ptr else quote(unquote(user), safe="")
        host = parts.hostname or ""
        host_text = ref(host) or host
        port_text = "" if port is None else f":{ref(port) or port}"
        rest = parts.path + (f"?{parts.query}" if parts.query else "") + (
            f"#{parts.fragment}" if parts.fragment else "")
        if any(self.secret(unquote(s)) for s in (parts.path, parts.query, parts.fragment) if s):
            return None, "a URL holding a Secret's value in its path or query: write the template"
        text = f"{parts.scheme}://{user_text}:{{{password_ptr}}}@{host_text}{port_text}{rest}"
        return {"template": text}, ""
