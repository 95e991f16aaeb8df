"""The arithmetic of the groups scenario (``benchmarks.scenarios.groups``), kept pure so a
unit test can pin it: how many jobs each group gets (Zipf or uniform), Jain's fairness
index, and the windows a run's claims fall into.

tests/ may not import benchmarks (tests/unit/test_benchmarks_tree.py), so these are
checked by their examples: ``python -m doctest benchmarks/scenarios/groups_stats.py``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


def zipf_weights(n: int, s: float) -> list[float]:
    """The Zipf distribution over ranks 1..n with exponent ``s``: weight k is k**-s over
    their sum (the first is the hottest).

    >>> w = zipf_weights(3, 1.0)
    >>> [round(x, 4) for x in w], round(sum(w), 10)
    ([0.5455, 0.2727, 0.1818], 1.0)
    """
    if n < 1 or s < 0:
        raise ValueError("zipf_weights: n >= 1 and s >= 0")
    raw = [k**-s for k in range(1, n + 1)]
    total = sum(raw)
    return [w / total for w in raw]


def group_counts(total: int, groups: int, s: float | None) -> list[int]:
    """``total`` jobs over ``groups`` groups, every group at least one (so each has work):
    the rest spread by Zipf weights of exponent ``s``, or evenly when ``s`` is None. The
    counts are deterministic (largest remainders go first) and sum to ``total``.

    >>> group_counts(20, 10, None)
    [2, 2, 2, 2, 2, 2, 2, 2, 2, 2]
    >>> c = group_counts(20_000, 10_000, 1.1)
    >>> sum(c), min(c), c[0]
    (20000, 1, 1516)
    """
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
    when one takes everything; NaN for no values or all zero.

    >>> jain_index([5, 5, 5, 5]), jain_index([1, 0, 0, 0]), jain_index([3, 1])
    (1.0, 0.25, 0.8)
    """
    xs = list(values)
    square = sum(x * x for x in xs)
    if not xs or square == 0:
        return float("nan")
    return sum(xs) ** 2 / (len(xs) * square)


def per_window(
    starts: Iterable[tuple[float, str]], t0: float, window: float, windows: int
) -> list[Counter[str]]:
    """The starts ``(instant, group)`` counted per group in ``windows`` consecutive
    windows of ``window`` seconds from ``t0``; starts outside them are left out.

    >>> [dict(c) for c in per_window([(0.5, "a"), (1.5, "a"), (1.7, "b"), (-1, "a")], 0, 1, 2)]
    [{'a': 1}, {'a': 1, 'b': 1}]
    """
    out: list[Counter[str]] = [Counter() for _ in range(windows)]
    for at, group in starts:
        k = int((at - t0) // window)
        if 0 <= k < windows:
            out[k][group] += 1
    return out
