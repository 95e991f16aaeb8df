"""Workflows (SPEC 12): durable steps, timers, signals, children and dependencies on an
ordinary job, by replay. ``state`` holds one run's view of its job's records; ``steps``,
``timers``, ``signals`` and ``children`` are the primitives on it, ``durable`` the
object a worker's ``Context`` hands them through; ``graph`` is ``venturi.Workflow``;
``suspend`` the exceptions that end a run which must wait."""
