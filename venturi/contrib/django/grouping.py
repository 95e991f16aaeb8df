"""The group (docs/groups.md) of the Django tasks enqueued in a block: ``with
group("acme"): export.enqueue(...)``. Django's ``Task.using()`` takes no argument a
backend could add on every Django version, and a task defined under another backend
(``DummyBackend`` in a project's tests) is not of this backend's class; a block works
with every task and every backend (the others ignore it), ``aenqueue`` included (asgiref
copies the context into its thread)."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from venturi.groups import check_group

# The group of the enqueues in this context; a Django task run by the worker starts with
# its own job's group (SPEC 13: a child takes its parent's group unless given one).
_GROUP: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "venturi_django_group", default=None
)


@contextmanager
def group(name: str | None) -> Iterator[None]:
    """Every Django task ``VenturiBackend`` enqueues in this block belongs to the group
    ``name`` (``None``: to none). A bad name is ``venturi.ConfigError`` here, before any
    write."""
    token = _GROUP.set(None if name is None else check_group(name))
    try:
        yield
    finally:
        _GROUP.reset(token)


def current_group() -> str | None:
    """The group of a Django task enqueued here and now (None: none)."""
    return _GROUP.get()


@contextmanager
def running_in(name: str | None) -> Iterator[None]:
    """The block where the worker runs a Django task of group ``name``: what it enqueues
    takes that group unless it says otherwise."""
    token = _GROUP.set(name)
    try:
        yield
    finally:
        _GROUP.reset(token)
