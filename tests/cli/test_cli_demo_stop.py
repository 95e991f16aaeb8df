"""`venturi demo` on its embedded PostgreSQL, stopped by SIGTERM (kill, timeout, systemd,
docker stop) or SIGINT (Ctrl-C) mid-run: the server stops and its data directory goes,
and the process says so in one line, no traceback. Real processes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import assert_one_clean_error, venturi_cli
from tests.support.cli import ROOT

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 13), reason="pgserver (the embedded extra) has no wheel for 3.13"
)


def processes_under(folder: Path) -> list[int]:
    """The pids of processes whose command line names ``folder`` (its PostgreSQL)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if str(folder).encode() in cmdline:
                found.append(int(entry.name))
    return found


@pytest.fixture
def tmp() -> Iterator[Path]:
    """A short TMPDIR of this test's own (where the demo makes its data directory; the
    server's socket path must stay short). Anything the demo left is stopped after."""
    folder = Path(tempfile.mkdtemp(prefix="vd", dir="/tmp"))
    yield folder
    for pid in processes_under(folder):
        os.kill(pid, signal.SIGINT)  # the leaked server the test started, fast shutdown
    time.sleep(1)
    shutil.rmtree(folder, ignore_errors=True)


def start_demo(tmp: Path) -> subprocess.Popen[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TMPDIR": str(tmp),
        "PYTHONUNBUFFERED": "1",
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "venturi", "demo", "--jobs", "10000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert proc.stdout is not None
    # Mid-run: the jobs are enqueued, the worker is running on the embedded server.
    line = proc.stdout.readline()
    assert line.startswith("enqueued "), line
    assert any(tmp.glob("venturi-demo-*")) and processes_under(tmp)
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_demo_stops_its_server_and_removes_its_data(tmp: Path, sig: int) -> None:
    proc = start_demo(tmp)
    time.sleep(1)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    # SIGTERM left the server running, orphaned, and its data in /tmp; SIGINT cleaned up
    # but printed 164 lines of tracebacks.
    assert processes_under(tmp) == [], "the embedded PostgreSQL is still running"
    assert list(tmp.glob("venturi-demo-*")) == []  # (pgserver keeps a runtime-UID folder)
    assert proc.returncode == 128 + sig, (proc.returncode, stderr)
    assert "Traceback" not in stderr, stderr
    # Between these, the worker's log of the demo's one dead job, if it got that far.
    lines = stderr.splitlines()
    assert lines[0] == "starting the embedded PostgreSQL ...", stderr
    assert lines[-1] == f"venturi: demo stopped ({signal.Signals(sig).name})", stderr
    assert len(lines) <= 3, stderr


@pytest.mark.parametrize("jobs", ["0", "10001"])
def test_demo_jobs_is_bounded(jobs: str) -> None:
    out = venturi_cli("demo", "--jobs", jobs, "--dsn", "postgresql://nobody@127.0.0.1:1/x")
    assert_one_clean_error(out, "jobs must be from 1 to 10,000")
    assert out.stderr.count("\n") == 1
