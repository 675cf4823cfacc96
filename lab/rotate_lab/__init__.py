"""The lab: the whole rotation chain on one machine; distribution ``rotate-lab``.

See docs/design.md, "The lab".

A separate world.  The product never imports anything from here; ``rotate lab …`` loads
:mod:`rotate_lab.cli` through the entry point ``rotate.plugins:lab`` (see lab/pyproject.toml).
The lab depends on the product (it reuses the CLI's console and the core errors).
"""
