"""The scenarios beside the benchmark of record, venturi alone, each a command of its own
(``python -m benchmarks.scenarios.<name> --help``): bulk enqueue by COPY (``bulk``), ten
million pending (``scale``), the steady state with retention and the history table
(``steady``), workers behind PgBouncer (``pooler``), the dashboard's pages at a million
jobs (``web_pages``, ``web_workflows``) and how soon ``venturi.wait`` wakes
(``wait_latency``). ``workflows`` is the workflow scenario ``benchmarks.compare`` runs
(``--workflows``) against chancy and DBOS.

Each makes a database of its own on the admin DSN (``--dsn``) and drops it at the end;
``bulk``, ``scale``, ``steady`` and ``pooler`` write a ``--json`` that
``benchmarks.compare`` reads for their targets.
"""
