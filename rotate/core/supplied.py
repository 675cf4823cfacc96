"""A new credential value supplied by an operator (``--value-stdin``), checked before use.

Everything here runs before the engine is called, so a refused value changes nothing
(exit 2). What is refused, and why:

* not UTF-8 — every hop (OpenBao's JSON API, the Secret, the Config Center document) carries
  text; a byte string would be mangled on the way and differ between hops;
* empty — it would lock everybody out;
* control characters (Unicode category Cc: NUL, ESC, TAB, DEL, C1) and a byte-order mark —
  terminals, shells, env files and most clients mangle or cut them; a pasted value that
  carries one is almost always a mistake;
* longer than :data:`MAX_VALUE_BYTES` — OpenBao's raft storage refuses an entry over 1 MiB
  (``max_entry_size``, the whole KV version), a Kubernetes Secret is at most 1 MiB, the
  Config Center takes 1 MiB bodies, and a document may hold the value several times,
  percent-encoded in a URL (up to 3×). 64 KiB keeps every hop well inside its limit.

Characters a consumer's schema refuses are preflight's to find (``document.valid``, exit 3):
that needs the schemas and the cluster. Messages never contain the value.
"""

from __future__ import annotations

import unicodedata

from rotate.core.errors import UsageError
from rotate.core.secret import Secret

MAX_VALUE_BYTES = 64 * 1024
_HINT = "pipe the value in, e.g. `rotate NAME --confirm --value-stdin < file`"


def _refuse(reason: str, hint: str | None = None) -> UsageError:
    return UsageError(f"--value-stdin: {reason}; nothing was changed", hint=hint)


def strip_line_end(raw: bytes) -> bytes:
    """One line as read from stdin, without its ``\\n`` or ``\\r\\n``."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw


def accept(raw: bytes) -> Secret:
    """``raw`` (the line, without its line end) as a Secret, or UsageError saying why not."""
    if not raw:
        raise _refuse("refusing an empty value", _HINT)
    if len(raw) > MAX_VALUE_BYTES:
        raise _refuse(f"the value is longer than {MAX_VALUE_BYTES} bytes (OpenBao, the "
                      "Kubernetes Secret and the Config Center each cap what they store)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse(f"the value is not valid UTF-8 (at byte {exc.start})") from None
    for i, ch in enumerate(text, start=1):
        if unicodedata.category(ch) == "Cc" or ch == "\ufeff":
            raise _refuse(f"the value holds a control character (U+{ord(ch):04X}) at "
                          f"character {i}")
    return Secret(text)
