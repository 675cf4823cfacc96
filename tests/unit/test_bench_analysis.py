"""The rotation benchmark's pure parts: windows, critical path, table, watch-event reading."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench import analysis, chain_params, observed, timeline
from bench.measure import journal_steps, run_command, runbook_steps


def samples(service: str, spec: list[tuple[float, bool]]) -> list[analysis.Sample]:
    return [analysis.Sample(service, t, ok, 0.01) for t, ok in spec]


def test_window_is_first_to_last_failure_per_service() -> None:
    got = analysis.outcomes(
        samples("cart", [(0.0, True), (1.0, False), (1.5, True), (4.25, False), (5.0, True)])
        + samples("user", [(0.0, True), (1.0, True)]),
        services=["cart", "user", "review"])
    assert got["cart"].failed == 2 and got["cart"].requests == 5
    assert got["cart"].window == pytest.approx(3.25)
    assert got["user"].failed == 0 and got["user"].window == 0.0
    assert got["review"].requests == 0  # a named service without samples still appears


def test_makespan_packs_rollouts_onto_the_slots_in_order() -> None:
    assert analysis.makespan([4.0, 3.0, 5.0], 3) == 5.0
    assert analysis.makespan([4.0, 3.0, 5.0], 1) == 12.0
    assert analysis.makespan([4.0, 3.0, 5.0, 1.0], 2) == 8.0  # 5 waits for the 3 to finish
    assert analysis.makespan([], 3) == 0.0
    with pytest.raises(ValueError):
        analysis.makespan([1.0], 0)


def test_critical_path_sums_the_chain_and_is_unknown_when_a_part_was_not_seen() -> None:
    cp = analysis.CriticalPath(1.0, 3.5, (4.0, 2.0, 5.0), 3, 0.002)
    assert cp.total == pytest.approx(1.0 + 3.5 + 5.0 + 0.002)
    assert analysis.CriticalPath(None, 3.5, (4.0,), 3, 0.002).total is None


def _result(kind: str, i: int, wall: float, cart_fails: int) -> analysis.RunResult:
    spec = [(float(t), t >= cart_fails) for t in range(cart_fails + 2)]
    return analysis.RunResult(kind, i, wall, 0, analysis.CriticalPath(1, 3, (5,), 3, 0.0),
                              analysis.outcomes(samples("cart", spec), ["cart", "review"]))


def test_summary_pairs_each_run_with_its_runbook_twin_and_takes_medians() -> None:
    results = [_result("rotate", 0, 18.0, 3), _result("rotate", 1, 9.0, 5),
               _result("rotate", 2, 10.0, 4), _result("runbook", 0, 20.0, 9),
               _result("runbook", 1, 30.0, 9), _result("runbook", 2, 20.0, 9)]
    rows = {r.kind: r for r in analysis.summarize(results, ["cart", "review"])}
    rot = rows["rotate"]
    assert rot.wall == 10.0 and rot.runs == 3
    assert rot.vs_critical == pytest.approx(10.0 / 9.0)
    assert rot.vs_runbook == pytest.approx(0.5)  # median of 0.9, 0.3, 0.5
    assert rot.failed == {"cart": 4, "review": 0}
    assert rot.windows["cart"] == pytest.approx(3.0)
    assert rows["runbook"].vs_runbook == pytest.approx(1.0)
    table = analysis.render_table(list(rows.values()), ["cart", "review"])
    assert "| rotate | 3 | 10.0 s | 1.11 | 0.50 | **4**: cart 4, 1 others 0 |" in table
    assert table.count("\n") == 3  # header, rule, two rows


@dataclass(frozen=True)
class Ev:
    at: float
    type: str
    obj: dict[str, Any]


def pod(name: str, app: str, created: str, ready: bool, deleting: bool = False) -> dict[str, Any]:
    md: dict[str, Any] = {"namespace": "shop", "name": name, "labels": {"app": app},
                          "creationTimestamp": created}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    return {"metadata": md, "status": {"conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}


def test_pod_lives_and_the_new_pods_rollout_from_watch_events() -> None:
    old = "2026-01-01T00:00:00Z"  # long before the watch
    start = 1767225700.0  # 2026-01-01T00:01:40Z
    events = [
        Ev(start, "ADDED", pod("cart-a", "cart", old, True)),
        Ev(start + 5.0, "ADDED", pod("cart-b", "cart", "2026-01-01T00:01:45Z", False)),
        Ev(start + 9.5, "MODIFIED", pod("cart-b", "cart", "2026-01-01T00:01:45Z", True)),
        Ev(start + 9.6, "MODIFIED", pod("cart-a", "cart", old, True, deleting=True)),
        Ev(start + 10.0, "DELETED", pod("cart-a", "cart", old, True, deleting=True)),
    ]
    lives = {p.name: p for p in observed.pod_lives(events, start)}
    assert lives["cart-a"].created is None and lives["cart-a"].gone == start + 9.6
    assert lives["cart-b"].start_to_ready == pytest.approx(4.5)
    newest = observed.newest_pod(list(lives.values()), "shop", "cart", start + 1)
    assert newest is not None and newest.start_to_ready == 4.5
    assert observed.newest_pod(list(lives.values()), "shop", "user", start) is None


def es(force: str, refresh: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "df", "name": "pw", "annotations": {"force-sync": force}},
            "status": {"refreshTime": refresh}}


def test_eso_reaction_runs_from_the_annotation_change_to_the_refresh() -> None:
    events = [Ev(10.0, "ADDED", es("", "t0")), Ev(12.0, "MODIFIED", es("1", "t0")),
              Ev(13.25, "MODIFIED", es("1", "t1"))]
    got = observed.eso_reaction(events, "df", "pw")
    assert got is not None and got.seconds == pytest.approx(1.25)
    assert observed.eso_reaction(events[:2], "df", "pw") is None


def test_the_runbooks_document_change_is_derived_from_the_chain_values() -> None:
    values = {"/service/name": {"literal": "cart"},
              "/dragonfly/password": {"secretKey": {"namespace": "df", "name": "s",
                                                    "key": "password"}},
              "/dragonfly/url": {"template": 'redis://:{/dragonfly/password}@{/dragonfly/host}'}}
    got = chain_params.doc_filter(values, "df", "s", "password")
    assert got == ('.dragonfly.password = $pw | .dragonfly.url = '
                   '"redis://:\\(.dragonfly.password)@\\(.dragonfly.host)"')
    assert chain_params.doc_filter(values, "df", "other", "password") == ""
    assert chain_params.jq_path("/a-b/c") == '.["a-b"].c'


def test_runbook_step_marks_pair_up(tmp_path: Path) -> None:
    marks = tmp_path / "steps.txt"
    marks.write_text("10.0 start sync df/pw\n11.5 end sync df/pw\n12.0 start provider.restart "
                     "df/df\n")
    steps = runbook_steps(marks)
    assert [(s.kind, s.end - s.start) for s in steps] == [("sync", 1.5)]


def test_timeline_is_well_formed_svg_with_a_tick_per_failure() -> None:
    p = observed.PodLife("shop", "cart-b", "cart", 5.0, 9.0, None)
    panel = timeline.Panel("rotate", 0.0, 20.0, (1.0, 15.0),
                           [timeline.Step("sync.wait", "df/pw", 2.0, 3.0)], [p],
                           {"cart": [6.0, 6.05, 7.0]}, ["cart", "review"])
    root = ET.fromstring(timeline.render([panel], "heading <&>"))
    ticks = [e for e in root.iter("{http://www.w3.org/2000/svg}line")
             if e.get("stroke") == "#d7191c"]
    assert len(ticks) == 3


def test_journal_steps_start_with_the_cli_start_up(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "journal.jsonl").write_text(
        '{"ts": "2026-01-01T00:00:02Z", "event": "run.start", "data": {}}\n'
        '{"ts": "2026-01-01T00:00:02Z", "event": "step.start", "index": 1, "kind": '
        '"sync.wait", "target": "df/pw", "data": {}}\n'
        '{"ts": "2026-01-01T00:00:03.5Z", "event": "step.done", "index": 1, "kind": '
        '"sync.wait", "target": "df/pw", "data": {}}\n')
    began = 1767225600.0 + 0.5  # 2026-01-01T00:00:00.5Z
    steps = journal_steps(tmp_path, began, began + 4.0)
    assert [(s.kind, round(s.end - s.start, 2)) for s in steps] == [
        ("start-up+plan", 1.5), ("sync.wait", 1.5), ("exit", 1.0)]


def test_critical_path_line_names_its_parts() -> None:
    line = analysis.render_critical_path([_result("rotate", 0, 18.0, 3)])
    assert line.startswith("critical path, in order (median of 1 runs): 9.00 s = ESO reaction "
                           "1.00 + provider change (rollout) 3.00")


def test_prepared_critical_path_counts_pod_starts_then_the_catch_up() -> None:
    """rotate's restart order: the consumers' pods start before the switch (packed onto the
    slots), then only the catch-up after the provider's change is on the path."""
    cp = analysis.CriticalPath(1.0, 0.4, (6.0, 6.0, 6.0, 6.0), 2, 0.01, provider_how="live",
                               prepared=True, consumer_starts=(2.0, 3.0, 2.0, 1.0),
                               catch_up=0.9)
    assert cp.consumers == pytest.approx(4.0 + 0.9)  # slots: 2+2, 3+1
    assert cp.total == pytest.approx(1.0 + 4.9 + 0.4 + 0.01)
    assert analysis.CriticalPath(1.0, 0.4, (), 2, 0.01, prepared=True).total is None
    result = analysis.RunResult("rotate", 0, 7.0, 0, cp, {})
    line = analysis.render_critical_path([result])
    assert "critical path, prepared" in line and "provider change (live) 0.40" in line
    assert "catch-up 0.90" in line


def test_a_critical_path_prepared_during_esos_reaction_takes_the_longer_of_the_two() -> None:
    """Consumers prepared beside sync.wait: ESO's reaction and the pod starts both begin
    after the backend write, so only the longer of them is on the path — a stricter floor
    than their sum, which the line still shows for comparison with earlier runs."""
    cp = analysis.CriticalPath(1.2, 0.4, (6.0,) * 4, 2, 0.01, provider_how="live",
                               prepared=True, consumer_starts=(2.0, 3.0, 2.0, 1.0),
                               catch_up=0.9, beside_eso=True)
    assert cp.in_sequence == pytest.approx(1.2 + 4.0 + 0.9 + 0.4 + 0.01)
    assert cp.total == pytest.approx(4.0 + 0.9 + 0.4 + 0.01)  # the starts outlast ESO
    slow_eso = analysis.CriticalPath(5.0, 0.4, (), 2, 0.01, prepared=True,
                                     consumer_starts=(2.0, 3.0), catch_up=0.9,
                                     beside_eso=True)
    assert slow_eso.total == pytest.approx(5.0 + 0.9 + 0.4 + 0.01)
    line = analysis.render_critical_path([analysis.RunResult("rotate", 0, 7.0, 0, cp, {})])
    assert line.startswith("critical path, prepared during ESO's reaction (median of 1 runs): "
                           "5.31 s = the longer of ESO reaction 1.20 and consumer pod starts "
                           "at max-parallel 2 4.00")
    assert line.endswith("the same parts one after the other (the earlier definition): 6.51 s")


def test_pod_lives_record_when_every_container_started() -> None:
    start = 1767225700.0
    fresh = "2026-01-01T00:01:45Z"

    def with_started(flag: bool) -> dict[str, Any]:
        p = pod("cart-b", "cart", fresh, False)
        p["status"]["containerStatuses"] = [{"name": "a", "started": True},
                                            {"name": "b", "started": flag}]
        return p

    events = [Ev(start + 5.0, "ADDED", with_started(False)),
              Ev(start + 6.0, "MODIFIED", with_started(True)),
              Ev(start + 9.0, "MODIFIED", pod("cart-b", "cart", fresh, True))]
    (life,) = observed.pod_lives(events, start)
    assert life.started == start + 6.0 and life.ready == start + 9.0


def test_busy_time_counts_parallel_steps_once_and_sequential_ones_summed() -> None:
    assert analysis.busy_time([(0.0, 5.0), (0.0, 4.0), (1.0, 6.0)]) == 6.0
    assert analysis.busy_time([(0.0, 1.0), (5.0, 6.5), (10.0, 10.5)]) == 3.0
    assert analysis.busy_time([]) == 0.0


def test_a_commands_cpu_time_counts_the_children_it_waited_for(tmp_path: Path) -> None:
    # the runbook is bash running bao/kubectl/curl: their CPU is the runbook's
    burn = (f"{sys.executable} -c 'import time\nt = time.process_time()\n"
            "while time.process_time() - t < 0.3: pass'")
    with open(tmp_path / "log", "w") as log:
        code, cpu = run_command(["bash", "-c", f"{burn}; exit 3"], dict(os.environ), log)
    assert code == 3
    assert cpu >= 0.3


def test_the_machines_busy_fraction_is_the_busy_share_of_the_ticks_between_two_readings() -> None:
    from bench.measure import busy_between, cpu_ticks
    assert busy_between((10, 100), (40, 160)) == 0.5
    assert busy_between((10, 100), (10, 100)) is None  # no time passed: no figure
    assert busy_between(None, (40, 160)) is None
    first = cpu_ticks()
    assert first is not None and 0 <= first[0] <= first[1]  # Linux: /proc/stat is there
    spent = time.process_time() + 0.05
    while time.process_time() < spent:  # burn a little CPU: some tick must be busy
        pass
    second = cpu_ticks()
    busy = busy_between(first, second)
    assert busy is None or 0 < busy <= 1


def test_the_pod_log_has_the_servers_view_of_each_pod_event(tmp_path: Path) -> None:
    from bench.measure import write_pod_log
    from bench.world import Event
    pod = {"metadata": {"namespace": "shop", "name": "cart-1"},
           "status": {"phase": "Running", "containerStatuses": [
               {"started": True, "ready": False}, {"started": False, "ready": False}]}}
    gone = {"metadata": {"namespace": "shop", "name": "cart-0",
                         "deletionTimestamp": "2026-12-03T17:00:00Z"}, "status": {}}
    out = tmp_path / "rotate-0.pods.csv"
    write_pod_log(out, [Event(12.5, "MODIFIED", pod), Event(13.0, "DELETED", gone)])
    assert out.read_text().splitlines()[1:] == [
        "12.500,MODIFIED,shop/cart-1,Running,true/false,false/false,false",
        "13.000,DELETED,shop/cart-0,,,,true"]


def test_the_start_up_floor_line_sets_rotates_start_up_beside_the_floor() -> None:
    from bench.floor import Floor, render
    line = render([Floor(1.0, 0.5), Floor(1.2, 0.6), Floor(0.8, 0.4)], [2.0, 2.4, 1.8])
    assert "wall 1.00 s (1.00 / 1.20 / 0.80), CPU 0.50 s" in line
    assert "rotate's start-up+plan 2.00 s = 2.00 × the floor" in line
    assert render([], [2.0]) == ""


def test_the_headroom_line_says_what_the_bar_leaves_once_the_floor_is_paid() -> None:
    from bench.floor import Floor, render_headroom
    # run 1: cp 8 s, floor 1.0 s -> 1.125 x; 1.2 x leaves 1.6 - 1.0 = 0.6 s
    # run 2: cp 10 s, floor 2.5 s -> 1.25 x; the imports alone exceed the bar by 0.5 s
    # run 3: no critical path observed -> left out
    line = render_headroom([Floor(1.0, 0.5), Floor(2.5, 0.6), Floor(1.0, 0.4)],
                           [8.0, 10.0, None])
    assert "critical path: 1.12 / 1.25 × it" in line
    assert "beyond its imports: +0.60 / -0.50 s" in line
    assert render_headroom([], [8.0]) == ""
    assert render_headroom([Floor(1.0, 0.5)], [None]) == ""


def test_the_start_up_floor_imports_every_library_rotate_is_built_on() -> None:
    # the floor is honest only if it imports what rotate's adapters import: run it here
    from bench.floor import IMPORTS
    from bench.startup import venv_python
    done = subprocess.run([venv_python(), "-c", IMPORTS + "; import sys; print(sorted(m for m in "
                           "('kubernetes.client.api_client', 'hvac', 'httpx', 'redis', "
                           "'jsonschema', 'typer', 'rich.console', 'ruamel.yaml') "
                           "if m not in sys.modules))"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
