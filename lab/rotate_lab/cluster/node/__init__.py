"""The lab's node: the kubelet runs every Pod as local processes on its own loopback IP.

:mod:`.kubelet` (the Pod controller) → :mod:`.pod_runtime` (one pod's processes, probes and
status) → :mod:`.images` (image → program), :mod:`.containers` (environment, ``$(VAR)``,
volumes), :mod:`.incluster` (ServiceAccount mounts, the ``rotate`` image), :mod:`.probes`.
"""
