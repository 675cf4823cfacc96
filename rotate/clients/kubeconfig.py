"""Why a kubeconfig cannot be used, in our own words: the reason behind "cannot use".

The official client's loader fails with its own exception text (a path, a YAML error with
a line of the file, sometimes a certificate's bytes); rotate never prints that text. When
loading fails, :func:`why_unusable` looks at the same files itself and names the first
problem an operator can fix: a file missing or not readable, a context the files do not
have (listing the ones they have), no current context, or — when everything it can check
is in order — the context's cluster or user entries.

The files are those the client reads: ``--kubeconfig`` else ``KUBECONFIG`` (a list,
``os.pathsep``-separated; files that do not exist are skipped, as kubectl does, unless none
exists) else ``~/.kube/config``.  Context names are the operator's own configuration, not
secrets; at most :data:`MAX_LISTED` are listed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DEFAULT_KUBECONFIG = "~/.kube/config"
MAX_LISTED = 10


def kubeconfig_files(kubeconfig: str | None, environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """(how the files were named, the files) the client reads."""
    if kubeconfig:
        return f"--kubeconfig {kubeconfig}", [p for p in kubeconfig.split(os.pathsep) if p]
    env = environ.get("KUBECONFIG", "")
    if env:
        return f"KUBECONFIG={env}", [p for p in env.split(os.pathsep) if p]
    return DEFAULT_KUBECONFIG, [DEFAULT_KUBECONFIG]


def _listed(names: list[str]) -> str:
    if not names:
        return "it has no contexts"
    shown = ", ".join(names[:MAX_LISTED])
    more = f", … ({len(names) - MAX_LISTED} more)" if len(names) > MAX_LISTED else ""
    return f"its contexts: {shown}{more}"


def _read(path: Path) -> tuple[Any, str]:
    """(the parsed document or None, a problem or "")."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, "does not exist"
    except PermissionError:
        return None, "is not readable (permission denied)"
    except IsADirectoryError:
        return None, "is a directory, not a file"
    except (OSError, UnicodeDecodeError):
        return None, "cannot be read"
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        doc = YAML(typ="safe", pure=True).load(text)
    except YAMLError:
        return None, "is not valid YAML"
    if doc is not None and not isinstance(doc, dict):
        return None, "is not a kubeconfig (not a YAML mapping)"
    return doc or {}, ""


def why_unusable(kubeconfig: str | None, context: str | None,
                 environ: Mapping[str, str] | None = None) -> str:
    """The reason the kubeconfig (and context) cannot be used, as one clause."""
    named, files = kubeconfig_files(kubeconfig, os.environ if environ is None else environ)
    docs: list[dict[str, Any]] = []
    problems: list[str] = []
    for file in files:
        doc, problem = _read(Path(file).expanduser())
        if problem:
            problems.append(f"{file} {problem}")
        else:
            docs.append(doc)
    if not docs:
        return "; ".join(problems) if problems else f"{named} names no file"
    unreadable = [p for p in problems if not p.endswith("does not exist")]
    if unreadable:
        return "; ".join(unreadable)
    names: list[str] = []
    current = ""
    for doc in docs:
        for entry in doc.get("contexts") or []:
            name = entry.get("name") if isinstance(entry, dict) else None
            if isinstance(name, str) and name not in names:
                names.append(name)
        if not current and isinstance(doc.get("current-context"), str):
            current = doc["current-context"]
    where = files[0] if len(files) == 1 else named
    if context is not None and context not in names:
        return f"context {context} is not in {where} ({_listed(names)})"
    if context is None and not current:
        return f"{where} sets no current-context: name one with --context ({_listed(names)})"
    if context is None and current not in names:
        return (f"the current-context {current} of {where} is not one of its contexts "
                f"({_listed(names)})")
    return (f"the cluster or user of context {context or current} in {where} is missing or "
            "invalid (check its server, certificate and credential entries)")
