"""The chain file's ``notify`` section: where a run reports itself besides the journal.

A run pushes its metrics to a Prometheus Pushgateway and posts JSON to webhooks
(docs/notifications.md).  Both are optional and best effort: what is configured here never
changes what a run does or how it ends.  An address may carry a token (a Slack webhook's
path is one), so each may be named by an environment variable instead of written here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rotate.core.durations import parse_duration

WebhookFormat = Literal["json", "slack"]

#: the longest the end of a run waits for its notifications, unless ``notify.timeout`` says
DEFAULT_NOTIFY_TIMEOUT = 10.0


@dataclass(frozen=True)
class Endpoint:
    """Exactly one of ``url`` / ``url_env`` is set (the schema's ``oneOf``)."""

    url: str | None = None
    url_env: str | None = None

    def resolve(self, environ: Mapping[str, str]) -> str | None:
        """The address: ``url``, else the variable ``url_env`` names (None when unset)."""
        if self.url:
            return self.url
        return (environ.get(self.url_env) or None) if self.url_env else None


@dataclass(frozen=True)
class WebhookConfig:
    endpoint: Endpoint
    format: WebhookFormat = "json"


@dataclass(frozen=True)
class NotifyConfig:
    """Nothing configured (the default) sends nothing."""

    pushgateway: Endpoint | None = None
    webhooks: tuple[WebhookConfig, ...] = ()
    #: the value age the alert rules page on, for every credential of the chain (seconds)
    max_age: float | None = None
    timeout: float = DEFAULT_NOTIFY_TIMEOUT


def _endpoint(raw: Mapping[str, Any]) -> Endpoint:
    return Endpoint(url=raw.get("url"), url_env=raw.get("urlEnv"))


def notify_from(raw: Mapping[str, Any] | None) -> NotifyConfig:
    """The section as validated by the schema (``notify`` may be absent)."""
    if not raw:
        return NotifyConfig()
    gateway = raw.get("pushgateway")
    max_age = raw.get("maxAge")
    return NotifyConfig(
        pushgateway=_endpoint(gateway) if gateway is not None else None,
        webhooks=tuple(WebhookConfig(_endpoint(w), w.get("format", "json"))
                       for w in raw.get("webhooks", ())),
        max_age=parse_duration(max_age) if max_age is not None else None,
        timeout=parse_duration(raw.get("timeout", DEFAULT_NOTIFY_TIMEOUT)),
    )
