"""The one type that may hold a secret value.

Invariant: no code path turns a :class:`Secret` into text except :meth:`Secret.reveal`, and
``reveal`` is called only at the edge where a value must cross a wire (the Vault write, the
Config Center PUT body, the in-process comparison).  ``str``, ``repr``, ``format``, f-strings,
logging and pickling all see a mask, so a secret that leaks into an exception, a log line or
the journal shows up as ``•••• (40 chars)`` instead of the value.

Comparisons are constant-time (``hmac.compare_digest``) so that proving "the Secret holds the
new value" does not leak the value through timing.
"""

from __future__ import annotations

import hmac
import secrets as _secrets
import string
from typing import Any, NoReturn

ALPHABETS: dict[str, str] = {
    "alnum": string.ascii_letters + string.digits,
    "hex": "0123456789abcdef",
    # Punctuation that survives URLs, shells and YAML without quoting.
    "safe-symbols": string.ascii_letters + string.digits + "-_.~",
}


class Secret:
    """A secret string whose textual forms are a mask."""

    __slots__ = ("_value",)
    _value: str

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("Secret holds a str")
        object.__setattr__(self, "_value", value)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError("Secret is immutable")

    def reveal(self) -> str:
        """The plain value. Call only where it must cross a wire."""
        return self._value

    def mask(self) -> str:
        return f"•••• ({len(self._value)} chars)"

    def __str__(self) -> str:
        return self.mask()

    def __repr__(self) -> str:
        return f"Secret({self.mask()})"

    def __format__(self, spec: str) -> str:
        return self.mask()

    def __len__(self) -> int:
        return len(self._value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Secret):
            return hmac.compare_digest(self._value.encode(), other._value.encode())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret cannot be pickled")

    def __getstate__(self) -> NoReturn:
        raise TypeError("a Secret cannot be serialised")


def generate(length: int = 40, alphabet: str = "alnum") -> Secret:
    """A new random value from the OS CSPRNG; ``alphabet``: an ALPHABETS name or the chars."""
    chars = ALPHABETS.get(alphabet, alphabet)
    if length < 8 or len(set(chars)) < 10:
        raise ValueError("refusing to generate a weak secret (length < 8 or alphabet < 10 chars)")
    return Secret("".join(_secrets.choice(chars) for _ in range(length)))


def reveal_tree(value: Any) -> Any:
    """A deep copy of a JSON-like tree with every Secret leaf revealed (for a wire body)."""
    if isinstance(value, Secret):
        return value.reveal()
    if isinstance(value, dict):
        return {k: reveal_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [reveal_tree(v) for v in value]
    return value


def mask_tree(value: Any) -> Any:
    """A deep copy of a JSON-like tree with every Secret leaf masked (for display)."""
    if isinstance(value, Secret):
        return value.mask()
    if isinstance(value, dict):
        return {k: mask_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_tree(v) for v in value]
    return value
