"""The lab's runtime directory (rotate_lab.host.runtime_dir) on its own: made private, found
again from the lab's record, removed once — and never a directory the record merely names.
The whole lab in a private directory: test_lab_lifecycle.py."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from rotate_lab.host import processes, runtime_dir


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for /tmp, so the test leaves nothing there."""
    path = tmp_path / "tmp"
    path.mkdir()
    monkeypatch.setattr(runtime_dir, "BASE", path)
    return path


def test_create_records_a_private_directory_and_remove_deletes_it(
        base: Path, tmp_path: Path) -> None:
    lab = tmp_path / "lab"
    lab.mkdir(mode=0o700)
    made = runtime_dir.create(lab)
    assert made.parent == base and made.name.startswith("rotate-lab-")
    assert stat.S_IMODE(made.stat().st_mode) == 0o711
    assert runtime_dir.recorded(lab) == made
    (made / "pvc" / "db").mkdir(parents=True)
    (made / "pvc" / "db" / "PG_VERSION").write_text("16\n")

    assert runtime_dir.remove(lab) == [f"removed {made}"]
    assert not made.exists() and not (lab / runtime_dir.RECORD).exists()
    assert runtime_dir.remove(lab) == []  # idempotent


@pytest.mark.parametrize("named", ["elsewhere", "tmp/not-ours", "tmp/rotate-lab-link"])
def test_remove_never_deletes_what_the_record_merely_names(base: Path, tmp_path: Path,
                                                           named: str) -> None:
    lab = tmp_path / "lab"
    lab.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("precious")
    target = tmp_path / named
    if named.endswith("link"):
        target.symlink_to(victim)  # the right name, but a symlink to someone else's files
    else:
        target.mkdir(exist_ok=True)
        (target / "keep").write_text("precious")
    processes.write_json(lab / runtime_dir.RECORD, {"dir": str(target)})

    assert runtime_dir.recorded(lab) is None
    assert runtime_dir.remove(lab) == []
    assert (target / "keep").read_text() == "precious"
    assert (victim / "keep").read_text() == "precious"
    assert not (lab / runtime_dir.RECORD).exists()
