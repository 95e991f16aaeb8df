"""The chaos soak: worker processes under SIGKILL, SIGTERM, terminated backends and a
PostgreSQL restart, and a check of the whole history afterwards.

Run it with ``python -m tests.chaos.harness --short`` (CI, about a minute) or ``--long``
(a release soak: at least 10 minutes and 100,000 jobs).
"""
