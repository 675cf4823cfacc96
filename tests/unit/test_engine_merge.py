"""Several credentials as one run: their plans merged (rotate.engine.merge), and the journal
record that names them all (run_start.RunStart, member.Member).

The drafts are written out as each credential's own plan orders them (rotate.engine.plan):
a ``restart`` credential's consumers prepared before its sync wait, an ``overlap`` one's
after its provider took both values.  The merge must keep each credential's order, plan a
shared consumer's own steps once, and put them where every credential it reads allows.
"""

from __future__ import annotations

from typing import Any

import pytest

from rotate.core.errors import UsageError
from rotate.core.strategy import Strategy
from rotate.engine import grouping
from rotate.engine.journal import RunState, StepState
from rotate.engine.kinds import ROTATION, Kind
from rotate.engine.kinds.backend_confirm import BackendConfirm
from rotate.engine.kinds.backend_write import BackendWrite
from rotate.engine.kinds.base import Draft
from rotate.engine.kinds.config_harvest import ConfigHarvest
from rotate.engine.kinds.config_write import ConfigWrite
from rotate.engine.kinds.consumer_restart import ConsumerRestart
from rotate.engine.kinds.consumer_wait import ConsumerWait
from rotate.engine.kinds.provider_apply import ApplyLive
from rotate.engine.kinds.provider_retire import RetireLive
from rotate.engine.kinds.provider_verify import VerifyProvider, VerifyRetired
from rotate.engine.kinds.readyz_check import ReadyzCheck
from rotate.engine.kinds.sync_trigger import SyncTrigger
from rotate.engine.kinds.sync_wait import SyncWait
from rotate.engine.kinds.token_mint import TokenMint
from rotate.engine.kinds.token_revoke import TokenRevoke
from rotate.engine.member import Member
from rotate.engine.merge import distinct, member_state, merge_drafts, number
from rotate.engine.model import PlannedStep
from rotate.engine.run_start import RunStart

Drafts = list[tuple[Kind, Draft]]


def _each(kind: Kind, consumers: tuple[str, ...]) -> Drafts:
    return [(kind, Draft(f"{kind.name} {c}", "", c)) for c in consumers]


def _consumers_prepared(consumers: tuple[str, ...]) -> Drafts:
    return [*_each(TokenMint, consumers), (ConfigHarvest, Draft(", ".join(consumers), "")),
            *_each(ConfigWrite, consumers), *_each(ConsumerRestart, consumers)]


def _consumers_proven(consumers: tuple[str, ...]) -> Drafts:
    return [*_each(ConsumerWait, consumers), *_each(ReadyzCheck, consumers)]


def restart(provider: str, consumers: tuple[str, ...]) -> Drafts:
    """A restart credential's plan: consumers prepared ahead of its sync wait."""
    return [(BackendWrite, Draft("bw", "")), (SyncTrigger, Draft("st", "")),
            *_consumers_prepared(consumers), (SyncWait, Draft("sw", "")),
            (ApplyLive, Draft(provider, "", provider)),
            (VerifyProvider, Draft(provider, "", provider)),
            *_consumers_proven(consumers), *_each(TokenRevoke, consumers),
            (BackendConfirm, Draft("bc", ""))]


def overlap(provider: str, consumers: tuple[str, ...]) -> Drafts:
    """An overlap credential's plan: the provider takes both values, consumers move, the old
    value is retired."""
    return [(BackendWrite, Draft("bw", "")), (SyncTrigger, Draft("st", "")),
            (SyncWait, Draft("sw", "")), (ApplyLive, Draft(provider, "", provider)),
            (VerifyProvider, Draft(provider, "", provider)),
            *_consumers_prepared(consumers), *_consumers_proven(consumers),
            (RetireLive, Draft(provider, "", provider)),
            (VerifyRetired, Draft(provider, "", provider)),
            *_each(TokenRevoke, consumers), (BackendConfirm, Draft("bc", ""))]


DF = ("cart", "order", "user")
PG = ("inventory", "order", "payment", "user")


def _merged(plans: dict[str, Drafts], restart_names: tuple[str, ...]) -> list[PlannedStep]:
    return number(merge_drafts(list(plans.items()), ROTATION, restart=restart_names))


def _at(steps: list[PlannedStep], kind: Kind, subject: str = "",
        credential: str = "") -> list[int]:
    return [s.index for s in steps if s.kind == kind.name and s.phase == kind.phase
            and (not subject or s.subject == subject)
            and (not credential or s.credential == credential)]


CASES = {
    "both restart": ({"dragonfly": restart("df", DF), "postgres": restart("pg", PG)},
                     ("dragonfly", "postgres")),
    "restart and overlap": ({"dragonfly": restart("df", DF), "postgres": overlap("pg", PG)},
                            ("dragonfly",)),
    "both overlap": ({"dragonfly": overlap("df", DF), "postgres": overlap("pg", PG)}, ()),
}


@pytest.mark.parametrize("case", CASES)
def test_each_credential_keeps_its_own_order(case: str) -> None:
    plans, names = CASES[case]
    steps = _merged(plans, names)
    assert [s.index for s in steps] == list(range(1, len(steps) + 1))
    for name, drafted in plans.items():
        mine = [(s.kind, s.subject, s.phase) for s in steps if s.credential == name]
        own = [(k.name, d.subject, k.phase) for k, d in drafted]
        assert mine == [x for x in own if x in mine]  # a subsequence, in order
        # what it lost is only another credential's consumer's own steps
        lost = [x for x in own if x not in mine]
        kinds = {k.name: k for k, _ in drafted}
        assert all(kinds[k].one_per_consumer and subject in DF for k, subject, _ in lost)


@pytest.mark.parametrize("case", CASES)
def test_a_shared_consumer_moves_once_after_every_document_and_before_its_proof(
    case: str
) -> None:
    plans, names = CASES[case]
    steps = _merged(plans, names)
    for svc in sorted({*DF, *PG}):
        restarts = _at(steps, ConsumerRestart, svc)
        assert len(restarts) == 1, (svc, restarts)
        assert len(_at(steps, TokenMint, svc)) == len(_at(steps, TokenRevoke, svc)) == 1
        writes = _at(steps, ConfigWrite, svc)
        assert len(writes) == (2 if svc in ("order", "user") else 1)
        assert max(writes) < restarts[0]
        switches = _at(steps, ApplyLive) + _at(steps, VerifyProvider)
        assert min(_at(steps, ConsumerWait, svc)) > max(switches)
        assert min(_at(steps, ReadyzCheck, svc)) > max(switches)
    # the owner of a shared consumer's steps is the first credential consuming it
    owner = {s.subject: s.credential for s in steps if s.kind == "consumer.restart"}
    assert owner["order"] == owner["user"] == "dragonfly"
    assert {s.credential for s in steps
            if s.subject == "order" and s.kind in ("token.mint", "consumer.wait",
                                                   "readyz.check", "token.revoke")} \
        == {"dragonfly"}


def test_under_restart_every_consumer_is_prepared_beside_the_syncs() -> None:
    plans, names = CASES["both restart"]
    steps = _merged(plans, names)
    restarts = _at(steps, ConsumerRestart)
    waits = _at(steps, SyncWait)
    switches = [s.index for s in steps if s.stage == 3]
    assert max(_at(steps, BackendWrite)) < min(_at(steps, TokenMint))
    assert max(restarts) < min(waits) and max(waits) < min(switches)
    groups = grouping.groups_of(steps)
    first = next(i for i, g in enumerate(groups) if g[0].kind == "token.mint")
    side = grouping.beside(groups, first)
    assert side and grouping.waits(groups, first + side) == 2  # both waits, one side


def test_beside_an_overlap_credential_its_provider_takes_both_values_first() -> None:
    plans, names = CASES["restart and overlap"]
    steps = _merged(plans, names)
    pg_switch = _at(steps, ApplyLive, credential="postgres")
    df_switch = _at(steps, ApplyLive, credential="dragonfly")
    restarts = _at(steps, ConsumerRestart)
    assert pg_switch[0] < min(restarts) < max(restarts) < df_switch[0]
    readyz = _at(steps, ReadyzCheck)
    assert max(readyz) < _at(steps, RetireLive, credential="postgres")[0]
    assert max(_at(steps, RetireLive)) < min(_at(steps, TokenRevoke))
    # the restart credential's consumers still run beside its sync wait
    groups = grouping.groups_of(steps)
    first = next(i for i, g in enumerate(groups) if g[0].kind == "token.mint")
    assert grouping.beside(groups, first)


def test_when_every_credential_overlaps_the_old_values_retire_after_every_consumer() -> None:
    plans, names = CASES["both overlap"]
    steps = _merged(plans, names)
    assert max(_at(steps, VerifyProvider)) < min(_at(steps, TokenMint))
    assert max(_at(steps, ReadyzCheck)) < min(_at(steps, RetireLive))


def test_a_credential_named_twice_is_a_usage_error() -> None:
    assert distinct(["postgres", "dragonfly"]) == ("dragonfly", "postgres")
    with pytest.raises(UsageError, match="dragonfly given more than once"):
        distinct(["dragonfly", "postgres", "dragonfly"])


def _start(steps: list[PlannedStep], **kw: Any) -> RunStart:
    members = (Member("dragonfly", "infra/dragonfly", 4, DF, ("deployment/df/df",)),
               Member("postgres", "infra/postgres", 9, PG, ("statefulset/db/pg",),
                      strategy=Strategy.overlap))
    return RunStart("R", "dragonfly+postgres", "rotate", Strategy.restart, "rotate.yaml",
                    "infra/dragonfly", 4, tuple(sorted({*DF, *PG})), ("a", "b"), tuple(steps),
                    members=members, **kw)


def test_the_run_start_names_every_credential_and_reads_back() -> None:
    plans, names = CASES["restart and overlap"]
    steps = _merged(plans, names)
    start = _start(steps)
    data = start.to_json()
    assert [m["credential"] for m in data["members"]] == ["dragonfly", "postgres"]
    assert all("credential" in s for s in data["steps"])
    back = RunStart.from_json(data)
    assert back == start and back.credentials == ("dragonfly", "postgres")
    pg = back.member("postgres")
    assert (pg.credential, pg.strategy, pg.current_version, pg.consumers) == (
        "postgres", Strategy.overlap, 9, PG)
    # prepared: ahead of a switch, under the step's own credential's strategy
    cr_df = next(s for s in steps if s.kind == "consumer.restart" and s.subject == "order")
    cr_pg = next(s for s in steps if s.kind == "consumer.restart" and s.subject == "payment")
    assert back.prepared(cr_df) and not back.prepared(cr_pg)


def test_a_one_credential_record_keeps_its_shape() -> None:
    step = PlannedStep(1, 1, "backend.write", "secret/infra/dragonfly#password")
    start = RunStart("R", "dragonfly", "rotate", Strategy.restart, "rotate.yaml",
                     "infra/dragonfly", 4, DF, ("a",), (step,))
    data = start.to_json()
    assert "members" not in data and "credential" not in data["steps"][0]
    back = RunStart.from_json(data)
    assert back.members == () and back.credentials == ("dragonfly",)
    assert back.steps[0].credential == ""


def test_a_members_view_of_the_journal_holds_its_steps_and_its_consumers_shared_ones(
) -> None:
    plans, names = CASES["both restart"]
    steps = _merged(plans, names)
    state = RunState("R", _start(steps), [StepState(s) for s in steps], "2026-01-01T00:00:00Z")
    pg = member_state(state, "postgres")
    assert pg.credential == "postgres" and pg.start.consumers == PG
    kinds = {(s.step.kind, s.step.subject, s.step.credential) for s in pg.steps}
    assert ("config.write", "order", "postgres") in kinds
    assert ("consumer.restart", "order", "dragonfly") in kinds  # its consumer, owned there
    assert not any(c == "dragonfly" and k == "config.write" for k, _, c in kinds)


def _state_with(steps: list[PlannedStep], done: set[int]) -> RunState:
    state = RunState("R", _start(steps), [StepState(s) for s in steps], "2026-01-01T00:00:00Z")
    for st in state.steps:
        if st.step.index in done:
            st.status = "done"
            st.data = {"version": 2, "previous_version": 1, "previous_stamp": None}
    return state


def test_a_failure_before_any_switch_undoes_every_credentials_prepared_steps() -> None:
    from rotate.engine.undo import plan_undo

    plans, names = CASES["both restart"]
    steps = _merged(plans, names)
    wait = next(s for s in steps if s.kind == "sync.wait" and s.credential == "postgres")
    state = _state_with(steps, {s.index for s in steps if s.index < wait.index})
    undo = plan_undo(state, wait)
    undone = {(s.kind, s.subject, s.credential) for s in undo.steps}
    assert ("config.undo", "order", "dragonfly") in undone
    assert ("config.undo", "order", "postgres") in undone  # each credential's own pointers
    assert ("consumer.undo", "order", "dragonfly") in undone  # its one restart
    assert all(s.index > len(steps) for s in undo.steps)


def test_once_a_provider_switched_a_failure_undoes_nothing() -> None:
    from rotate.engine.undo import plan_undo

    plans, names = CASES["restart and overlap"]
    steps = _merged(plans, names)
    failed = next(s for s in steps if s.kind == "provider.apply" and s.credential == "dragonfly")
    state = _state_with(steps, {s.index for s in steps if s.index < failed.index})
    assert any(s.kind == "provider.apply" and s.credential == "postgres" and
               s.index < failed.index for s in steps)
    assert plan_undo(state, failed).steps == ()


@pytest.mark.parametrize("case", CASES)
def test_each_credentials_chain_runs_on_its_own_between_the_consumer_barriers(
        case: str) -> None:
    """grouping.chain_run: the stage ①–③ steps between consumer steps, spanning both
    credentials, run as one lane per credential in its own plan order; no consumer step is
    ever in such a run (the barriers keep "after every provider it reads")."""
    plans, names = CASES[case]
    steps = _merged(plans, names)
    groups = grouping.groups_of(steps)
    runs, i = [], 0
    while i < len(groups):
        n = 0 if grouping.beside(groups, i) else grouping.chain_run(groups, i)
        if n:
            runs.append(grouping.by_credential(groups[i:i + n]))
        i += n or 1
    assert runs
    for lanes in runs:
        assert len(lanes) == 2 and {lane[0].credential for lane in lanes} == set(plans)
        for lane in lanes:
            assert [s.index for s in lane] == sorted(s.index for s in lane)
            assert all(s.stage <= 3 and s.credential == lane[0].credential for s in lane)
    first = [[s.kind for s in lane] for lane in runs[0]]
    if case == "both overlap":  # each credential's whole ①–③ before any consumer
        assert first[0] == ["backend.write", "sync.trigger", "sync.wait", "provider.apply",
                            "provider.verify"]
    providers = {"dragonfly": ["df"], "postgres": ["pg"]}
    chained = [g for g in groups if all(s.stage <= 3 for s in g)]
    assert grouping.independent(chained, lambda s: providers[s.credential])
    assert not grouping.independent(chained, lambda s: ["one"])  # a provider in common


def test_a_run_of_one_credential_has_no_chain_run() -> None:
    steps = _merged({"dragonfly": overlap("df", DF)}, ())
    groups = grouping.groups_of(steps)
    assert all(grouping.chain_run(groups, i) == 0 for i in range(len(groups)))
