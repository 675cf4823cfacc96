"""The sample shop: its manifests, chain file and schemas (package data in ``ecommerce/``,
read through :mod:`.files`), the shop scaled to N consumers (:mod:`.scaled`), what the shop
is made of (:mod:`.catalog`) and the sample service its pods run (:mod:`.sample_service`).
"""
