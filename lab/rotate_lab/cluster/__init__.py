"""The lab's stand-in for a Kubernetes control plane and its one node.

Run as one process (``python -m rotate_lab.cluster``, :mod:`rotate_lab.cluster.process`):
the API server over the object store (:mod:`.api`), the controllers (:mod:`.controllers`:
workloads, Services, ESO, Reloader) and the kubelet (:mod:`.node`, pods as local
processes), all sharing one :class:`~rotate_lab.cluster.context.LabContext`.

Layers, checked by ``lint-imports``: ``process`` → ``node`` → ``controllers`` → ``context``
→ ``api``; a module imports only from its own layer or lower ones.  The kubelet sits above
the controllers because it is one of them (a controller of Pods, on their reconcile loop).
"""
