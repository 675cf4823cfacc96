"""The rotation strategies (chain.md "Strategies"): the one definition of their names.

``restart``: the new value replaces the old one and everything rolls once.  ``overlap``: the
backend keeps the previous value under a second key while consumers move, then a second phase
retires it.  A ``StrEnum``, so a value is also the plain string the chain file, the plan JSON
and the journal spell.
"""

from __future__ import annotations

from enum import StrEnum


class Strategy(StrEnum):
    restart = "restart"
    overlap = "overlap"
