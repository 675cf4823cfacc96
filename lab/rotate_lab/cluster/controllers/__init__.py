"""The controllers a rotation depends on, each a reconcile loop over the store
(:mod:`.base`): Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, Service/Endpoints,
the ExternalSecret controller (ESO, reading OpenBao over HTTP) and Reloader.
"""
