"""The engine: a pure planner, an executor that journals every step, resume and rollback.

Public surface for the CLI is :class:`rotate.engine.api.Engine`; data shapes are in
:mod:`rotate.engine.model`; what each step kind does is in :mod:`rotate.engine.kinds`.

Words, one meaning each: a *stage* is one of ①..④ of the chain (backend, sync, provider,
consumers; rotate/stages holds their operations); a *step* is one planned unit of a run
(:class:`~rotate.engine.model.PlannedStep`); a *step kind* is the class that plans, runs
and undoes steps of one kind (``backend.write``).
"""
