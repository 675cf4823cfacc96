"""The systems a rotation touches outside Kubernetes, run for real on loopback.

:mod:`.openbao` (the real ``bao server``), :mod:`.configcenter` (the Config Center reference
server, docs/config-center-api.md) and :mod:`.postgres` (Debian's PostgreSQL binaries, the
credentials OpenBao holds for it; :mod:`.postgres_entrypoint` is the official image's
entrypoint the node runs for a ``postgres`` image).
"""
