"""What the shop is made of, as the packaged manifests (``ecommerce/``) declare it.

The names here must agree with ``ecommerce/*.yaml`` and ``ecommerce/rotate.yaml``: the lab
seeds OpenBao and the Config Center for exactly these services before the cluster starts
their pods, and a service missing here would find no bootstrap document.
"""

from __future__ import annotations

#: the shop's services (namespace ``shop``), one Deployment and Service each
SHOP = ("user", "product", "inventory", "cart", "order", "payment", "shipping", "review",
        "search", "notification")
#: Dragonfly's Service as pods resolve it
DRAGONFLY_HOST = "dragonfly.dragonfly.svc.cluster.local"
#: Dragonfly's password in OpenBao's KV v2 at ``secret/`` (credential ``dragonfly``)
BAO_SECRET_PATH = "infra/dragonfly"
