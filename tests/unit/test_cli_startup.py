"""Start-up cost: the cheap commands never import the heavy libraries (checked in a child).

`rotate --help` and `rotate list` run often; kubernetes, hvac, jsonschema, httpx and ruamel
together cost far more than the CLI itself, so they must be imported lazily, where used.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import EXAMPLE_CHAIN
from tests.support.startup import HEAVY, imported_after, modules_after


@pytest.mark.parametrize("args", [["--help"], ["dragonfly", "--help"], ["lab", "--help"]])
def test_help_imports_nothing_heavy(args: list[str], tmp_path: Path) -> None:
    code, modules = modules_after(*args, cwd=tmp_path)
    assert code == 0
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))
    # rich loads only when the Console first prints; help is plain click formatting
    assert "rich" not in modules


def test_help_does_not_import_engine_or_lab(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom rotate.cli.app import main\n"
         "try: main(['--help'])\nexcept SystemExit: pass\n"
         "print(sorted(m for m in sys.modules if m.startswith(('rotate.engine.api', "
         "'rotate_lab.control', 'rotate.chain.loader'))))"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def _list_modules(tmp_path: Path) -> set[str]:
    pytest.importorskip("rotate.engine.api", reason="the engine facade has not landed")
    code, modules = modules_after(
        "list", "--chain", str(EXAMPLE_CHAIN),
        "--state-dir", str(tmp_path), cwd=tmp_path)
    assert code == 0
    return modules


def test_list_imports_no_adapter_library(tmp_path: Path) -> None:
    modules = _list_modules(tmp_path)
    adapters = {"kubernetes", "hvac", "httpx"}
    assert modules.isdisjoint(adapters), sorted(modules & adapters)


def test_list_validates_like_a_rotation(tmp_path: Path) -> None:
    # `rotate list` must refuse what `rotate CRED` refuses (issue 10), so it pays for the
    # JSON Schema validation (about 60 ms) — the first time: the adapters stay out (above).
    modules = _list_modules(tmp_path)
    assert "jsonschema" in modules


def _list_imports(tmp_path: Path) -> set[str]:
    pytest.importorskip("rotate.engine.api", reason="the engine facade has not landed")
    code, modules = imported_after("list", "--chain", str(EXAMPLE_CHAIN),
                                    "--state-dir", str(tmp_path), cwd=tmp_path)
    assert code == 0
    return modules


def test_a_second_list_takes_the_validated_chain_from_the_cache(tmp_path: Path) -> None:
    cold = _list_imports(tmp_path)
    warm = _list_imports(tmp_path)  # same HOME: the entry the first run stored
    assert {"jsonschema", "ruamel.yaml"} <= cold
    assert warm.isdisjoint({"jsonschema", "ruamel.yaml"}), sorted(
        warm & {"jsonschema", "ruamel.yaml"})


def test_list_imports_neither_pydantic_nor_what_runs_a_rotation(tmp_path: Path) -> None:
    # typer would convert --chain/-o through pydantic (rotate/cli/coercion.py); the engine
    # facade imports step kinds, stages and the executor only to plan or run.
    modules = _list_imports(tmp_path)
    heavy = {m for m in modules if m.split(".")[0] == "pydantic"
             or m.startswith(("rotate.engine.kinds", "rotate.stages", "rotate.engine.executor",
                              "rotate.engine.preflight", "rotate.clients."))}
    assert not heavy, sorted(heavy)


DRIVERS_CHILD = """
import json, sys
from rotate.clients.provider_connect import Connector
from rotate.clients.seams import Endpoint
before = {m.split(".")[0] for m in sys.modules}
getattr(Connector(), sys.argv[1])(Endpoint("127.0.0.1", 1), **json.loads(sys.argv[2]))
after = {m.split(".")[0] for m in sys.modules}
print(json.dumps({"before": sorted(before), "after": sorted(after)}))
"""


@pytest.mark.parametrize(("probe", "kwargs", "used", "unused"), [
    ("redis_probe", {"tls": False}, "redis", "psycopg"),
    ("postgres_probe", {"database": "postgres", "sslmode": "disable"}, "psycopg", "redis"),
])
def test_a_provider_driver_is_imported_only_when_its_provider_is_used(
    probe: str, kwargs: dict[str, str | bool], used: str, unused: str, tmp_path: Path,
) -> None:
    # A Dragonfly rotation must not pay psycopg's import at start-up, nor PostgreSQL redis-py's.
    done = subprocess.run([sys.executable, "-c", DRIVERS_CHILD, probe, json.dumps(kwargs)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert used not in seen["before"] and unused not in seen["before"]
    assert used in seen["after"]
    assert unused not in seen["after"]


ENTRY_POINTS = {
    "console": [sys.executable, "-m", "rotate"],
    "plain": [sys.executable, "-c", "import sys\nfrom rotate.cli.app import main\n"
              "sys.exit(main())"],
}


@pytest.mark.parametrize("args", [
    ["list", "--chain", str(EXAMPLE_CHAIN)],  # output to a pipe: block-buffered
    ["list", "--chain", "no-such-file.yaml"],
    ["no-such-command"],
])
def test_the_console_script_ends_at_once_with_all_its_output_and_code(
        args: list[str], tmp_path: Path) -> None:
    # console() skips the interpreter's teardown (os._exit): its output and exit code must
    # be exactly those of a plain sys.exit(main()).
    env = {"NO_COLOR": "1", "COLUMNS": "100", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    seen = {}
    for name, argv in ENTRY_POINTS.items():
        done = subprocess.run([*argv, *args, *(["--state-dir", str(tmp_path)]
                                               if args[0] == "list" else [])],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
        seen[name] = (done.returncode, done.stdout, done.stderr)
    assert seen["console"] == seen["plain"]
    assert seen["console"][1] or seen["console"][2]


def test_rotate_registers_no_atexit_handler(tmp_path: Path) -> None:
    # console() ends the process without running atexit handlers: rotate may need none.
    # (logging registers its shutdown, which flushes handlers rotate never installs.)
    done = subprocess.run(
        [sys.executable, "-c", "import atexit, sys\nfrom rotate.cli.app import main\n"
         "registered = []\natexit.register = lambda f, *a, **k: registered.append(f)\n"
         "main(['list', '--chain', sys.argv[1], '--state-dir', sys.argv[2]])\n"
         "print(sorted(f.__module__ + '.' + f.__qualname__ for f in registered\n"
         "             if f.__module__ != 'logging'))",
         str(EXAMPLE_CHAIN), str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_under_a_profiler_the_console_script_exits_the_ordinary_way(tmp_path: Path) -> None:
    # cProfile (and coverage) write their results at exit: console() must not skip it.
    out = tmp_path / "list.prof"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "rotate",
                           "list", "--chain", str(EXAMPLE_CHAIN), "--state-dir", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0
