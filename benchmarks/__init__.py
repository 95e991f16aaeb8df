"""venturi's benchmarks: the side-by-side comparison of record against procrastinate,
pgqueuer, chancy, DBOS and oban (``python -m benchmarks.compare``), the scenarios beside
it (``benchmarks.scenarios``) and the tools of investigation (``benchmarks.tools``).

Run from the repository root; see README.md. Nothing here is part of the test suite, and
nothing outside ``benchmarks/`` imports it.
"""
