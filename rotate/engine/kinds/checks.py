"""The ids of the preflight checks named after a stage of the chain, as its step kinds are
(chain.md "Preflight"): stage ①'s, which prove that ``backend.write`` can write.  Declared
beside the kinds so that a stage's names live in one package; preflight and ``doctor`` run
the checks, the plan and the report show their ids.
"""

from __future__ import annotations

#: OpenBao/Vault answers; the current version of the credential's path
BACKEND_REACHABLE = "backend.reachable"
#: the token may read and update the path's data and metadata
BACKEND_CAPABILITIES = "backend.capabilities"
#: the token is one OpenBao knows (lookup-self): tells an expired token from a missing policy
BACKEND_TOKEN = "backend.token"
