"""bench.reaction: the time before the consumers' new pods exist, split from world timings."""

from __future__ import annotations

from bench import reaction
from bench.analysis import CriticalPath
from bench.measure import Segment
from bench.observed import PodLife
from bench.timeline import Step

STARTED = 100.0


def segment(steps: list[Step], pods: list[PodLife]) -> Segment:
    return Segment("rotate", 0, 95.0, STARTED, 110.0, 112.0, 0, (), pods, steps,
                   CriticalPath(1.0, 0.1, (), 10, 0.001))


def restart(app: str, start: float) -> Step:
    return Step("consumer.restart", f"deployment/shop/{app}", start, start + 5.0)


def test_reactions_count_from_each_restart_to_its_new_pod() -> None:
    seg = segment(
        [Step("start-up+plan", "", STARTED, 101.0), restart("cart", 101.2),
         restart("order", 101.3)],
        [PodLife("shop", "cart-old", "cart", 90.0, 91.0, None, 91.0),  # before the run
         PodLife("shop", "cart-new", "cart", 101.3, 107.0, None, 105.0),
         PodLife("shop", "order-new", "order", 101.8, 107.5, None, 106.5)])

    r = reaction.reaction_of(seg, ["shop/cart", "shop/order", "shop/user"])

    assert r is not None
    assert round(r.first_restart, 3) == 1.2
    assert [round(x, 3) for x in r.reactions] == [0.1, 0.5]
    assert r.last_started is not None
    name, took, created = r.last_started  # order's pod started last
    assert (name, round(took, 3), round(created, 3)) == ("shop/order", 0.5, 1.8)
    line = reaction.render([r])
    assert "first consumer.restart 1.20 s" in line and "max 0.50 s" in line
    assert "last pod to start (shop/order) was created 1.80 s" in line


def test_a_run_without_consumer_restarts_has_no_line() -> None:
    seg = segment([Step("consumer.wait", "deployment/shop/cart", 101.0, 102.0)], [])
    assert reaction.reaction_of(seg, ["shop/cart"]) is None
    assert reaction.render([None]) == ""
