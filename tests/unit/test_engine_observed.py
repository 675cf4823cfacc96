"""A fresh run acts on what its preflight read (rotate.engine.kinds.base.Run.observed).

The document write compares the credential's pointers with the version its plan line shows,
so a document whose owned pointers someone else changed after preflight is refused, not
overwritten.  Tokens: the newest mint wins — a token minted before the run's own is revoked
with the ones preflight saw, a token minted after it is not the run's to revoke.  On the
fakes: the other writer acts at the run's backend write, after preflight and before the
consumers' steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rotate.core.secret import Secret
from tests.fakes import World
from tests.support.engine import (
    options,
    run,
)

KEY = ("cart", "bootstrap")


def at_backend_write(world: World, act: Callable[[], None]) -> None:
    """Run ``act`` once, as the run writes the backend (its first change, after preflight)."""
    write = world.vault.write
    fired: list[bool] = []

    def act_then_write(path: str, data: Mapping[str, Secret], *, cas: int) -> int:
        if not fired:
            fired.append(True)
            act()
        return write(path, data, cas=cas)

    world.vault.write = act_then_write  # type: ignore[method-assign]


def test_a_document_written_after_preflight_is_not_overwritten(world: World,
                                                               tmp_path: Path) -> None:
    before = world.cc.get_version_number(*KEY)
    assert before is not None
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    write = next(s for s in plan.steps if s.kind == "config.write" and s.subject == "cart")
    assert f"If-Match {before}" in write.detail
    theirs: dict[str, Any] = {"written": "by someone else"}
    at_backend_write(world, lambda: world.cc.put_key(*KEY, theirs, if_match=before))

    report = run(world, tmp_path)

    assert report.exit_code == 13, report.message  # config.write failed
    failed = next(s for s in report.steps if s.status == "failed")
    assert (failed.kind, failed.target.split(" ")[0]) == ("config.write", "shop/cart")
    assert "/dragonfly/password" in report.message and "nothing written" in report.message
    doc = world.cc.get_key(*KEY)
    assert (doc.version, doc.value) == (before + 1, theirs)


def test_a_token_minted_before_the_runs_own_is_revoked(world: World, tmp_path: Path) -> None:
    seen = {t.id for t in world.cc.list_tokens("cart") if not t.revoked}
    assert seen
    theirs: list[str] = []
    at_backend_write(world, lambda: theirs.append(world.cc.mint_token("cart", "someone").id))

    report = run(world, tmp_path)

    assert report.exit_code == 0, report.message
    live = {t.id for t in world.cc.list_tokens("cart") if not t.revoked}
    assert theirs and theirs[0] not in live  # older than the run's: one live token
    assert not seen & live and len(live) == 1


def test_a_token_minted_after_the_runs_own_is_not_revoked(world: World,
                                                          tmp_path: Path) -> None:
    """A newer token is another minter's, on its way into the Secret: it revokes ours."""
    theirs: list[str] = []
    put = world.cc.put_key

    def mint_then_put(*a: Any, **kw: Any) -> int:
        if not theirs:  # config.write runs after the run's token.mint
            theirs.append(world.cc.mint_token("cart", "someone").id)
        return put(*a, **kw)

    world.cc.put_key = mint_then_put  # type: ignore[method-assign]
    report = run(world, tmp_path)

    assert report.exit_code == 0, report.message
    live = {t.id for t in world.cc.list_tokens("cart") if not t.revoked}
    assert theirs[0] in live and len(live) == 2
