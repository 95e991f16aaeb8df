"""The arithmetic of the groups scenario (``benchmarks.scenarios.groups``), kept pure so a
unit test can pin it: how many jobs each group gets (Zipf or uniform), Jain's fairness
index, and the windows a run's claims fall into."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


def zipf_weights(n: int, s: float) -> list[float]:
    """The Zipf distribution over ranks 1..n with exponent ``s``: weight k is k**-s over
    their sum (the first is the hottest)."""
    if n < 1 or s < 0:
        raise ValueError("zipf_weights: n >= 1 and s >= 0")
    raw = [k**-s for k in range(1, n + 1)]
    total = sum(raw)
    return [w / total for w in raw]


def group_counts(total: int, groups: int, s: float | None) -> list[int]:
    """``total`` jobs over ``groups`` groups, every group at least one (so each has work):
    the rest spread by Zipf weights of exponent ``s``, or evenly when ``s`` is None. The
    counts are deterministic (largest remainders go first) and sum to ``total``."""
    if groups < 1 or total < groups:
        raise ValueError("group_counts: at least one job per group")
    rest = total - groups
    weights = [1 / groups] * groups if s is None else zipf_weights(groups, s)
    shares = [rest * w for w in weights]
    counts = [int(x) for x in shares]
    order = sorted(range(groups), key=lambda g: counts[g] - shares[g])
    for g in order[: rest - sum(counts)]:
        counts[g] += 1
    return [c + 1 for c in counts]


def jain_index(values: Iterable[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 when every value is equal, 1/n
    when one takes everything; NaN for no values or all zero."""
    xs = list(values)
    square = sum(x * x for x in xs)
    if not xs or square == 0:
        return float("nan")
    return sum(xs) ** 2 / (len(xs) * square)


def per_window(
    starts: Iterable[tuple[float, str]], t0: float, window: float, windows: int
) -> list[Counter[str]]:
    """The starts ``(instant, group)`` counted per group in ``windows`` consecutive
    windows of ``window`` seconds from ``t0``; starts outside them are left out."""
    out: list[Counter[str]] = [Counter() for _ in range(windows)]
    for at, group in starts:
        k = int((at - t0) // window)
        if 0 <= k < windows:
            out[k][group] += 1
    return out
