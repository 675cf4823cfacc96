"""The validated-chain cache: a chain file's bytes that validated once are not parsed and
validated again until they, or the rules, change (docs/chain-file.md "Validated-chain cache").

Why: parsing a chain file with line numbers (ruamel's pure-Python round-trip parser) and
validating it (jsonschema) costs ~10× what building the Chain from plain data costs, and
``rotate list`` — like every command — validates fully. Most invocations read a
file that has not changed since the last one.

What an entry holds: the file's content as plain JSON data, exactly what
:func:`~rotate.chain.loader.validated_data` returned for it — so never more than the chain
file itself with its ``${VAR}`` references expanded, which by design holds no secret value
(values come from Secrets and from environment variables named in it; a ``literal`` or an
expanded variable is a plain value the plan shows). Only a
file that validated is stored; a file with problems is parsed and reported in full every
time, exactly as without the cache.

When an entry counts (all must hold, else it is ignored and the file is validated in full):

- its name and its recorded key are the key of *this* load: the sha256 of the file's bytes,
  the file's resolved path (the Chain holds absolute paths, schema files are relative to
  it), the values of the environment variables the file references (``${VAR}``,
  rotate.chain.envvars: the entry holds the expanded data), rotate's version, and the
  sha256 of the validation rules — every source file of ``rotate.chain`` and
  ``rotate.core`` (the only layers the validation can use, by the import contracts; the
  JSON Schema is one of them) and the installed ruamel.yaml and jsonschema
  (path, size and mtime of their package files);
- it is a regular file owned by this user, in a directory owned by this user, neither
  writable by group or others (another user's file is never trusted);
- it parses, and the digest of its data matches the digest recorded with it (a truncated
  or edited entry is ignored);
- every service's schema file still exists and is JSON (the one check that depends on
  other files, repeated on every hit).

Entries are written atomically (a temporary file renamed into place, mode 0600, directory
0700); any failure to read or write the cache is silent: it only costs the speed.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from rotate import __version__
from rotate.chain import methods
from rotate.chain.envvars import referenced_names
from rotate.chain.loader import build_chain, validated_data
from rotate.chain.method_schema import named_methods
from rotate.chain.model import Chain
from rotate.chain.problems import schema_file_problem
from rotate.chain.yaml_reader import read_chain_bytes

FORMAT = "rotate-chain-cache/1"
#: entries kept; the oldest (by modification time) go when a new one is written
MAX_ENTRIES = 64
#: the third-party libraries whose behaviour decides whether a file validates
_LIBRARIES = ("ruamel.yaml", "jsonschema")
_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # rotate/


def default_cache_dir(environ: Mapping[str, str]) -> Path | None:
    """``$XDG_CACHE_HOME/rotate/chains`` (an absolute XDG_CACHE_HOME only, as the XDG spec
    says), else ``$HOME/.cache/rotate/chains``, else None: no cache."""
    xdg = environ.get("XDG_CACHE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "rotate" / "chains"
    home = environ.get("HOME", "")
    if home and Path(home).is_absolute():
        return Path(home) / ".cache" / "rotate" / "chains"
    return None


def load_chain_cached(
    path: Path, cache_dir: Path | None, environ: Mapping[str, str] | None = None
) -> Chain:
    """:func:`rotate.chain.loader.load_chain`, with the parse and the validation skipped when
    ``cache_dir`` holds a valid entry for these bytes under these rules and these values of
    the variables the file references. Same Chain, same ChainFileError (the bytes are read,
    and refused, by the loader's own reader)."""
    env = os.environ if environ is None else environ
    raw = read_chain_bytes(path)
    if cache_dir is None:
        return build_chain(validated_data(path, raw, env), path)
    resolved = path.resolve()
    key = entry_key(raw, resolved, env)
    data = _cached_data(cache_dir, key)
    if data is not None and _schema_files_ok(data, resolved.parent) and _builtins_only(data):
        try:
            return build_chain(data, path)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            pass  # an entry that does not build is not ours: validate in full
    data = validated_data(path, raw, env)
    chain = build_chain(data, path)
    _store(cache_dir, key, data)
    return chain


def _builtins_only(data: dict[str, Any]) -> bool:
    """Whether every ``apply:`` names a built-in method.  A plug-in's fields and rules come
    from another distribution, which the rules digest does not cover (it may be upgraded or
    removed): a file naming one is validated in full every time."""
    return all(spec is not None and spec.builtin
               for spec in (methods.registered_spec(name) for _, name in named_methods(data)))


def entry_key(raw: bytes, resolved: Path, environ: Mapping[str, str] | None = None) -> str:
    """The key of an entry (module docstring): these bytes, at this place, under these rules,
    with these values of the environment variables the bytes reference (an entry holds the
    expanded data, so a changed value must never find it)."""
    env = os.environ if environ is None else environ
    digest = hashlib.sha256()
    for part in (FORMAT, __version__, rules_digest(), str(resolved),
                 hashlib.sha256(raw).hexdigest(), _variables_digest(raw, env)):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()


def _variables_digest(raw: bytes, environ: Mapping[str, str]) -> str:
    """sha256 over each referenced name and its value, or its absence."""
    digest = hashlib.sha256()
    for name in referenced_names(raw):
        value = environ.get(name)
        digest.update(name.encode("ascii") + (b"\1" + value.encode("utf-8", "surrogateescape")
                                              if value is not None else b"\2") + b"\0")
    return digest.hexdigest()


def rules_digest() -> str:
    """sha256 of what decides whether a file validates: the sources of rotate.chain and
    rotate.core (schema included) and the package files of ruamel.yaml and jsonschema."""
    digest = hashlib.sha256()
    for layer in ("chain", "core"):
        for source in sorted((_PACKAGE_DIR / layer).iterdir()):
            if source.suffix in (".py", ".json") and source.is_file():
                digest.update(f"{layer}/{source.name}\0".encode())
                digest.update(source.read_bytes())
    for library in _LIBRARIES:
        digest.update(f"{library}\0{_library_stamp(library)}\0".encode("utf-8",
                                                                       "surrogateescape"))
    return digest.hexdigest()


def _library_stamp(name: str) -> str:
    """Where a library is installed and when: an upgrade rewrites its files (not imported)."""
    try:
        spec = find_spec(name)
    except (ImportError, ValueError):
        return "absent"
    origin = spec.origin if spec is not None else None
    if not origin:
        return "absent"
    try:
        st = os.stat(origin)
    except OSError:
        return "absent"
    return f"{origin}:{st.st_size}:{st.st_mtime_ns}"


def _data_digest(data: Any) -> str:
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)  # ASCII: \u escapes
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _private(st: os.stat_result) -> bool:
    """Owned by this user and writable by nobody else."""
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _cached_data(cache_dir: Path, key: str) -> dict[str, Any] | None:
    """The data of the entry for ``key``, or None: absent, foreign, corrupt, or not ours."""
    try:
        if not _private(os.lstat(cache_dir)):
            return None
        fd = os.open(cache_dir / f"{key}.json", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not (stat.S_ISREG(st.st_mode) and _private(st)):
                return None
            entry = json.loads(fh.read())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != key:
        return None
    data = entry.get("data")
    try:
        if not isinstance(data, dict) or entry.get("data_sha256") != _data_digest(data):
            return None
    except ValueError:  # NaN/Infinity: never written by _store
        return None
    return data


def _schema_files_ok(data: dict[str, Any], base: Path) -> bool:
    services = data.get("services")
    if not isinstance(services, dict):
        return True
    for service in services.values():
        schema = service.get("schema") if isinstance(service, dict) else None
        if isinstance(schema, str) and schema and schema_file_problem(base / schema):
            return False  # the full validation words it, with its line
    return True


def _store(cache_dir: Path, key: str, data: dict[str, Any]) -> None:
    """Write the entry for ``key`` atomically, when the data survives JSON unchanged; then
    drop the oldest entries beyond MAX_ENTRIES. Silent on any failure."""
    try:
        digest = _data_digest(data)
        text = json.dumps({"format": FORMAT, "key": key, "data_sha256": digest, "data": data},
                          allow_nan=False)
        if json.loads(text)["data"] != data:
            return
    except (TypeError, ValueError):
        return  # something JSON cannot hold as it is (a tagged scalar): not cached
    try:
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(os.lstat(cache_dir)):
            return
        _write_atomically(cache_dir / f"{key}.json", text.encode("ascii"))
        _prune(cache_dir)
    except OSError:
        return


def _write_atomically(target: Path, content: bytes) -> None:
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _prune(cache_dir: Path) -> None:
    entries = [p for p in cache_dir.glob("*.json") if not p.name.startswith(".")]
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda p: p.stat().st_mtime_ns)
    for old in entries[:len(entries) - MAX_ENTRIES]:
        old.unlink(missing_ok=True)
