"""The side-by-side benchmark of venturi, procrastinate and pgqueuer (issue 4).

Run ``python -m benchmarks.compare --quick`` from the repository root; see README.md.
Nothing here is part of the test suite.
"""
