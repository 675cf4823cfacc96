"""The chain file's ``notify`` section: parsed into frozen values, validated with lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from rotate.chain.loader import load_chain
from rotate.chain.notify import DEFAULT_NOTIFY_TIMEOUT, Endpoint, NotifyConfig, WebhookConfig
from rotate.core.errors import ChainFileError
from tests.support.chains import MINIMAL, write_chain

NOTIFY = """\
notify:
  pushgateway: {url: "http://pushgateway.monitoring:9091"}
  webhooks:
    - {urlEnv: SLACK_WEBHOOK_URL, format: slack}
    - {url: "https://alerts.example.com/rotate"}
  maxAge: 2160h
  timeout: 3s
"""


def test_notify_section_is_parsed(tmp_path: Path) -> None:
    chain = load_chain(write_chain(tmp_path, MINIMAL + NOTIFY))
    assert chain.notify == NotifyConfig(
        pushgateway=Endpoint(url="http://pushgateway.monitoring:9091"),
        webhooks=(WebhookConfig(Endpoint(url_env="SLACK_WEBHOOK_URL"), "slack"),
                  WebhookConfig(Endpoint(url="https://alerts.example.com/rotate"), "json")),
        max_age=2160 * 3600.0, timeout=3.0)
    assert chain.notify.webhooks[0].endpoint.resolve({"SLACK_WEBHOOK_URL": "https://h/x"}) \
        == "https://h/x"
    assert chain.notify.webhooks[0].endpoint.resolve({}) is None


def test_no_notify_section_sends_nothing(tmp_path: Path) -> None:
    chain = load_chain(write_chain(tmp_path, MINIMAL))
    assert chain.notify == NotifyConfig()
    assert chain.notify.timeout == DEFAULT_NOTIFY_TIMEOUT


def test_bad_notify_fields_are_reported_with_their_lines(tmp_path: Path) -> None:
    text = MINIMAL + NOTIFY.replace("format: slack", "format: teams").replace(
        '{url: "https://alerts.example.com/rotate"}', "{url: ftp://x, urlEnv: HOOK}")
    path = write_chain(tmp_path, text)
    with pytest.raises(ChainFileError) as err:
        load_chain(path)
    shown = [str(p) for p in err.value.problems]
    first = MINIMAL.count("\n") + 1  # the line of `notify:`
    assert any(p.startswith(f"{path}:{first + 3}: /notify/webhooks/0/format") for p in shown), \
        shown
    assert any(p.startswith(f"{path}:{first + 4}: /notify/webhooks/1") for p in shown), shown
