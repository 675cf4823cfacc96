"""The lab: the whole rotation chain on one machine (see docs/lab.md).

A separate world. The product (``rotate.engine``, ``rotate.stages``, ``rotate.clients``) never
imports anything from here; only ``rotate.cli.commands.lab`` does, lazily.
"""
