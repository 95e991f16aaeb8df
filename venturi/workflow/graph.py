"""``venturi.Workflow``: a graph of jobs enqueued in one transaction; a job runs once
every job it comes ``after`` has completed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from venturi import db, validate
from venturi.db.enqueue import JobSpec
from venturi.errors import ConfigError
from venturi.groups import check_group
from venturi.sql import DEFAULT_SCHEMA
from venturi.traceparent import current_traceparent


class Node:
    """A node of a ``Workflow``, as ``Workflow.add`` returns it (pass it to ``after``)."""

    __slots__ = ("after", "name", "spec", "workflow")

    def __init__(
        self, workflow: Workflow, name: str, spec: JobSpec, after: tuple[Node, ...]
    ) -> None:
        self.workflow = workflow
        self.name = name
        self.spec = spec
        self.after = after

    def __repr__(self) -> str:
        return f"<venturi.Workflow node {self.name!r} ({self.spec.kind})>"


class Workflow:
    """A graph of jobs enqueued together::

        wf = venturi.Workflow()
        a = wf.add("extract", extract.job(Source(url)))
        b = wf.add("transform", transform.job(Batch()), after=[a])
        wf.add("load", load.job(Target()), after=[a, b])
        ids = await wf.enqueue(conn)  # {"extract": id, ...}

    A job runs only once every job it comes ``after`` has completed; its handler reads
    their results with ``ctx.result_of(name)``. A dependency that ends dead or cancelled
    cancels its dependents, transitively. Nodes take no ``key``.
    """

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}

    def add(self, name: str, job: JobSpec, *, after: Sequence[Node | str] = ()) -> Node:
        """Add job ``job`` (built with ``task.job(carry)``) as node ``name``, to run after
        the nodes ``after`` (nodes of this workflow, or their names)."""
        if not isinstance(name, str) or not name or len(name) > 200:
            raise ConfigError(
                f"Workflow.add: name must be a non-empty string, got {validate.shown(name)}"
            )
        if name in self._nodes:
            raise ConfigError(
                f"Workflow.add: the workflow already holds a node {validate.shown(name)}"
            )
        if not isinstance(job, JobSpec):
            raise ConfigError(
                f"Workflow.add({validate.shown(name)}): job must be built with task.job(carry)"
            )
        if job.key is not None:
            raise ConfigError(
                f"Workflow.add({validate.shown(name)}): a workflow's nodes take no key"
            )
        if job.group is not None:  # a spec built by hand: as enqueue_many checks it
            check_group(job.group, f"Workflow.add({validate.shown(name)}): group")
        if isinstance(after, Node | str):
            after = [after]
        deps: list[Node] = []
        for dep in after:
            node = self._nodes.get(dep) if isinstance(dep, str) else dep
            if (
                not isinstance(node, Node)
                or node.workflow is not self
                or node.name not in self._nodes
            ):
                raise ConfigError(
                    f"Workflow.add({validate.shown(name)}): after names {validate.shown(dep)}, which is not a node of this "
                    "workflow"
                )
            if node not in deps:
                deps.append(node)
        node = Node(self, name, job, tuple(deps))
        self._nodes[name] = node
        return node

    def _ordered(self) -> list[Node]:
        """The nodes, each after those it depends on; ConfigError on a cycle. (``add``
        only takes nodes already added, so a cycle needs a node changed by hand; the
        check keeps the promise anyway.)"""
        order: list[Node] = []
        state: dict[str, int] = {}

        def visit(node: Node, path: tuple[str, ...]) -> None:
            if state.get(node.name) == 2:
                return
            if state.get(node.name) == 1:
                cycle = " -> ".join((*path, node.name))
                raise ConfigError(f"Workflow: the nodes form a cycle: {cycle}")
            state[node.name] = 1
            for dep in node.after:
                if self._nodes.get(dep.name) is not dep:
                    raise ConfigError(
                        f"Workflow: node {validate.shown(node.name)} comes after {validate.shown(dep.name)}, which is not "
                        "a node of this workflow"
                    )
                visit(dep, (*path, node.name))
            state[node.name] = 2
            order.append(node)

        for node in self._nodes.values():
            visit(node, ())
        return order

    def _plan(self) -> tuple[list[Node], list[db.workflow.GraphJob]]:
        if not self._nodes:
            raise ConfigError("Workflow: add at least one node before enqueueing")
        order = self._ordered()
        pos = {n.name: i for i, n in enumerate(order)}
        rows = [
            db.workflow.GraphJob(n.spec, tuple((pos[d.name], d.name) for d in n.after))
            for n in order
        ]
        return order, rows

    async def enqueue(self, conn: Any, *, schema: str = DEFAULT_SCHEMA) -> dict[str, int]:
        """Insert every node in one transaction (the caller's, on a connection or session
        with one open) on any connection ``Task.enqueue`` takes; node name -> job id."""
        order, rows = self._plan()
        ids = await db.workflow.workflow_insert(
            conn, schema=schema, nodes=rows, traceparent=current_traceparent()
        )
        return {n.name: i for n, i in zip(order, ids, strict=True)}

    def enqueue_sync(self, conn: Any, *, schema: str = DEFAULT_SCHEMA) -> dict[str, int]:
        """``enqueue`` on any connection ``Task.enqueue_sync`` takes."""
        order, rows = self._plan()
        ids = db.workflow.workflow_insert_sync(
            conn, schema=schema, nodes=rows, traceparent=current_traceparent()
        )
        return {n.name: i for n, i in zip(order, ids, strict=True)}
