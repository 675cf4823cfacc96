"""A real Prometheus for the lab (``rotate lab up --with prometheus``): Debian's
``/usr/bin/prometheus``, on a loopback port, scraping the shop's sample services.

What a canary's PromQL query reads in the lab (chain-file.md "canary"): each sample service
exposes ``lab_readyz_failures_total{service}`` on ``/metrics`` (rotate_lab.shop
.sample_service), scraped every second through the services' ClusterIPs (the lab's
kube-proxy carries them, as for any client on the host).  Started after every workload is
Ready (the ClusterIPs are in ``DIR/hosts`` by then), recorded in ``DIR/pids.json`` as the
part ``prometheus``, stopped by ``lab down`` by that pid.  Its data lives in
``DIR/prometheus/data`` (a retention of one hour: a lab is short-lived).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

#: Debian's binary; PATH's ``prometheus`` otherwise
BINARY = "/usr/bin/prometheus"
#: the namespace and port of the sample services it scrapes
SHOP_NAMESPACE = "shop"
SHOP_PORT = 80


class NoPrometheus(Exception):
    """Prometheus is not installed here."""


def binary() -> str:
    found = BINARY if Path(BINARY).exists() else shutil.which("prometheus")
    if not found:
        raise NoPrometheus("prometheus is not installed (Debian: apt-get install prometheus; "
                           "`make install` does it)")
    return found


def shop_targets(hosts_file: Path) -> list[str]:
    """``IP:80`` of every Service in the shop namespace, from the lab's hosts file
    (``IP NAME.NS.svc.cluster.local …`` per line)."""
    out: list[str] = []
    for line in hosts_file.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].endswith(f".{SHOP_NAMESPACE}.svc.cluster.local"):
            out.append(f"{parts[0]}:{SHOP_PORT}")
    return sorted(set(out))


def write_config(directory: Path, targets: list[str], pushgateway: str | None = None) -> Path:
    """``pushgateway``: ``HOST:PORT`` of the lab's Pushgateway, scraped with
    ``honor_labels`` (its series keep ``job="rotate"``, docs/notifications.md)."""
    directory.mkdir(parents=True, exist_ok=True)
    listed = ", ".join(f"'{t}'" for t in targets)
    path = directory / "prometheus.yml"
    text = ("# written by rotate lab up --with prometheus\n"
            "global: {scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: shop\n"
            f"    static_configs: [{{targets: [{listed}]}}]\n")
    if pushgateway:
        text += ("  - job_name: pushgateway\n    honor_labels: true\n"
                 f"    static_configs: [{{targets: ['{pushgateway}']}}]\n")
    path.write_text(text)
    return path


def argv(directory: Path, port: int) -> list[str]:
    return [binary(), f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'data'}", "--storage.tsdb.retention.time=1h",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]


def wait_ready(url: str, alive: object, deadline: float, what: str = "prometheus") -> None:
    """Until ``GET /-/ready`` answers 200 (Prometheus and its Pushgateway both serve it);
    ``alive()`` False (the process died) or the deadline raises TimeoutError."""
    import httpx

    while time.monotonic() < deadline:
        if callable(alive) and not alive():
            raise TimeoutError(f"{what} exited while starting")
        try:
            if httpx.get(f"{url}/-/ready", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{what} did not become ready")
