"""The chaos soak: worker processes under SIGKILL, SIGTERM, terminated backends and a
PostgreSQL restart, and a check of the whole history afterwards.

Run it with ``python -m tests.chaos.harness --short`` (CI, about a minute) or ``--long``
(a release soak: at least 10 minutes and 100,000 jobs).

The soak is ``harness.py`` (``Harness``: its connection, the producer, the monitor and
the run; ``Result``, ``soak`` and the command line) with its knobs in ``config.py`` and
the mixins ``Harness`` is made of: ``fleet.py`` (the worker processes, the faults and
their schedule), ``soakcheck.py`` (the final check and the summary), ``flowload.py`` and
``groupload.py`` (the workflow and the grouped load). The network and server fault
scenarios (``python -m tests.chaos.scenarios NAME``) are ``scenarios.py`` (``Scenario``,
a ``Harness`` with its cluster or standby pair, its proxies and its timetable of faults;
``run`` and the command line) with its mixins ``scenariofaults.py`` (the faults) and
``scenariocheck.py`` (the check on top of the soak's, and the figures).
"""
