"""Several worker processes under one supervisor: ``venturi worker --processes P``.

Each child runs ``venturi worker`` with the supervisor's arguments and is restarted
after ``restart_delay`` (one second) when it exits; SIGINT/SIGTERM asks every child to
drain (SIGHUP too), a second signal makes them stop at once. The supervisor asks over each child's
pipe, not with a signal of its own (``venturi.cli.signals.ask``). A child stops with its
supervisor, even one killed by SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import itertools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from venturi.cli import signals as asking
from venturi.cli.common import fail
from venturi.errors import ConfigError
from venturi.runtime.config import WorkerConfig

# The supervisor's log lines keep the name they had when it lived in venturi.supervisor.
log = logging.getLogger("venturi.supervisor")

# A process that exits is restarted after the delay a Pool waits before restarting a loop.
DEFAULT_RESTART_DELAY = 1.0
# The most worker processes one supervisor starts: far past any machine's cores.
MAX_PROCESSES = 1024


def child_arguments(ctx: Any, skip: Sequence[str] = ("processes", "dsn")) -> list[str]:
    """The arguments of a running command (``venturi worker``, its typer/click context),
    as a child would be given them: every parameter but those in ``skip``, with its
    parsed value, so options added to the command later are passed on too."""
    args: list[str] = []
    for param in ctx.command.params:
        if param.name is None or param.name in skip or param.name not in ctx.params:
            continue
        value = ctx.params[param.name]
        values = list(value) if param.multiple or param.nargs != 1 else [value]
        if param.param_type_name == "argument":
            args.extend(_text(v) for v in values)
        elif param.param_type_name != "option" or value is None:
            continue
        elif param.is_flag and param.secondary_opts:
            args.append(param.opts[0] if value else param.secondary_opts[0])
        elif param.is_flag:
            if value:
                args.append(param.opts[0])
        else:
            for v in values:
                args.extend([param.opts[0], _text(v)])
    return args


def _text(value: Any) -> str:
    return str(value.value if isinstance(value, enum.Enum) else value)


def run_processes(
    processes: int,
    args: Sequence[str],
    dsn: str,
    listen_dsn: str | None = None,
    *,
    restart_delay: float = DEFAULT_RESTART_DELAY,
) -> int:
    """Run ``processes`` worker processes (``venturi worker ARGS``) until SIGINT/SIGTERM,
    restarting one that exits after ``restart_delay``; returns the exit status: 0 after a
    graceful stop, 130 after one at once (a second signal), 2 when a process could not
    start (exit status 2 on its first start)."""
    try:
        check_arguments(processes, args, dsn, listen_dsn)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    return asyncio.run(_Supervisor(processes, list(args), dsn, listen_dsn, restart_delay).run())


# The worker's knobs a child would check only once started, by option (``--poll-max``):
# not the flags (typer parsed them already, and they take no value), nor the priority
# ratio (the command checked it; its ``strict`` is the knob's None).
_KNOBS = {
    f"--{name.replace('_', '-')}": name
    for name, param in inspect.signature(WorkerConfig.build).parameters.items()
    if name not in ("pool_or_dsn", "priority_ratio") and not isinstance(param.default, bool)
}
# The highest TCP port.
_MAX_PORT = 65535


def check_arguments(
    processes: int, args: Sequence[str], dsn: str, listen_dsn: str | None = None
) -> None:
    """Check the children's worker knobs as each child would (``WorkerConfig``), and the
    metrics port of each: a ``ConfigError`` before any child starts. Checked only in the
    children, ``--concurrency 0 --processes 3`` printed its error three times, and with
    ``--metrics-port 65535 --processes 2`` child 0 claimed a job while child 1 failed."""
    knobs: dict[str, Any] = {}
    for option, value in itertools.pairwise(args):
        if option in _KNOBS:
            knobs[_KNOBS[option]] = _parsed(value)
    WorkerConfig.build(dsn, listen_dsn=listen_dsn, **knobs)
    port = knobs.get("metrics_port")
    if port is not None and port + processes - 1 > _MAX_PORT:
        raise ConfigError(
            f"metrics-port {port} with {processes} processes: process i listens on "
            f"{port} + i, and {port + processes - 1} is past {_MAX_PORT}"
        )


def _parsed(value: str) -> Any:
    """An option's value as the command parsed it: ``child_arguments`` printed it, and
    an int prints without a point, a float with one."""
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(value)
    return value


class _Supervisor:
    def __init__(
        self,
        processes: int,
        args: list[str],
        dsn: str,
        listen_dsn: str | None,
        restart_delay: float,
    ) -> None:
        self.processes = processes
        self.args = args
        # The DSNs go through the environment, not argv, where `ps` would show them.
        self.env = {**os.environ, "VENTURI_DSN": dsn}
        if listen_dsn is not None:
            self.env["VENTURI_LISTEN_DSN"] = listen_dsn
        self.restart_delay = restart_delay
        self.stop = asyncio.Event()
        self.children: dict[int, asyncio.subprocess.Process] = {}
        self.status = 0
        self.signals = 0  # received by the supervisor
        self.asked = 0  # what it asked of its children (asking.DRAIN, ...)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        # The signals a single worker stops on, so that both modes agree (SIGHUP too).
        stopping = asking.stop_signals()
        for sig in stopping:
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, self._on_signal)
        log.info("supervisor %d: starting %d worker processes", os.getpid(), self.processes)
        try:
            await asyncio.gather(*(self._slot(i) for i in range(self.processes)))
        finally:
            for sig in stopping:
                with contextlib.suppress(NotImplementedError):
                    loop.remove_signal_handler(sig)
        log.info("supervisor %d: all worker processes stopped", os.getpid())
        if self.status == 0 and self.asked >= asking.FORCE:
            # Stopped at once, as a single worker exits after a second signal (each child
            # did): not the 0 of a clean drain.
            return 130
        return self.status

    def _on_signal(self) -> None:
        # The first signal asks every child to drain; another makes them stop at once,
        # a third exit (a worker's own rule for its signals).
        self.signals += 1
        if self.signals == 1:
            log.info(
                "supervisor %d: asking %d worker processes to drain; a second signal "
                "stops them at once",
                os.getpid(),
                len(self.children),
            )
        self._ask_all(min(self.signals, asking.EXIT))

    def _ask_all(self, level: int) -> None:
        self.stop.set()
        self.asked = max(self.asked, level)
        for proc in self.children.values():
            self._ask(proc, level)

    @staticmethod
    def _ask(proc: asyncio.subprocess.Process, level: int) -> None:
        # Over the child's pipe, not as a signal: under systemd (KillMode=control-group)
        # each child already got the operator's SIGTERM itself, and a second from here
        # counted as the operator's second signal (it stopped at once, releasing jobs
        # that had most of their grace left). A request adds to no count of signals.
        pipe = proc.stdin
        if proc.returncode is None and pipe is not None and not pipe.is_closing():
            pipe.write(bytes([level]))

    def _args(self, index: int) -> list[str]:
        """The arguments of the ``index``-th child: a port to listen on (--metrics-port)
        is offset by the index, since the children cannot all bind one."""
        args = list(self.args)
        for i, arg in enumerate(args[:-1]):
            if arg == "--metrics-port":
                args[i + 1] = str(int(args[i + 1]) + index)
        return args

    async def _spawn(self, index: int) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CHILD,
            *self._args(index),
            env=self.env,
            # A pipe the child watches: when this process dies, even by SIGKILL, the
            # child sees end-of-file and drains, so no worker outlives its supervisor.
            stdin=asyncio.subprocess.PIPE,
            # Its own session: a terminal's Ctrl-C reaches only the supervisor, which
            # passes one SIGTERM on, rather than every process at once.
            start_new_session=True,
        )

    async def _slot(self, index: int) -> None:
        first = True
        while not self.stop.is_set():
            proc = await self._spawn(index)
            self.children[index] = proc
            started = time.monotonic()
            if self.stop.is_set():  # a signal arrived while it was being started
                self._ask(proc, self.asked)
            code = await proc.wait()
            if self.stop.is_set():
                return
            if first and code == 2:
                log.error(
                    "supervisor: worker process %d could not start (exit status 2); "
                    "stopping the others",
                    proc.pid,
                )
                self.status = 2
                self._ask_all(asking.DRAIN)
                return
            first = False
            log.error(
                "supervisor: worker process %d exited with status %s after %.1fs; "
                "restarting it in %gs",
                proc.pid,
                code,
                time.monotonic() - started,
                self.restart_delay,
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.restart_delay):
                    await self.stop.wait()


# What a supervised child runs: `venturi worker ARGS` that also stops with its supervisor.
# The child imports the whole command line (venturi.cli registers every command on its
# app) and hands the app to child_main, so this module never imports the package above it.
_CHILD = (
    "import sys; from venturi.cli import app; from venturi.cli.processes import child_main; "
    "child_main(app, sys.argv[1:])"
)


def _watch_parent() -> None:
    """In a child: do what the supervisor asks over its pipe (``asking.ask``), and drain
    once the pipe reaches end-of-file (the supervisor is gone)."""

    def watch() -> None:
        # os.read, not sys.stdin: a daemon thread blocked inside a buffered reader would
        # hold its lock when the interpreter exits, which aborts the process.
        with contextlib.suppress(OSError):
            while asked := os.read(0, 1 << 16):
                for level in asked:
                    asking.ask(level)
        asking.ask(asking.DRAIN)

    threading.Thread(target=watch, name="venturi-parent-watch", daemon=True).start()


def child_main(app: Callable[..., Any], argv: Sequence[str]) -> None:
    """A supervised worker process: ``venturi worker ARGV`` (on ``app``, the command
    line's Typer app) that also stops with its supervisor."""
    _watch_parent()
    app(["worker", *argv], prog_name="venturi")
