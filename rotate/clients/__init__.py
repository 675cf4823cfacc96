"""Adapters to the outside world, each behind a narrow Protocol in :mod:`rotate.clients.seams`.

Only modules in this package import hvac, kubernetes, httpx or subprocess, and they import
them lazily (inside constructors), so ``rotate --help`` stays cheap.  Every library exception
is translated here into :mod:`rotate.core.errors` without its text.
"""
