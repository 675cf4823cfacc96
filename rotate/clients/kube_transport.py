"""One connection to the Kubernetes API server: kubeconfig (or in-cluster) loading, the
connection pool, and raw REST requests sent with their failures translated.

:class:`rotate.clients.kube.KubeClient` builds on it (the kinds, their paths, the Kube seam);
this module knows nothing of kinds or Secrets.  Why a transport of its own: the official
client does kubeconfig, TLS, token refresh and pooling well, and nothing else of it is used.

Invariants:

* Errors are built from the HTTP status and the Status ``reason`` enum (``Conflict``,
  ``AlreadyExists`` …) — never from the response body or ``str(ApiException)``, which carry
  the object (for a Secret: its data).  Field causes keep the field and reason enum only.
* A loader's failure is told in our words (rotate.clients.kubeconfig): its text may quote
  the kubeconfig, credentials included.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from rotate import __version__
from rotate.clients.kube_kinds import SYSTEM
from rotate.clients.tls import tls_failure, tls_reason
from rotate.core.errors import (
    ClientError,
    PermanentError,
    TemporaryError,
    UsageError,
    error_for_status,
)
from rotate.core.secret import Secret
from rotate.core.urls import display_url

#: connections kept to the API server (see KubeTransport.__init__)
POOL_SIZE = 32
#: where a pod's ServiceAccount token, CA and namespace are mounted (kubelet's fixed path)
SERVICEACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

#: the Status ``reason`` enum, in words (the only part of an error body we repeat)
REASONS = {
    "AlreadyExists": "already exists",
    "Conflict": "changed by someone else (stale resourceVersion)",
    "NotFound": "not found",
    "Forbidden": "not allowed",
    "Unauthorized": "credentials refused",
    "Invalid": "invalid",
    "Gone": "resource version too old",
    "Expired": "resource version too old",
    "TooManyRequests": "throttled",
    "ServiceUnavailable": "unavailable",
    "Timeout": "timed out",
}


def _load_in_cluster(cfg: Any, directory: str) -> None:
    from kubernetes.config.incluster_config import InClusterConfigLoader

    InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=f"{directory}/token", cert_filename=f"{directory}/ca.crt",
    ).load_and_set(cfg)


@dataclass(frozen=True)
class KubeConnection:
    """The API server's address and this client's credentials (the token masked)."""

    server: str
    ca_path: str | None
    insecure: bool
    token: Secret | None
    cert_path: str | None
    key_path: str | None


class KubeTransport:
    """Raw REST requests to one kubeconfig context's API server (KUBECONFIG/~/.kube/config
    when None, in-cluster service account as the last resort, as kubectl does).

    In-cluster: ``KUBERNETES_SERVICE_HOST``/``_PORT`` and the ``token`` and ``ca.crt`` of
    ``serviceaccount_dir`` (default :data:`SERVICEACCOUNT_DIR`; ``ROTATE_SERVICEACCOUNT_DIR``
    moves it, for a token projected elsewhere — and for the lab, whose pods are processes).
    The token file is re-read as the kubelet refreshes it."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None,
                 serviceaccount_dir: str | None = None) -> None:
        import urllib3
        from kubernetes import client, config

        cfg = client.Configuration()
        try:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=cfg,
                persist_config=False)
        except Exception:
            # the loader's text may quote the file: say why in our words (rotate.clients.kubeconfig)
            from rotate.clients.kubeconfig import why_unusable

            if kubeconfig is not None or context is not None:
                ctx = f" (context {context})" if context else ""
                raise UsageError(f"cannot use the kubeconfig{ctx}: "
                                 f"{why_unusable(kubeconfig, context)}",
                                 hint="check --kubeconfig/KUBECONFIG and --context "
                                      "(`kubectl config get-contexts` lists the contexts)"
                                 ) from None
            try:
                _load_in_cluster(cfg, serviceaccount_dir or SERVICEACCOUNT_DIR)
            except Exception:
                raise UsageError("no kubeconfig found (set KUBECONFIG or --kubeconfig)") from None
        # preflight's parts fan out at once (up to 3 × 8 requests) and a run's lanes and
        # watches add theirs: a pool smaller than that opens and discards connections
        # (urllib3 logs each discard as a warning); the default is 5 per CPU
        cfg.connection_pool_maxsize = max(int(cfg.connection_pool_maxsize or 0), POOL_SIZE)
        self._urllib3 = urllib3
        #: what reading an answer's body may raise: the connection was lost
        self.read_errors: tuple[type[BaseException], ...] = (
            urllib3.exceptions.HTTPError, OSError)
        where = f"kubeconfig {kubeconfig}" if kubeconfig else (
            "the kubeconfig (KUBECONFIG or ~/.kube/config)")
        self._ca_setting = (f"check certificate-authority / certificate-authority-data of the "
                            f"cluster of {where}" + (f", context {context}" if context else ""))
        self.api = client.ApiClient(cfg)
        # named in the API server's audit/metrics (the lab counts requests per client)
        self.api.user_agent = f"rotate/{__version__}"
        self.server = str(cfg.host)

    def connection(self) -> KubeConnection:
        """Where and as whom this client talks to the API server, for a second client of
        its own (kopf, rotate.clients.secret_watch); the token re-read as the client would."""
        cfg = self.api.configuration
        bearer = str(cfg.get_api_key_with_prefix("BearerToken")
                     or cfg.get_api_key_with_prefix("authorization") or "")
        scheme, _, rest = bearer.partition(" ")
        token = (rest if scheme.lower() == "bearer" else bearer).strip()
        return KubeConnection(
            server=self.server, ca_path=cfg.ssl_ca_cert or None,
            insecure=not cfg.verify_ssl, token=Secret(token) if token else None,
            cert_path=cfg.cert_file or None, key_path=cfg.key_file or None)

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]

    def send(self, method: str, path: str, operation: str, *, body: Any = None,
              query: Mapping[str, str] | None = None, content_type: str | None = None,
              timeout: float | tuple[float, float] | None = 30) -> Any:
        """The raw urllib3 response (unread); transport failures translated."""
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers["Content-Type"] = "application/json"
        url_path = path + (f"?{urlencode(query)}" if query else "")
        try:
            request = self.api.param_serialize(method, url_path, header_params=headers,
                                                body=body, auth_settings=["BearerToken"])
            return self.api.call_api(*request, _request_timeout=timeout).response
        except ApiException as exc:  # the rest layer raises status 0 for TLS failures
            if not exc.status:
                raise self.tls_error(exc, operation) from None
            raise error_for_status(int(exc.status), SYSTEM, operation) from None
        except self._urllib3.exceptions.TimeoutError:
            raise TemporaryError(SYSTEM, operation, "timed out") from None
        except (self._urllib3.exceptions.HTTPError, OSError) as exc:
            if tls_failure(exc) is not None:
                raise self.tls_error(exc, operation) from None
            raise TemporaryError(SYSTEM, operation,
                                 f"unreachable at {display_url(self.server)}") from None

    def tls_error(self, exc: BaseException, operation: str) -> PermanentError:
        error = tls_failure(exc) or ssl.SSLCertVerificationError()
        return PermanentError(SYSTEM, operation, tls_reason(error, self.server,
                                                            self._ca_setting))

    def error(self, status: int, raw: bytes, operation: str) -> ClientError:
        reason_enum, causes = "", []
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and doc.get("kind") == "Status":
            reason_enum = str(doc.get("reason") or "")
            for cause in (doc.get("details") or {}).get("causes") or []:
                if isinstance(cause, dict):  # field + reason enum only: messages quote values
                    causes.append((str(cause.get("field", "")), str(cause.get("reason", ""))))
        if status == 410:
            return TemporaryError(SYSTEM, operation, "resource version too old", status=410)
        return error_for_status(status, SYSTEM, operation, REASONS.get(reason_enum),
                                details=causes)

    def request(self, method: str, path: str, operation: str, **kw: Any) -> Any:
        """Send and decode a JSON answer; a ClientError for any status >= 400."""
        response = self.send(method, path, operation, **kw)
        try:
            raw = response.data
        except (self._urllib3.exceptions.HTTPError, OSError):
            raise TemporaryError(SYSTEM, operation, "connection lost") from None
        finally:
            response.release_conn()
        if response.status >= 400:
            raise self.error(int(response.status), raw, operation)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise PermanentError(SYSTEM, operation, "malformed JSON in the answer") from None
