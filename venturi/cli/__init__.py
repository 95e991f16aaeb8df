"""The ``venturi`` command line (typer). Errors are one line on stderr and exit code 2.

One module per command group; importing each registers its commands on ``app``, and
``venturi --help`` lists them in the order of these imports.

So ``venturi worker`` loads every command module, and a worker carries no operator code:
a command module imports the operator's API (``venturi.admin``), the dashboard
(``venturi.web``) and the tables it prints (``venturi.cli.render``, which reads the
operator's structs) inside the command's function, not at import; a process running
``venturi worker`` loads ``venturi.cli`` but neither ``venturi.admin`` nor ``venturi.web``
(``tests/unit/test_worker_imports.py``).
"""

# isort: off
from venturi.cli import schema as schema
from venturi.cli import worker as worker
from venturi.cli import demo as demo
from venturi.cli import jobs as jobs
from venturi.cli import ops as ops
from venturi.cli import kinds as kinds
from venturi.cli import groups as groups
from venturi.cli import web as web

# isort: on
from venturi.cli.app import app, main, one_line_summaries

one_line_summaries(app)

__all__ = ["app", "main"]
