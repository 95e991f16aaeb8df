"""Carries shared by the tests' tasks."""

from __future__ import annotations

import msgspec


class Item(msgspec.Struct):
    """A carry of one integer: what a test enqueues when the carry is not its subject
    (files that called it ``N`` import it under that name)."""

    n: int
