"""The canary's fault cases (docs/reliability.md): ``dragonfly`` (overlap, its default)
in waves ``[[cart], [order, user]]`` behind the canary ``cart``, whose readyz fails
(``readyz-fail``) while it bakes — the run exits 19 before the next wave — then resumed
after the fault is cleared (it bakes again and moves every wave) or rolled back (the canary
restored, the later waves never touched).  The check is the matrix's own (bench/faults.py):
every copy of the value agrees with OpenBao, one live token per consumer.

The chain is a copy of the lab's chain directory with those lines added, named with
``--chain`` by the run and by its recovery.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.fault_matrix import RECOVERIES, Spec
from bench.fault_world import World

#: the bake: long enough for the case to switch the fault on while it runs
BAKE = "30s"
ANCHOR = "        apply: redis-acl\n        user: default\n"
ADDED = ("    waves: [[cart], [order, user]]\n"
         f"    canary: {{consumers: [cart], bake: {BAKE}}}\n")


def canary_specs(credential: str) -> list[Spec]:
    """The canary cart failing its bake, recovered by resume and by rollback."""
    return [Spec("canary", credential, how, kind="canary.bake", fault="readyz-fail",
                 target="cart") for how in RECOVERIES]


def canary_chain(world: World) -> Path:
    """The lab's chain file with ``dragonfly`` in waves behind the canary ``cart``."""
    src = Path(world.env["ROTATE_CHAIN"])
    dst = Path(world.cwd) / "chain-canary"
    if not dst.exists():
        shutil.copytree(src.parent, dst)
    text = src.read_text()
    if ANCHOR not in text:
        raise ValueError("the lab's chain file has no redis-acl provider for dragonfly")
    path = dst / src.name
    path.write_text(text.replace(ANCHOR, ANCHOR + ADDED, 1))
    return path
