"""The rotator Job's cases of the fault matrix (bench/fault_job.py): every job fault in each
phase it names, the deleted Job and both signals at provider.apply, each recovered by resume
and by rollback, with names that say so."""

from __future__ import annotations

from rotate_lab.faults import FAULT_KINDS

from bench.fault_job import FAULTS, JOB, job_specs


def test_every_job_case_is_recovered_both_ways_under_a_distinct_name() -> None:
    specs = job_specs()
    names = [s.name for s in specs]
    assert len(names) == len(set(names))
    assert all(s.credential == JOB and s.tagged for s in specs)
    per_recovery = 1 + 2 + sum(len(phases) for phases in FAULTS.values())
    for how in ("resume", "rollback"):
        assert len([n for n in names if n.endswith(f"→ {how}")]) == per_recovery
    assert f"[{JOB}] human deletes the rotator Job at provider.apply → resume" in names
    assert f"[{JOB}] fault rotator-fail test before → rollback" in names
    assert f"[{JOB}] kill at provider.apply → resume" in names


def test_the_job_faults_are_lab_faults() -> None:
    assert set(FAULTS) <= set(FAULT_KINDS)
