"""A worker carries no operator code, checked per process: each test runs, in a fresh
interpreter, what a worker process imports and lists the modules it loaded.

The rule, per entry point:

- ``import venturi`` and a ``Worker`` built with every maintenance task the package
  exports load none of ``venturi.admin`` (the operator's API), ``venturi.web`` (the
  dashboard) and ``venturi.cli`` (the command line). ``venturi.admin`` and
  ``venturi.delete_job`` stay attributes of the package, loaded on first use.
- ``venturi worker`` loads ``venturi.cli``: the console script's entry is the command
  line, whose every command module registers for ``venturi --help``. It loads neither
  ``venturi.admin`` nor ``venturi.web``: the commands import those inside their
  functions (``venturi/cli/__init__.py``). Checked where the worker's loop would start,
  with the widest maintenance the command builds (cron, result expiry, the queue
  gauges, the unserved-kinds warning).

``tests/unit/test_layers.py`` holds the static side: the runtime and the maintenance
tasks never import the operator's API, the dashboard or the command line, at any depth.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]

OPERATOR = ("venturi.admin", "venturi.web")
COMMAND_LINE = ("venturi.cli",)

# A module that declares tasks as an application's does: one recurring, one that keeps
# its results (so ``venturi worker`` adds the cron scheduler and the result cleanup).
TASKS = """
import venturi

@venturi.task(kind="imports_tick", cron="*/5 * * * *")
async def tick(ctx, carry: None) -> venturi.Outcome:
    return venturi.complete()

@venturi.task(kind="imports_keep", result_ttl=60)
async def keep(ctx, carry: int) -> venturi.Outcome:
    return venturi.complete(carry)
"""

# Where the loop would start: report the modules loaded and stop.
STOP_AT_THE_LOOP = """
import json, sys
from venturi.runtime.worker import Worker

async def loaded(self, *args, **kwargs):
    print(json.dumps(sorted(sys.modules)))

Worker.run = loaded
"""


def loaded_by(code: str, tmp_path: Path) -> list[str]:
    """The ``venturi`` modules a fresh interpreter holds after running ``code`` (which
    prints ``sorted(sys.modules)`` as JSON on its last line), with the tasks module
    ``imports_app`` importable."""
    (tmp_path / "imports_app.py").write_text(TASKS)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert "venturi.runtime.worker" in modules  # the check ran where it should
    return [m for m in modules if m == "venturi" or m.startswith("venturi.")]


def within(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(f"{p}.") for p in prefixes)]


def test_importing_venturi_and_building_a_worker_loads_no_operator_code(
    tmp_path: Path,
) -> None:
    modules = loaded_by(
        """
        import json, sys
        import venturi
        import imports_app

        worker = venturi.Worker(
            None,
            "postgresql://127.0.0.1:1/unused",
            [imports_app.tick, imports_app.keep],
            maintenance=[
                venturi.Alerts(hook=print, queue_depth=10),
                venturi.CronScheduler(),
                venturi.QueueGauges(),
                venturi.ResultCleanup(),
                venturi.Retention(),
                venturi.UnservedKinds(),
            ],
        )
        print(json.dumps(sorted(sys.modules)))
        """,
        tmp_path,
    )
    assert within(modules, OPERATOR + COMMAND_LINE) == []
    assert "venturi.maintenance.gauges" in modules


def test_the_operator_api_stays_reachable_from_the_package(tmp_path: Path) -> None:
    modules = loaded_by(
        """
        import json, sys
        import venturi
        import venturi.runtime.worker

        assert "venturi.admin" not in sys.modules
        assert venturi.delete_job is venturi.admin.delete_job
        assert {"admin", "delete_job"} <= set(dir(venturi))
        print(json.dumps(sorted(sys.modules)))
        """,
        tmp_path,
    )
    assert "venturi.admin" in modules


def test_venturi_worker_loads_the_command_line_but_no_operator_code(tmp_path: Path) -> None:
    modules = loaded_by(
        STOP_AT_THE_LOOP
        + f"""
sys.argv = [
    "venturi", "worker", "imports_app",
    "--dsn", "postgresql://127.0.0.1:1/unused",
    "--queue-metrics", "--metrics-port", "{free_port()}", "--warn-unserved",
]
from venturi.cli import main
try:
    main()
except SystemExit as exit:
    assert not exit.code, exit.code
""",
        tmp_path,
    )
    assert within(modules, OPERATOR) == []
    assert "venturi.cli.worker" in modules
    assert {"venturi.maintenance.cron", "venturi.maintenance.gauges"} <= set(modules)
