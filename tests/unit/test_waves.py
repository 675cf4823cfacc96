"""Waves and a canary: the order (rotate.chain.waves), the chain file's checks (exit 2 with
file:line), the plan's order, and a canary whose bake fails (exit 19) on the fakes — later
waves untouched, rollback restoring the canary only, resume baking again."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from importlib.resources import as_file, files
from pathlib import Path

import pytest

from rotate.chain.loader import load_chain
from rotate.chain.model import OverlapConfig
from rotate.chain.waves import Canary, PromQuery, Waves, after_cycle, waves_of, with_canary
from rotate.cli.render_plan import plan_lines
from rotate.core.errors import ChainFileError, TemporaryError, UsageError
from rotate.core.waiting import CancelToken
from rotate.engine.model import Options
from rotate.stages import bake
from tests.fakes import make_chain
from tests.fakes.overlap import OLD, PATH, PREV, OverlapWorld
from tests.support.engine import RecordingObserver, options, resume, rollback

EXPR = "sum(readyz_failures_total)"


def test_explicit_waves_keep_their_order_and_unnamed_consumers_go_last() -> None:
    waves = Waves(explicit=(("user",), ("cart", "ghost")))
    assert waves_of(waves, ["cart", "order", "user"]) == [("user",), ("cart",), ("order",)]


def test_after_dependencies_make_levels() -> None:
    waves = Waves(after={"order": ("cart",), "user": ("order", "cart")})
    assert waves_of(waves, ["cart", "order", "user", "search"]) == [
        ("cart", "search"), ("order",), ("user",)]


def test_the_canary_is_wave_zero_alone() -> None:
    waves = [("cart", "order"), ("user",)]
    assert with_canary(waves, Canary(1, 0)) == [("cart",), ("order",), ("user",)]
    assert with_canary(waves, Canary(("user",), 0)) == [("user",), ("cart", "order")]
    assert with_canary(waves, Canary(("ghost",), 0)) == waves


def test_a_cycle_is_named() -> None:
    assert after_cycle({"a": ("b",), "b": ("c",), "c": ("a",)}) == ("a", "b", "c", "a")
    assert after_cycle({"a": ("b",), "b": ()}) is None


# --------------------------------------------------------------------------- chain file


@pytest.fixture(name="chain_dir")
def _chain_dir(tmp_path: Path) -> Iterator[Path]:
    with as_file(files("rotate_lab.shop") / "ecommerce") as src:
        shutil.copytree(src, tmp_path / "ecommerce")
    yield tmp_path / "ecommerce"


def _with(chain_dir: Path, lines: str) -> Path:
    path = chain_dir / "rotate.yaml"
    text = path.read_text()
    anchor = "        apply: redis-acl\n        user: default\n"
    assert anchor in text
    path.write_text(text.replace(anchor, anchor + lines, 1))
    return path


def test_waves_and_canary_load(chain_dir: Path) -> None:
    path = _with(chain_dir, "    waves: [[cart], [order, user]]\n"
                            "    canary: {consumers: 1, bake: 2m, query: {prometheus: "
                            "{urlEnv: PROM_URL}, expr: 'up', max: 0.5}}\n")
    cred = load_chain(path).credentials["dragonfly"]
    assert cred.waves == Waves(explicit=(("cart",), ("order", "user")))
    assert cred.canary == Canary(1, 120.0, PromQuery("up", 0.5, url_env="PROM_URL"))


@pytest.mark.parametrize(("lines", "words"), [
    ("    waves: {cart: {after: [user]}, user: {after: [cart]}}\n", "form a cycle: cart → user"),
    ("    waves: [[cart], [nosuch]]\n", "unknown consumer 'nosuch'"),
    ("    waves: [[cart], [cart]]\n", "already in wave 1"),
    ("    canary: {consumers: [nosuch], bake: 1s}\n", "unknown consumer 'nosuch'"),
    ("    strategy: restart\n    canary: {consumers: 1, bake: 1s}\n", "need strategy overlap"),
])
def test_bad_waves_name_the_line(chain_dir: Path, lines: str, words: str) -> None:
    path = _with(chain_dir, lines)
    line = path.read_text().splitlines().index(lines.splitlines()[0]) + 1
    with pytest.raises(ChainFileError) as err:
        load_chain(path)
    assert err.value.exit_code == 2
    assert words in str(err.value)
    assert f"rotate.yaml:{line}:" in str(err.value)


# --------------------------------------------------------------------------- bake


def test_a_signal_fails_only_when_bad_twice_in_a_row() -> None:
    seen = iter([None, "HTTP 503", None, "HTTP 503", "HTTP 503"])
    verdict = bake.bake([bake.Signal("readyz x", lambda: next(seen))], 60, CancelToken(),
                        clock=iter(range(0, 100)).__next__)
    assert verdict.failed == "readyz x HTTP 503"
    assert verdict.checks == 5


def test_query_signal_compares_with_max_and_never_passes_unreachable() -> None:
    class Metrics:
        answer: float | Exception | None = 3.0

        def value(self, url: str, expr: str) -> float | None:
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    m = Metrics()
    signal = bake.query_signal(m, "http://127.0.0.1:9", EXPR, 1)
    assert signal.read() == "= 3, above max 1"
    m.answer = None
    assert signal.read() is None  # no data is no breach
    m.answer = TemporaryError("prometheus", "instant query", "unreachable")
    assert signal.read() == "cannot be read: Prometheus unreachable"


# --------------------------------------------------------------------------- engine


@pytest.fixture(name="ow")
def _canary_world(tmp_path: Path) -> Iterator[OverlapWorld]:
    chain = make_chain(tmp_path)
    cred = dataclasses.replace(
        chain.credentials["dragonfly"], strategy="overlap", overlap=OverlapConfig(PREV),
        waves=Waves(after={"user": ("order",)}),
        canary=Canary(("cart",), 0.0, PromQuery(EXPR, 1.0, url="http://127.0.0.1:9")))
    w = OverlapWorld(dataclasses.replace(chain, credentials={"dragonfly": cred}))
    w.setup()
    yield w
    w.kube.close()


def _opts(tmp_path: Path) -> Options:
    return options(tmp_path)


def test_plan_moves_the_canary_then_bakes_then_the_waves(ow: OverlapWorld,
                                                         tmp_path: Path) -> None:
    plan = ow.engine().plan(_opts(tmp_path), "dragonfly")
    fourth = [(s.kind, s.subject) for s in plan.steps if s.stage == 4 and s.phase == "main"
              and s.kind not in ("token.revoke", "backend.confirm")]
    assert fourth[0] == ("config.harvest", "")
    bake_at = fourth.index(("canary.bake", ""))
    assert {subject for _, subject in fourth[1:bake_at]} == {"cart"}
    after = [subject for _, subject in fourth[bake_at + 1:]]
    assert after.index("user") > max(i for i, s in enumerate(after) if s == "order")
    assert plan.to_json()["waves"] == [["cart"], ["order"], ["user"]]
    assert plan.to_json()["canary"]["consumers"] == ["cart"]
    text = "\n".join(plan_lines(plan))
    assert "1 cart (canary, bake 0s) · 2 order · 3 user" in text
    assert "canary.bake" in text


def test_a_failing_canary_stops_before_the_next_wave(ow: OverlapWorld, tmp_path: Path) -> None:
    ow.metrics.values[EXPR] = [5.0]
    report = ow.engine().run(_opts(tmp_path), "dragonfly", RecordingObserver(), CancelToken())
    assert report.exit_code == 19, report.message
    message = report.message or ""
    assert "canary cart failed its bake" in message
    assert f"query `{EXPR}` = 5, above max 1" in message
    assert "later waves (order, user) are untouched" in message
    assert f"rotate rollback {report.run_id} --confirm" in message
    assert f"rotate resume {report.run_id} --confirm" in message
    new = ow.vault.current(PATH, "password")
    assert new not in message
    assert ow.running["cart"] == new
    for name in ("order", "user"):  # never moved: old document, old pods
        assert ow.running[name] == OLD
        assert len(ow.cc.docs[(name, "bootstrap")]) == 1
    assert ow.accepted() == {new, OLD}  # the provider still takes the old value

    rolled = rollback(ow, tmp_path, report.run_id)
    assert rolled.status == "succeeded", rolled.message
    assert ow.running["cart"] == OLD
    assert ow.vault.current(PATH, "password") == OLD
    assert ow.cut_off == []
    assert not any(r.endswith(("/order", "/user")) for r in ow.rollouts), ow.rollouts


def test_resume_bakes_again_then_moves_the_later_waves(ow: OverlapWorld,
                                                       tmp_path: Path) -> None:
    ow.metrics.values[EXPR] = [5.0]
    report = ow.engine().run(_opts(tmp_path), "dragonfly", RecordingObserver(), CancelToken())
    assert report.exit_code == 19
    calls = len(ow.metrics.calls)
    ow.metrics.values[EXPR] = [0.0]  # fixed
    resumed = resume(ow, tmp_path, report.run_id)
    assert resumed.status == "succeeded", resumed.message
    assert len(ow.metrics.calls) > calls  # baked again
    new = ow.vault.current(PATH, "password")
    assert all(ow.running[n] == new for n in ("cart", "order", "user"))
    assert ow.cut_off == []


def test_restart_refuses_waves(ow: OverlapWorld, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="needs strategy overlap"):
        ow.engine().plan(options(tmp_path, strategy="restart"), "dragonfly")


def test_status_counts_pods_from_before_a_rolled_back_excursion() -> None:
    from datetime import UTC, datetime

    from rotate.engine.status_model import pods_since

    def pod(at: str) -> dict[str, object]:
        return {"metadata": {"name": f"p-{at}"}, "status": {"startTime": at}}

    t = [datetime(2026, 12, 5, 4, m, tzinfo=UTC) for m in range(5)]  # v1 t0, v2 t2, v3 t4
    window = (t[0], t[2])  # the value held before v2 (the canary's) until v3 restored it
    assert pods_since([pod("2026-12-05T04:01:00Z")], t[4], "v3", window)[0]
    assert not pods_since([pod("2026-12-05T04:03:00Z")], t[4], "v3", window)[0]  # saw v2
    assert not pods_since([pod("2026-12-05T04:01:00Z")], t[4], "v3")[0]
