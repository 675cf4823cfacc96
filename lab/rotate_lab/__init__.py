"""The lab: the whole rotation chain on one machine; distribution ``rotate-lab``.

See docs/lab.md, and docs/design.md, "The lab", for the layout: ``cli`` → ``control`` →
``kubeproxy`` → ``cluster`` → ``shop`` | ``systems`` → ``faults`` | ``host`` (checked by
``lint-imports``).

A separate world.  The product never imports anything from here; ``rotate lab …`` loads
:mod:`rotate_lab.cli` through the entry point ``rotate.plugins:lab`` (see lab/pyproject.toml).
The lab uses the product only through the surface it documents for plug-ins,
``rotate.cli.plugin_api`` and ``rotate.core.errors``.
"""
