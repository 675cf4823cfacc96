"""Changes of the Secrets rotate targets, streamed by kopf: the adapter behind
:class:`SecretChanges` (``rotate watch``, rotate.engine.watcher).

kopf (the Python reference for an operator) runs its own aiohttp client on an event loop of
its own, here in a daemon thread, and calls :func:`on_change` with the Secret's namespace
and name only — never its body.  Why these settings:

* ``@kopf.on.event`` handlers only: kopf keeps no state for them, so it never patches a
  watched Secret.  The storages are empty besides (``MultiDiffBaseStorage([])``,
  ``MultiProgressStorage([])``): kopf's default diff-base is an annotation holding the
  object's "essence" — for a Secret, its data.  Nothing is written to a Secret, ever.
* no scanning: the namespaces are the target Secrets' own, so kopf needs no cluster-wide
  ``list namespaces`` (nor a watch of CRDs).
* standalone: kopf's peering needs its own CRDs; leadership is rotate's Lease instead
  (rotate.engine.leadership), and every replica watches so that a new leader has its watch
  established already.
* no Events posted (``posting.enabled = False``) and kopf's loggers at WARNING: kopf's
  per-object messages would name handlers and outcomes on the Secrets; nothing of a body is
  ever logged by rotate.
* login from rotate's own kube client (:meth:`KubeClient.connection`): the same kubeconfig,
  context or ServiceAccount directory (``ROTATE_SERVICEACCOUNT_DIR``) as every other
  request, the token re-read on every login (kopf logs in again on a 401).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Collection
from typing import Any

from rotate.clients.kube import KubeClient

#: kopf's and its HTTP client's loggers: quiet (see the module docstring)
_QUIET = ("kopf", "aiohttp", "asyncio")


class KopfSecretWatch:
    """Watches Secrets ``targets`` (namespace, name) in their namespaces; ``ready`` once kopf
    is up *and* its listing delivered a target (the API server answered the watch: a login
    refused or a missing permission never makes it ready), until the thread ends."""

    def __init__(self, kube: KubeClient, targets: Collection[tuple[str, str]],
                 on_change: Callable[[str, str], None]) -> None:
        self._kube = kube
        self._targets = frozenset(targets)
        self._on_change = on_change
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._seen = threading.Event()  # a target was listed or changed
        self._thread: threading.Thread | None = None
        self.failure = ""  # why the watch ended, when it did on its own

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and self._seen.is_set() and self.alive

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        for name in _QUIET:
            logging.getLogger(name).setLevel(logging.WARNING)
        # "OS signals are ignored: running not in the main thread": rotate handles them
        logging.getLogger("kopf._core.reactor.running").setLevel(logging.ERROR)
        self._thread = threading.Thread(target=self._run, name="secret-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            asyncio.run(self._operator())
        except Exception as exc:  # kopf's text may quote an object: name the type only
            self.failure = f"the Secret watch stopped ({type(exc).__name__})"
        finally:
            self._ready.clear()

    async def _operator(self) -> None:
        import kopf

        registry = kopf.OperatorRegistry()
        settings = kopf.OperatorSettings()
        settings.peering.standalone = True
        settings.scanning.disabled = True  # exact namespaces: no cluster-wide namespace list
        settings.posting.enabled = False
        settings.persistence.diffbase_storage = kopf.MultiDiffBaseStorage([])
        settings.persistence.progress_storage = kopf.MultiProgressStorage([])
        settings.persistence.finalizer = "rotate.dev/unused"  # never added: no on.delete
        settings.watching.server_timeout = 60
        settings.watching.client_timeout = 90
        targets, on_change, kube, seen = self._targets, self._on_change, self._kube, self._seen

        def login(**_: Any) -> Any:
            conn = kube.connection()
            return kopf.ConnectionInfo(
                server=conn.server, ca_path=conn.ca_path, insecure=conn.insecure,
                scheme="Bearer" if conn.token is not None else None,
                token=conn.token.reveal() if conn.token is not None else None,
                certificate_path=conn.cert_path, private_key_path=conn.key_path)

        def wanted(name: str | None, namespace: str | None, **_: Any) -> bool:
            return (str(namespace), str(name)) in targets

        def event(name: str | None, namespace: str | None, type: str | None,
                  **_: Any) -> None:
            seen.set()
            if type in ("ADDED", "MODIFIED", None):  # None: the initial listing
                on_change(str(namespace), str(name))

        kopf.on.login(registry=registry)(login)
        kopf.on.event("", "v1", "secrets", registry=registry, when=wanted)(event)
        await kopf.operator(
            registry=registry, settings=settings, standalone=True,
            namespaces=sorted({ns for ns, _ in targets}),
            stop_flag=self._stop, ready_flag=self._ready)
