"""Tools for investigating venturi's performance, not benchmarks of record: the A/B
runners of two trees (``ab``: the whole comparison; ``drain_ab``: measurement by
measurement; ``claim_ab``: the claim statement alone), the profilers (``profile``:
pyinstrument of the worker or the enqueue path; ``claimprofile``: where a claim's time
goes), what each index costs the hot path (``index_cost``), where pickup latency goes
(``pickup``) and a protocol-reading proxy that counts a client's statements (``pgwire``).
Each is a command: ``python -m benchmarks.tools.<name> --help``.
"""
