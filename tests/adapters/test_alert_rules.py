"""The shipped Prometheus alert rules pass the real ``promtool``: ``check rules`` (they
parse, their expressions are valid PromQL) and ``test rules`` (each alert fires on sample
series, and only there).  The metric names they use are the ones rotate pushes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rotate.engine import run_metrics

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed and could not be: `make install` "
                             "installs it with apt-get (Debian/Ubuntu: apt-get install prometheus)")


def _rules_dir(repo_root: Path) -> Path:
    return repo_root / "deploy" / "prometheus"


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def test_promtool_checks_the_rules(repo_root: Path) -> None:
    done = _promtool("check", "rules", "rotate-alerts.yaml", cwd=_rules_dir(repo_root))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 3 rules found" in done.stdout


def test_each_alert_fires_on_its_sample_series(repo_root: Path) -> None:
    done = _promtool("test", "rules", "rotate-alerts.test.yaml", cwd=_rules_dir(repo_root))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_use_the_metric_names_rotate_pushes(repo_root: Path) -> None:
    text = (_rules_dir(repo_root) / "rotate-alerts.yaml").read_text(encoding="utf-8")
    used = set(re.findall(r"\brotate_[a-z_]+\b", text))
    defined = {value for name, value in vars(run_metrics).items()
               if name.isupper() and isinstance(value, str) and value.startswith("rotate_")}
    assert used and used <= defined, used - defined
    tested = (_rules_dir(repo_root) / "rotate-alerts.test.yaml").read_text(encoding="utf-8")
    for alert in re.findall(r"- alert: (\w+)", text):
        assert f"alertname: {alert}" in tested, f"{alert} has no promtool test"
