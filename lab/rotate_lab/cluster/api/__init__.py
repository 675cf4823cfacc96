"""The lab's Kubernetes API server: HTTPS REST over an in-memory object store.

:mod:`.apiserver` owns the wire (TLS, authentication, watch streaming, the service proxy);
:mod:`.rest` routes requests onto :mod:`.store` (objects, the global resourceVersion,
watches), which validates (:mod:`.validation`), patches (:mod:`.patch`) and selects
(:mod:`.selectors`).  :mod:`.auth`, :mod:`.rbac` and :mod:`.tokens` decide who may do what.
Nothing here knows about controllers, pods or the lab's processes.
"""
