"""``venturi demo``: the bookmark service, end to end."""

from __future__ import annotations

from typing import Annotated

import typer

from venturi.cli.app import app
from venturi.cli.common import (
    DsnOption,
    fail,
    run,
    say,
)


@app.command("demo")
def demo(
    dsn: DsnOption = None,
    jobs: Annotated[int, typer.Option(help="Bookmarks to fetch (emails are half as many).")] = 200,
) -> None:
    """A bookmark service (fetch pages, send emails), end to end, on an embedded database."""
    from venturi import demo as demo_module

    if not 1 <= jobs <= demo_module.MAX_JOBS:
        raise fail(f"jobs must be from 1 to {demo_module.MAX_JOBS:,}, got {jobs}")
    stopped = run(lambda: demo_module.main(dsn, jobs))
    if stopped is not None:
        say(f"venturi: demo stopped ({stopped.name})", err=True)
        raise typer.Exit(128 + stopped)
