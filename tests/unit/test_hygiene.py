"""Secret hygiene end to end at unit level: the CLI over the real engine, on the fakes.

A rotation that succeeds and rotations that fail with an adapter exception whose *text*
carries secrets (the way hvac/httpx/kubernetes exceptions carry URLs and bodies) must leave
none of these anywhere an operator or a ticket can see: the old and new values, every
Config Center token, the admin tokens from the environment.  Scanned: stdout and stderr of
the CLI (text and JSON), the journal files, the report JSON of ``rotate show``, everything
logged at DEBUG, and what the run left in the cluster outside Secret data (annotations,
labels, status, events) and in the backend's custom metadata.  Then the last lines of
defence: the journal refusing a Secret, and the masked ``repr`` of every value that holds one.

The lab e2e test (tests/e2e/test_rotation.py) scans the same channels on the real lab; this
one reaches the failure paths, which the lab cannot provoke on demand.

Last, the suite's own hygiene: no module imports a test module (``test_*.py``) or a
conftest.py, no fixture is imported (pytest finds fixtures in conftest.py files, so an import
that only exists to make one visible, ``# noqa: F401`` and all, is never needed), and the
support packages (tests/support, tests/fakes) define no fixture.
"""

from __future__ import annotations

import ast
import io
import json
import logging
import re
import threading
import tokenize
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from rotate.cli.app import app
from rotate.cli.state import CliState
from rotate.clients.configcenter import HttpConfigCenter
from rotate.clients.seams import MintedToken, VersionedDoc
from rotate.clients.vault import AppRoleAuth, TokenAuth
from rotate.core.secret import Secret
from rotate.engine.journal import Journal
from rotate.stages.harvest import Document
from tests.fakes import World

NEW = "NEW-value-from-stdin-4f1c9a7e2b6d8c0e5a3f"
OLD = "old-password-0123456789abcdefghijklmn"
FIRST = "first-password-0123456789abcdefghijkl"
ENV_TOKENS = {"CONFIG_CENTER_TOKEN": "cc-admin-token-6b2e9d41a7f3",
              "BAO_TOKEN": "bao-root-token-93c5e1d07a28"}


def _cli(w: World, tmp_path: Path, *args: str, stdin: str | None = None) -> Result:
    """The real CLI over a real Engine handed the world's fakes."""
    env = {"NO_COLOR": "1", "COLUMNS": "100", "ROTATE_DEBUG": None, **ENV_TOKENS}
    common = ["--chain", str(tmp_path / "rotate.yaml"), "--state-dir", str(tmp_path / "state")]
    return CliRunner().invoke(app, [*args, *common], input=stdin, env=env,
                              obj=CliState(engine=w.engine), catch_exceptions=False)


def _secrets(w: World) -> list[str]:
    """Every secret the world holds now: all backend values, all tokens ever minted."""
    values = {v for versions in w.vault.versions.values() for data in versions
              for v in data.values() if v != "default"}
    values |= {t["token"] for ts in w.cc.tokens.values() for t in ts}
    values |= {NEW, OLD, FIRST, *ENV_TOKENS.values()}
    return sorted(values)


def _cluster_text(w: World) -> str:
    """The fake cluster as an operator sees it with ``get -o yaml``: Secret data excluded."""
    def public(obj: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in obj.items() if not (obj.get("kind") == "Secret" and k == "data")}

    objects = [public(o) for o in w.kube.objects.values()]
    events = [public(obj) for _rv, _e, _key, obj in w.kube.events]
    return json.dumps([objects, events, w.vault.custom, w.kube.patches], default=str)


def _journals(tmp_path: Path) -> str:
    return "\n".join(p.read_text() for p in sorted((tmp_path / "state").rglob("*")) if p.is_file())


def _scan(w: World, tmp_path: Path, caplog: pytest.LogCaptureFixture, *results: Result,
          ) -> None:
    run_ids = [p.name for p in (tmp_path / "state" / "runs").iterdir()]
    shown = [_cli(w, tmp_path, "show", run_id, "-o", "json") for run_id in run_ids]
    listed = _cli(w, tmp_path, "runs", "-o", "json")
    channels = {
        "journal": _journals(tmp_path),
        "log": caplog.text + "".join(repr(r.args) for r in caplog.records),
        "cluster": _cluster_text(w),
    }
    for i, r in enumerate([*results, *shown, listed]):
        channels[f"stdout[{i}]"] = r.stdout
        channels[f"stderr[{i}]"] = r.stderr
    for secret in _secrets(w):
        for name, text in channels.items():
            if secret in text:  # not `assert … in`: pytest would print the secret
                pytest.fail(f"a secret ({len(secret)} chars) leaked into {name}")


def test_a_successful_rotation_leaks_nothing(
    world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    plan = _cli(world, tmp_path, "dragonfly", "-o", "json")
    assert plan.exit_code == 0, plan.stderr
    done = _cli(world, tmp_path, "dragonfly", "--confirm", "--value-stdin", stdin=NEW + "\n")
    assert done.exit_code == 0, done.stderr
    # the value did go everywhere it should (so the scan below is not vacuous)
    assert world.vault.current("infra/dragonfly", "password") == NEW
    assert world.kube.secret_value("dragonfly", "dragonfly-password-secret", "password") == NEW
    assert world.running["cart"] == NEW
    run_id = json.loads(_cli(world, tmp_path, "runs", "-o", "json").stdout)["runs"][0]["run_id"]
    back = _cli(world, tmp_path, "rollback", run_id, "--confirm", "-o", "json")
    assert back.exit_code == 0, back.stderr
    assert world.vault.current("infra/dragonfly", "password") == OLD
    _scan(world, tmp_path, caplog, plan, done, back)


def _leaky(*values: str) -> RuntimeError:
    """What a library exception looks like: the request, body and all."""
    return RuntimeError("PUT https://cc.example/v1/x body=" + json.dumps(list(values)))


def _break_backend(w: World) -> None:
    w.vault.faults.arm("write", _leaky(NEW, OLD))


def _break_config_write(w: World) -> None:
    w.cc.faults.arm("put_key", _leaky(NEW, OLD), times=-1)


def _break_token_delivery(w: World) -> None:
    write = w.kube.write_secret_key

    def leaky_write(namespace: str, name: str, key: str, value: Secret, **kw: Any) -> str:
        if name.endswith("-config-token"):
            raise _leaky(value.reveal())
        return write(namespace, name, key, value, **kw)

    w.kube.write_secret_key = leaky_write  # type: ignore[method-assign]


def _break_readyz(w: World) -> None:
    def leaky_status(target: Any) -> int:
        raise _leaky(NEW, w.running.get(f"{target.service}#token", ""))

    w.readyz.answer = leaky_status


@pytest.mark.parametrize(("breaker", "failed_kind"), [
    (_break_backend, "backend.write"),
    (_break_config_write, "config.write"),
    (_break_token_delivery, "token.mint"),
    (_break_readyz, "readyz.check"),
])
@pytest.mark.parametrize("output", ["text", "json"])
def test_an_adapter_exception_carrying_secrets_is_not_surfaced(
    world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture,
    breaker: Callable[[World], None], failed_kind: str, output: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    breaker(world)
    failed = _cli(world, tmp_path, "dragonfly", "--confirm", "--value-stdin", "-o", output,
                  stdin=NEW + "\n")
    # not a RotateError: a bug in an adapter, reported by type only
    assert failed.exit_code == 1, failed.stderr
    assert failed_kind in failed.stderr
    assert "internal error (RuntimeError)" in failed.stderr
    assert "rotate resume " in failed.stderr  # the way out is still printed
    if output == "json":
        report = json.loads(failed.stdout)
        assert report["status"] == "failed"
        assert {s["kind"] for s in report["steps"] if s["status"] == "failed"} == {failed_kind}
    _scan(world, tmp_path, caplog, failed)


# --------------------------------------------------------------------------- the last lines


@pytest.mark.parametrize("data", [
    {"value": Secret(NEW)},
    {"nested": {"list": [1, {"deeper": Secret(NEW)}]}},
    {"tuple": ("a", Secret(NEW))},
    {"holder": MintedToken("tok-1", Secret(NEW), "")},  # not JSON: refused by type
])
def test_the_journal_refuses_a_secret_anywhere_in_a_record(
    tmp_path: Path, data: dict[str, Any],
) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    try:
        with pytest.raises(TypeError):
            journal.append("step.progress", data=data)
        journal.append("step.progress", data={"version": 3})
    finally:
        journal.close()
    lines = (tmp_path / "journal.jsonl").read_text().splitlines()
    assert [json.loads(line)["data"] for line in lines] == [{"version": 3}]


def test_values_that_hold_secrets_show_a_mask() -> None:
    doc = {"dragonfly": {"password": NEW, "url": f"redis://:{NEW}@h:6379/0"}}
    holders: list[object] = [
        VersionedDoc(3, doc),
        Document("cart", {"dragonfly": {"password": Secret(NEW)}}),
        MintedToken("tok-1", Secret(NEW), "2027-01-01T00:00:00Z"),
        TokenAuth(Secret(NEW)),
        AppRoleAuth(Secret(NEW), Secret(NEW)),
        HttpConfigCenter("http://127.0.0.1:1", Secret(NEW)),
    ]
    for holder in holders:
        for text in (repr(holder), str(holder), f"{holder}", f"{holder!r}"):
            assert NEW not in text, type(holder).__name__


def test_a_background_thread_dying_of_a_leaky_exception_shows_its_type_only(
    world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    died = threading.Event()

    def leaky_watch(*args: Any, **kwargs: Any) -> Any:
        died.set()
        raise _leaky(NEW, OLD)  # a watch thread (WatchPause) has no handler for this

    world.kube.watch = leaky_watch  # type: ignore[method-assign]
    done = _cli(world, tmp_path, "dragonfly", "--confirm", "--value-stdin", stdin=NEW + "\n")
    assert died.is_set()
    assert done.exit_code == 0, done.stderr  # the watch only speeds waiting up
    assert "background thread watch-" in done.stderr
    assert "internal error (a bug): builtins.RuntimeError" in done.stderr
    assert "Traceback" not in done.stderr
    _scan(world, tmp_path, caplog, done)


# --------------------------------------------------------------------------- the suite itself

#: packages of support code: helpers and fakes, never tests and never fixtures
SUPPORT_PACKAGES = ("tests.support", "tests.fakes")
NOQA_F401 = re.compile(r"\bnoqa\b.*\bF401\b")


def _is_test_module(name: str) -> bool:
    last = name.rpartition(".")[2]
    return last.startswith("test_") or last == "conftest"


def _fixture_names(node: ast.AST) -> set[str]:
    """The names a function definition is known by as a fixture (its own and ``name=``)."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return set()
    for deco in node.decorator_list:
        call = deco if isinstance(deco, ast.Call) else None
        if ast.unparse(call.func if call else deco) in ("pytest.fixture", "fixture"):
            named = [k.value for k in (call.keywords if call else []) if k.arg == "name"]
            return {node.name} | {str(n.value) for n in named if isinstance(n, ast.Constant)}
    return set()


def suite_problems(sources: dict[str, str]) -> list[str]:
    """What breaks the suite's hygiene in ``sources`` (dotted module name → its text)."""
    trees = {name: ast.parse(text, name) for name, text in sources.items()}
    fixtures = {name: {f for node in ast.walk(tree) for f in _fixture_names(node)}
                for name, tree in trees.items()}
    found: list[str] = []
    for name, tree in trees.items():
        package = name if name.endswith(".__init__") else name.rpartition(".")[0]
        package = package.removesuffix(".__init__")
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [f"{name} imports the test module {a.name}" for a in node.names
                          if _is_test_module(a.name)]
            elif isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level else ""
                module = ".".join(p for p in (base, node.module or "") if p)
                if _is_test_module(module):
                    found.append(f"{name} imports the test module {module}")
                for alias in node.names:
                    if _is_test_module(f"{module}.{alias.name}"):
                        found.append(f"{name} imports the test module {module}.{alias.name}")
                    elif alias.name in fixtures.get(module, set()):
                        found.append(f"{name} imports the fixture {alias.name} from {module}")
        if name.startswith(SUPPORT_PACKAGES) and fixtures[name]:
            found.append(f"{name} defines fixtures ({', '.join(sorted(fixtures[name]))}): "
                         "they belong in a conftest.py")
        for token in tokenize.generate_tokens(io.StringIO(sources[name]).readline):
            if token.type == tokenize.COMMENT and NOQA_F401.search(token.string):
                found.append(f"{name}:{token.start[0]} silences F401 (an import kept for "
                             "pytest?)")
    return found


def _suite(repo_root: Path) -> dict[str, str]:
    sources: dict[str, str] = {}
    for top in ("tests", "bench"):
        for path in sorted((repo_root / top).rglob("*.py")):
            name = ".".join(path.relative_to(repo_root).with_suffix("").parts)
            sources[name] = path.read_text()
    return sources


def test_no_module_imports_a_test_module_or_a_fixture(repo_root: Path) -> None:
    sources = _suite(repo_root)
    assert "tests.unit.test_hygiene" in sources and "tests.support.paths" in sources
    assert suite_problems(sources) == []


def test_the_suite_check_can_fail() -> None:
    sources = {
        "tests.support.helpers": "import pytest\n@pytest.fixture(name='w')\ndef w_fixture(): ...\n",
        "tests.unit.conftest": "import pytest\n@pytest.fixture\ndef world(): ...\n",
        "tests.unit.test_a": "from tests.unit.conftest import world\n"
                             "from tests.support.helpers import w  # noqa: F401 - fixture\n",
        "tests.unit.test_b": "def f():\n    from .test_a import x\n    import tests.unit.test_a\n"
                             "from tests.unit import test_a\n",
    }
    assert sorted(suite_problems(sources)) == [
        "tests.support.helpers defines fixtures (w, w_fixture): they belong in a conftest.py",
        "tests.unit.test_a imports the fixture w from tests.support.helpers",
        "tests.unit.test_a imports the fixture world from tests.unit.conftest",
        "tests.unit.test_a imports the test module tests.unit.conftest",
        "tests.unit.test_a:2 silences F401 (an import kept for pytest?)",
        "tests.unit.test_b imports the test module tests.unit.test_a",
        "tests.unit.test_b imports the test module tests.unit.test_a",
        "tests.unit.test_b imports the test module tests.unit.test_a",
    ]
