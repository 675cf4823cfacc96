"""Hostile chain files neither hang nor crash the loader: size, nesting depth and alias
expansion are bounded, and each refusal is a chain-file error (exit 2) within a second,
through the real CLI too."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rotate.chain.loader import load_chain
from rotate.core.errors import ChainFileError
from tests.support.paths import EXAMPLE_CHAIN

EXAMPLE = EXAMPLE_CHAIN
HEAD = "apiVersion: rotate/v1\nkind: Chain\n"


def alias_bomb() -> str:
    lines = [HEAD + 'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


HOSTILE = {
    "alias-bomb": (alias_bomb(), ":6: /: the YAML expands to more than 10000 nodes "
                                 "(aliases count once per use)"),
    "flow-4mb": (HEAD + "services: [" + ",".join(["1"] * (2 << 20)) + "]\n",
                 ": /: the file is 4.0 MiB; a chain file is at most 1 MiB"),
    "flow-900k": (HEAD + "services: [" + ",".join(["1"] * 450_000) + "]\n",
                  ":3: /: the YAML expands to more than 10000 nodes "
                  "(aliases count once per use)"),
    "deep-flow": (HEAD + "services: " + "[" * 5000 + "]" * 5000 + "\n",
                  ":3: /: the YAML nests deeper than 64 levels"),
    "deep-block": (HEAD + "".join(" " * i + f"k{i}:\n" for i in range(300)),
                   ":67: /: the YAML nests deeper than 64 levels"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_yaml_is_refused_fast(tmp_path: Path, name: str) -> None:
    text, expected = HOSTILE[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    started = time.process_time()  # CPU time: other processes' load does not count
    with pytest.raises(ChainFileError) as info:
        load_chain(path)
    elapsed = time.process_time() - started
    assert [str(p) for p in info.value.problems] == [f"{path}{expected}"]
    assert elapsed < 1.0, f"{name} took {elapsed:.2f}s"


def test_the_example_is_well_inside_the_limits() -> None:
    assert load_chain(EXAMPLE).services


def test_hostile_yaml_exits_2_through_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    rotate = str(Path(sys.executable).parent / "rotate")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([rotate, "dragonfly", "--chain", str(path)], capture_output=True,
                          text=True, timeout=30, cwd=tmp_path)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    elapsed = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert proc.returncode == 2, proc.stderr
    assert "expands to more than 10000 nodes" in proc.stderr
    assert "Traceback" not in proc.stderr
    # CPU time of the child (start-up included): other processes' load does not count
    assert elapsed < 2.0, f"took {elapsed:.2f}s of CPU"
