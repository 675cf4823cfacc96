"""Pushing a run's metrics to a Prometheus Pushgateway (prometheus-client).

The caller hands plain :class:`Sample` values (names, labels, numbers); this module builds a
``CollectorRegistry`` of its own for them — never the process-wide default registry, whose
collectors (process, GC) describe the short-lived CLI process, not the credential — and
pushes it with ``pushadd`` (HTTP POST): only the metric names pushed are replaced in the
group, so a failed run leaves the group's last success time as the last success pushed it.

Errors are translated without the library's text or the address (it may carry user info).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rotate.core.errors import PermanentError, TemporaryError

SYSTEM = "pushgateway"
OPERATION = "push"


@dataclass(frozen=True)
class Sample:
    """One gauge value; every sample of one ``name`` has the same ``help`` and label names."""

    name: str
    help: str
    value: float
    labels: tuple[tuple[str, str], ...] = ()


def _split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """``url`` without ``user:pass@``, and the user and password it held."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, None, None
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    bare = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return bare, parts.username, parts.password or ""


def push(url: str, job: str, grouping_key: Mapping[str, str], samples: Sequence[Sample],
         timeout: float) -> None:
    """``pushadd`` ``samples`` to the group (``job``, ``grouping_key``) within ``timeout``."""
    import urllib.error

    from prometheus_client import CollectorRegistry, Gauge, pushadd_to_gateway
    from prometheus_client.exposition import basic_auth_handler, default_handler

    registry = CollectorRegistry(auto_describe=True)
    gauges: dict[str, Gauge] = {}
    for sample in samples:
        gauge = gauges.get(sample.name)
        if gauge is None:
            gauge = Gauge(sample.name, sample.help, [k for k, _ in sample.labels],
                          registry=registry)
            gauges[sample.name] = gauge
        (gauge.labels(**dict(sample.labels)) if sample.labels else gauge).set(sample.value)

    bare, user, password = _split_userinfo(url)
    handler: Callable[..., Callable[[], None]] = default_handler
    if user is not None:
        def handler(url: str, method: str, timeout: float | None,
                    headers: list[tuple[str, str]], data: bytes) -> Callable[[], None]:
            return basic_auth_handler(url, method, timeout, headers, data, user, password)
    try:
        pushadd_to_gateway(bare, job=job, registry=registry, grouping_key=dict(grouping_key),
                           timeout=timeout, handler=handler)
    except urllib.error.HTTPError as exc:
        status: Any = exc.code
        if status in (408, 429) or status >= 500:
            raise TemporaryError(SYSTEM, OPERATION, "refused for now", status=status) from None
        raise PermanentError(SYSTEM, OPERATION, "refused", status=status) from None
    except TimeoutError:
        raise TemporaryError(SYSTEM, OPERATION, "timed out") from None
    except urllib.error.URLError as exc:
        reason = "timed out" if isinstance(exc.reason, TimeoutError) else "unreachable"
        raise TemporaryError(SYSTEM, OPERATION, reason) from None
    except (OSError, ValueError):
        raise TemporaryError(SYSTEM, OPERATION, "unreachable") from None
