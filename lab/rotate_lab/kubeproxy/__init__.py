"""The lab's kube-proxy: ClusterIP traffic carried by a process of its own.

``python -m rotate_lab.kubeproxy --dir DIR`` is started by ``rotate lab up`` once the API
server answers (:mod:`rotate_lab.control.launch`), recorded in ``DIR/pids.json`` as ``kube_proxy``
and stopped by ``rotate lab down`` like the other parts.  It is to the lab what kube-proxy
is to a node:

- it learns Services and Endpoints from the API server only (list + watch over HTTPS, with
  the lab's kubeconfig: :mod:`rotate_lab.kubeproxy.informer`), never from the cluster
  process's memory;
- it listens on every ``ClusterIP:port`` (TCP) and hands each accepted connection to a Ready
  endpoint, round-robin, chosen when the connection arrives
  (:mod:`rotate_lab.kubeproxy.forward`).  A rollout is therefore visible to the next
  connection and never to an established one, like kube-proxy's conntrack entries; with no
  Ready endpoint the connection is closed;
- one asyncio loop carries every connection (no thread per connection): the benchmark's
  hundreds of connections a second cost this process, not the API server's GIL.

Why a separate process: the cluster process serves the API, runs the controllers and the
kubelet under one GIL; byte pumps there would make every API request of ``rotate`` wait
behind the load the benchmark puts on the shop, and the benchmark would measure the lab,
not ``rotate``.
"""
