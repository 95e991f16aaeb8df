"""Workflows (SPEC 12): durable steps, timers, signals, children and dependencies on an
ordinary job, by replay. ``Context`` (the facade) calls the primitives, functions of
``steps``, ``timers``, ``signals`` and ``children``, on the run's ``run.WorkflowRun``,
which holds its ``records``, its ``connection`` and its ``spawn_writes``; they run the
statements of ``venturi.db.workflow``. ``graph`` is ``venturi.Workflow``; ``suspend``
the exceptions that end a run which must wait."""
