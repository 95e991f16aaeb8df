"""The worker runtime: the claim loop (``worker``) and the parts it drives.

``claimer`` decides what to claim, ``inflight`` runs handlers through ``executor``,
``completer`` writes their ``settlement``, ``recovery`` returns expired claims,
``heartbeat`` renews leases and hears cancel requests, ``listener`` wakes the loop, and
``instruments`` counts. ``group`` runs several workers in one process.
"""
