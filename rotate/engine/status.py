"""``rotate status``: whether a credential's chain is closed, proven link by link, now.

Read-only by contract: every request is a GET, a list, a login from outside (the provider's
probe, as a consumer connecting would) or a readyz GET; nothing is written to the backend,
the cluster or the Config Center, and no lock is taken, so it may run beside a rotation (it
then reports the chain open where the run has not arrived yet).  docs/cli.md
"``rotate status``" is the contract.

The links, in the order the first broken one is named (rotate.engine.status_links checks
each):

1. ``backend``: the current version of the KV path and the fingerprint of its value;
2. per ExternalSecret (the credential's, then each further one of its path): ``secret`` — the
   target Secret's value has the backend's fingerprint — then ``externalsecret`` — Ready and
   synced since that version was written.  The Secret comes first: it is what providers and
   readers read, and a hand ``bao kv put`` the ExternalSecret has not synced yet shows as
   the Secret holding another value, the ExternalSecret's last sync time saying why;
3. per provider: ``provider`` — a login from outside with the current value is accepted (a
   rollout provider without a probe: its pods started since the backend held the value) — and
   ``provider.retired`` — the value the current one replaced is refused, unless an overlap
   is still open;
4. per consumer: ``consumer.document`` (its owned pointers hold what a harvest with the
   current value builds), ``consumer.pods`` (its live pods started after that document and
   its live token were written), ``consumer.readyz`` (200), ``consumer.token`` (one live token,
   the one its token Secret holds);
5. per workload that reads the Secret itself: ``reader.pods`` (started since the backend held
   the value — a version with another value the ExternalSecret never synced does not count —
   unless it reloads the file or is ignored);
6. ``value.age``: the value's age against the credential's ``maxAge`` (else ``notify.maxAge``).

Values: read once each and compared in process through a keyed HMAC
(:class:`~rotate.core.fingerprint.Comparer`); what is printed is
:func:`~rotate.core.fingerprint.shown`, never a value.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rotate.chain.model import Chain, Credential
from rotate.core.timestamps import rfc3339
from rotate.engine.status_model import Found, Link

if TYPE_CHECKING:
    from rotate.engine.unfinished import RunSource


@dataclass(frozen=True)
class CredentialStatus:
    """What ``rotate status`` found for one credential."""

    credential: str
    backend: str  # "secret/infra/dragonfly#password"
    version: int | None  # None: the backend could not be read
    fingerprint: str  # of the current value ("" when unread)
    written_at: datetime | None  # when the current version was created
    age_seconds: float | None
    max_age_seconds: float | None
    links: tuple[Link, ...]
    #: the command that closes the first broken link ("" when the chain is closed)
    command: str = ""
    seconds: float = 0.0  # how long the checks took

    @property
    def closed(self) -> bool:
        return all(link.ok for link in self.links)

    @property
    def broken(self) -> Link | None:
        return next((link for link in self.links if not link.ok), None)

    def to_json(self) -> dict[str, Any]:
        broken = self.broken
        return {
            "credential": self.credential,
            "closed": self.closed,
            "backend": {"path": self.backend, "version": self.version,
                        "fingerprint": self.fingerprint,
                        "written_at": rfc3339(self.written_at, micro=False)
                        if self.written_at is not None else None,
                        "age_seconds": self.age_seconds,
                        "max_age_seconds": self.max_age_seconds},
            "broken": broken.to_json() if broken is not None else None,
            "command": self.command,
            "links": [link.to_json() for link in self.links],
            "seconds": self.seconds,
        }


def closing_command(cred: Credential, broken: Link | None, unfinished: str | None) -> str:
    """The command that closes ``broken``: the resume of the credential's unfinished run
    when there is one (it carries the chain to the value it wrote); the value's age, a new
    rotation; the backend unread, doctor; any other link, ``--adopt``, which carries the
    value the backend holds now through the whole chain without writing a new one."""
    from rotate.engine.next_commands import resume_command

    if broken is None:
        return ""
    if broken.link == "backend":
        return "rotate doctor"
    if unfinished is not None:
        return resume_command(unfinished)
    if broken.link == "value.age":
        return f"rotate {cred.name} --confirm"
    return f"rotate {cred.name} --adopt --confirm"


def doc_writes(runs: RunSource) -> dict[tuple[str, int], datetime]:
    """(service, document version) → when a journaled run finished writing it, over every
    readable journal of the state directory and the cluster (a version not found was
    written elsewhere)."""
    from rotate.core.timestamps import parse_rfc3339
    from rotate.engine.kinds import find

    out: dict[tuple[str, int], datetime] = {}
    for state in runs.load_runs():
        for step in state.steps:
            version = step.data.get("version")
            kind = find(step.step) if step.status == "done" else None
            if (kind is None or not kind.writes_document or not isinstance(version, int)
                    or not step.finished_at):
                continue
            try:
                out.setdefault((step.step.subject, version), parse_rfc3339(step.finished_at))
            except ValueError:
                continue
    return out


def check_credential(chain: Chain, cred: Credential, adapters: Any, environ: Mapping[str, str],
                     writes: Mapping[tuple[str, int], datetime],
                     clock: Callable[[], datetime]) -> Found:
    """Every link of ``cred``, in the order of rotate.engine.status's docstring."""
    from concurrent.futures import ThreadPoolExecutor

    from rotate.chain.model import SecretKeyRef
    from rotate.chain.value_graph import consumers_of
    from rotate.core.refs import ObjectRef
    from rotate.engine.collector import Collector
    from rotate.engine.fanout import fan_out
    from rotate.engine.preflight_readers import discover
    from rotate.engine.status_links import WORKERS, Checker

    c = Checker(chain, cred, adapters, environ, writes, clock)
    out = Found(c.path)
    col = Collector()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rotate-status") as pool:
        found = pool.submit(discover, chain, cred, adapters.kube, col)  # beside the backend
        first = c.backend()
        readers = found.result()
    out.links.append(first)
    if not first.ok:
        return out
    cur = c.current
    out.version, out.written_at = cur.version, cur.written_at
    out.fingerprint = c.shown(cur.value)

    tasks: list[Callable[[], list[Link]]] = [
        lambda: c.external_secret(cred.external_secret, cred.secret)]
    for es, target in readers.external_secrets.items():
        ns, name = es.split("/", 1)
        secret, _, key = target.partition("#")
        ref = SecretKeyRef(ns, secret.split("/", 1)[1], key)
        tasks.append(lambda ns=ns, name=name, ref=ref: c.external_secret(  # type: ignore[misc]
            ObjectRef("ExternalSecret", ns, name), ref))
    tasks += [lambda ref=ref: c.provider(ref)  # type: ignore[misc]
              for ref in cred.providers]
    tasks += [lambda name=name: c.consumer(name)  # type: ignore[misc]
              for name in consumers_of(chain, cred.name)]
    failed = [Link("reader.pods", check.check.split(" ", 1)[-1], False, check.detail)
              for check in col.checks if not check.ok]
    tasks += [lambda ref=ref, r=r: c.reader(ref, r.action, r.words)  # type: ignore[misc]
              for ref, r in readers.found.items()]
    for links in fan_out(tasks, lambda task: task(), workers=WORKERS, name="rotate-status"):
        out.links.extend(links)
    out.links.extend(failed)
    age, out.age_seconds, out.max_age_seconds = c.age()
    out.links.append(age)
    out.links.sort(key=lambda link: _ORDER[link.link])  # stable: chain order within a link
    return out


_ORDER = {name: i for i, name in enumerate(
    ("backend", "secret", "externalsecret", "provider", "provider.retired", "consumer",
     "reader.pods", "value.age"))}
_ORDER.update({name: _ORDER["consumer"] for name in
               ("consumer.document", "consumer.pods", "consumer.readyz", "consumer.token")})


def observe(chain: Chain, credentials: Sequence[Credential], adapters: Any,
            environ: Mapping[str, str], runs: RunSource,
            clock: Callable[[], datetime]) -> list[CredentialStatus]:
    """Every link of every credential, one credential after the other (each fans its
    consumers out on a pool)."""
    from rotate.engine.unfinished import latest_unfinished

    writes = doc_writes(runs)
    out = []
    for cred in credentials:
        began = time.monotonic()
        found = check_credential(chain, cred, adapters, environ, writes, clock)
        open_run = latest_unfinished(runs, cred.name)
        broken = next((link for link in found.links if not link.ok), None)
        command = closing_command(cred, broken, open_run.run_id if open_run else None)
        out.append(CredentialStatus(
            cred.name, found.backend, found.version, found.fingerprint, found.written_at,
            found.age_seconds, found.max_age_seconds, tuple(found.links), command,
            round(time.monotonic() - began, 3)))
    return out


def push_closed(chain: Chain, statuses: Sequence[CredentialStatus],
                environ: Mapping[str, str]) -> str | None:
    """Push ``rotate_chain_closed`` (and the credential's max age) for each credential to the
    Pushgateway the runs push to (``ROTATE_PUSHGATEWAY_URL``, else ``notify.pushgateway``),
    in the run's group (``job="rotate"``, ``credential``); the alert rule
    ``RotateChainNotClosed`` reads it.  Best effort: a failure is the warning returned,
    never the exit code.  Nothing configured, nothing pushed."""
    from rotate.clients.pushgateway import Sample, push
    from rotate.core.errors import ClientError
    from rotate.engine import run_metrics
    from rotate.engine.notify import PUSHGATEWAY_ENV, shown_address

    cfg = chain.notify
    url = environ.get(PUSHGATEWAY_ENV) or (
        cfg.pushgateway.resolve(environ) if cfg.pushgateway is not None else None)
    if not url:
        return None
    for status in statuses:
        samples = [Sample(run_metrics.CHAIN_CLOSED, run_metrics.CHAIN_CLOSED_HELP,
                          1.0 if status.closed else 0.0)]
        if status.max_age_seconds is not None:
            samples.append(Sample(run_metrics.MAX_AGE, run_metrics.MAX_AGE_HELP,
                                  status.max_age_seconds))
        try:
            push(url, run_metrics.JOB, {"credential": status.credential}, samples, cfg.timeout)
        except ClientError as exc:
            return (f"metrics not pushed to pushgateway ({shown_address(url)}): {exc.message} "
                    "(the status is not affected)")
    return None
