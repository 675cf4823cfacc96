"""Service-account tokens: the TokenRequest and TokenReview APIs of the lab's API server.

What OpenBao's kubernetes auth method relies on, done the way a real API server does it:

- ``issue`` (``POST .../serviceaccounts/NAME/token``, ``kubectl create token``) mints a bound
  JWT, RS256-signed with a key the issuer generates, carrying ``iss``, ``sub`` =
  ``system:serviceaccount:NS:NAME``, ``aud``, ``exp``/``iat``/``nbf``, ``jti`` and the
  ``kubernetes.io`` claim (namespace, serviceaccount name and uid).
- ``review`` (``POST /apis/authentication.k8s.io/v1/tokenreviews``) answers truthfully: the
  signature, the time window, the audiences, and that the ServiceAccount still exists with the
  uid the token was bound to.  So deleting (or deleting and recreating) a ServiceAccount
  revokes its tokens, as with bound tokens in Kubernetes.

The key lives only in memory: tokens do not outlive the API server that issued them (a lab
restart revokes every token, which is harmless for a lab).  Why ``cryptography`` directly and
no JWT library: it is already a dependency, and RS256 is one sign and one verify call.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from rotate_lab.cluster.api.apierrors import ApiError, bad_request

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

    from rotate_lab.cluster.api.store import Store

#: as kube-apiserver's ``--service-account-issuer`` in most clusters; it is also the default
#: audience (``--api-audiences`` defaults to the issuer)
DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_EXPIRATION = 3600
#: the API server refuses shorter bound tokens (``may not specify a duration less than 10
#: minutes``)
MIN_EXPIRATION = 600
MAX_EXPIRATION = 2 ** 32
#: clock skew tolerated on ``nbf`` / ``exp``, as the API server's JWT validator
LEEWAY = 60
_GROUP_VERSION = "authentication.k8s.io/v1"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _rfc3339(epoch: int) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class TokenIssuer:
    """Signs and reviews service-account JWTs.  The RSA key is generated on first use (a
    2048-bit key costs ~0.1 s, which an API server that never issues a token should not pay)."""

    def __init__(self, issuer: str = DEFAULT_ISSUER) -> None:
        self.issuer = issuer
        self._key: RSAPrivateKey | None = None
        self._lock = threading.Lock()

    def _private_key(self) -> RSAPrivateKey:
        from cryptography.hazmat.primitives.asymmetric import rsa

        with self._lock:
            if self._key is None:
                self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            return self._key

    @property
    def key_id(self) -> str:
        """As Kubernetes derives ``kid``: SHA-256 of the DER public key, base64url."""
        from cryptography.hazmat.primitives import serialization

        der = self._private_key().public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        return _b64(hashlib.sha256(der).digest())

    # ------------------------------------------------------------------ issuing

    def sign(self, claims: dict[str, Any]) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        header = {"alg": "RS256", "kid": self.key_id}
        signing_input = (_b64(json.dumps(header, separators=(",", ":")).encode()) + "."
                         + _b64(json.dumps(claims, separators=(",", ":")).encode()))
        signature = self._private_key().sign(signing_input.encode(), padding.PKCS1v15(),
                                             hashes.SHA256())
        return signing_input + "." + _b64(signature)

    def claims_for(self, namespace: str, name: str, uid: str, audiences: list[str],
                   expiration_seconds: int, now: int | None = None) -> dict[str, Any]:
        issued = int(time.time()) if now is None else now
        return {
            "aud": audiences or [self.issuer], "exp": issued + expiration_seconds,
            "iat": issued, "iss": self.issuer, "jti": str(uuid.uuid4()),
            "kubernetes.io": {"namespace": namespace,
                              "serviceaccount": {"name": name, "uid": uid}},
            "nbf": issued, "sub": f"system:serviceaccount:{namespace}:{name}",
        }

    def token_request(self, store: Store, namespace: str, name: str,
                      body: dict[str, Any]) -> dict[str, Any]:
        """Answer a TokenRequest for ServiceAccount ``namespace/name`` (404 if absent)."""
        sa = store.get("ServiceAccount", namespace, name)
        spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        audiences = spec.get("audiences") or []
        if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
            raise bad_request("spec.audiences must be a list of strings")
        seconds = spec.get("expirationSeconds") or DEFAULT_EXPIRATION
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            raise bad_request("spec.expirationSeconds must be an integer")
        if seconds < MIN_EXPIRATION or seconds > MAX_EXPIRATION:
            bound = ("less than 10 minutes" if seconds < MIN_EXPIRATION
                     else "larger than 2^32 seconds")
            raise ApiError(422, "Invalid", f'TokenRequest.authentication.k8s.io "{name}" is '
                           f"invalid: spec.expirationSeconds: Invalid value: {seconds}: may not "
                           f"specify a duration {bound}")
        if spec.get("boundObjectRef"):
            raise bad_request("the lab's API server does not bind tokens to objects "
                              "(spec.boundObjectRef)")
        claims = self.claims_for(namespace, name, str(sa["metadata"]["uid"]),
                                 list(audiences), seconds)
        return {
            "kind": "TokenRequest", "apiVersion": _GROUP_VERSION,
            "metadata": {"name": name, "namespace": namespace,
                         "creationTimestamp": _rfc3339(claims["iat"])},
            "spec": {"audiences": claims["aud"], "expirationSeconds": seconds,
                     "boundObjectRef": None},
            "status": {"token": self.sign(claims),
                       "expirationTimestamp": _rfc3339(claims["exp"])},
        }

    # ------------------------------------------------------------------ reviewing

    def verify(self, token: str, now: float | None = None) -> dict[str, Any]:
        """The claims of a token this issuer signed and that is valid now; ValueError with a
        short reason (never the token) otherwise."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        parts = token.split(".")
        if len(parts) != 3:
            raise ValueError("not a JWT")
        try:
            header = json.loads(_unb64(parts[0]))
            claims = json.loads(_unb64(parts[1]))
            signature = _unb64(parts[2])
        except ValueError:
            raise ValueError("malformed JWT") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise ValueError("malformed JWT")
        if header.get("alg") != "RS256":
            raise ValueError("unexpected signing algorithm")
        try:
            self._private_key().public_key().verify(
                signature, f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(),
                hashes.SHA256())
        except InvalidSignature:
            raise ValueError("invalid signature") from None
        if claims.get("iss") != self.issuer:
            raise ValueError("unexpected issuer")
        t = time.time() if now is None else now
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if not isinstance(exp, int) or t > exp + LEEWAY:
            raise ValueError("token has expired")
        if isinstance(nbf, int) and t < nbf - LEEWAY:
            raise ValueError("token is not valid yet")
        return claims

    def review(self, store: Store, body: dict[str, Any]) -> dict[str, Any]:
        """Answer a TokenReview: ``status.authenticated`` and the user, or ``status.error``.

        Audiences: those the caller asks for (``spec.audiences``), else the API server's own
        (the issuer); the token must carry at least one of them, and the answer lists the ones
        it matched.  A valid signature is not enough: the ServiceAccount must still exist with
        the uid the token names."""
        spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        token = spec.get("token")
        wanted = spec.get("audiences") or [self.issuer]
        if not isinstance(wanted, list):
            raise bad_request("spec.audiences must be a list of strings")
        status: dict[str, Any] = {"user": {}}
        try:
            if not isinstance(token, str) or not token:
                raise ValueError("no token to review")
            claims = self.verify(token)
            aud = claims.get("aud")
            aud_list = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            matched = [a for a in wanted if a in aud_list]
            if not matched:
                raise ValueError("token audiences is invalid for the target audiences")
            k8s = claims.get("kubernetes.io")
            k8s = k8s if isinstance(k8s, dict) else {}
            sa_claim = k8s.get("serviceaccount")
            sa_claim = sa_claim if isinstance(sa_claim, dict) else {}
            namespace, name = str(k8s.get("namespace") or ""), str(sa_claim.get("name") or "")
            uid = str(sa_claim.get("uid") or "")
            try:
                sa = store.get("ServiceAccount", namespace, name)
            except ApiError:
                raise ValueError("service account has been deleted") from None
            if sa["metadata"].get("uid") != uid:
                raise ValueError("service account UID does not match the token's "
                                 "(it was deleted and recreated)")
        except ValueError as exc:
            # The real API server joins every authenticator's reason into one string.
            status["error"] = f"[invalid bearer token, {exc}]"
        else:
            status = {"authenticated": True, "audiences": matched, "user": {
                "username": f"system:serviceaccount:{namespace}:{name}", "uid": uid,
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                           "system:authenticated"],
                "extra": {"authentication.kubernetes.io/credential-id": [
                    f"JTI={claims.get('jti', '')}"]}}}
        return {"kind": "TokenReview", "apiVersion": _GROUP_VERSION,
                "metadata": {"creationTimestamp": None},
                "spec": {k: v for k, v in spec.items() if k in ("token", "audiences")},
                "status": status}
