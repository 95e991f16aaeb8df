"""The worker runtime: ``Worker`` (``worker``, the facade), its ``config`` (the knobs
and a ``KindPolicy`` per kind) and the claim-and-dispatch ``loop`` it runs.

``claimer`` decides what to claim, ``inflight`` holds the slots and runs handlers
through ``executor``, ``completer`` writes their ``settlement``, ``recovery`` returns
expired claims, ``heartbeat`` renews leases and hears cancel requests, ``listener``
wakes the loop, ``maintainer`` runs the maintenance tasks (``venturi.maintenance``)
beside it, and ``instruments`` counts. ``group`` runs several workers in one process.
"""
