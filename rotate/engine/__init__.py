"""The engine: a pure planner, an executor that journals every step, resume and rollback.

Public surface for the CLI is :mod:`rotate.engine.api`; data shapes are in
:mod:`rotate.engine.model`.
"""
