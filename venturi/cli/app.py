"""The ``venturi`` Typer app every command group registers on (what the commands share
is in ``venturi.cli.common``)."""

from __future__ import annotations

import codecs
import inspect
import io
import sys

import typer

app = typer.Typer(
    name="venturi",
    help="Durable background jobs on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def one_line_summaries(group: typer.Typer) -> None:
    """Give each command of ``group`` (and of its sub-groups) without a ``short_help`` its
    docstring's first paragraph on one line, for the list of commands in ``--help``.

    Typer's rich help keeps a summary's source line breaks, so a docstring wrapped at
    the code's width printed broken mid-sentence in ``venturi --help``; the command's
    own ``--help`` page joins them already.
    """
    for command in group.registered_commands:
        text = command.help or inspect.getdoc(command.callback)
        if command.short_help is None and text:
            command.short_help = " ".join(text.split("\n\n")[0].split())
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            one_line_summaries(sub.typer_instance)


# click's exceptions, as the installed typer raises them (its own copy of click since
# typer 0.2x, click itself before): found by what typer exports.
_errors = sys.modules[typer.BadParameter.__module__]
_SHOWS_HELP = getattr(_errors, "NoArgsIsHelpError", ())  # a group run without a command


# What an output that cannot hold a character prints instead: the table's punctuation
# in ASCII, any other character as its escape (a kind 'snow_☃' reads 'snow_\u2603').
_PLAIN = {"\u2014": "-", "\u2013": "-", "\u2026": "...", "\u2192": "->", "\u00b7": "."}


def _plain(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    text = "".join(_PLAIN.get(c) or c.encode("ascii", "backslashreplace").decode() for c in bad)
    return text, exc.end


codecs.register_error("venturi.plain", _plain)


def tolerant_output() -> None:
    """Let stdout and stderr print what their encoding cannot hold (see ``_PLAIN``).

    On a Latin-1 or ASCII terminal (a legacy locale, LC_ALL=C, PYTHONIOENCODING) the
    tables' "—" and "…", or a kind's own characters, raised UnicodeEncodeError: a
    traceback, exit 1, and for a write such as `kinds pause` after it had committed.
    Tables then draw ASCII boxes (rich does, for an output that is not UTF-8)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if not encoding.startswith("utf") and isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="venturi.plain")


def main() -> None:
    """Run the command line. A usage error (an unknown option or command, a value of the
    wrong type, a missing argument) is one line on stderr, exit 2, as every other refusal
    of bad input is: click's usage text and error box were six lines."""
    tolerant_output()
    try:
        code = app(standalone_mode=False)
    except _SHOWS_HELP as exc:
        # typer printed the group's help before raising (click's show() would print it
        # again): only its exit code is left to give.
        sys.exit(exc.exit_code)
    except _errors.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "venturi"
        message = " ".join(exc.format_message().split())
        typer.echo(f"venturi: {message} (see {where} --help)", err=True)
        sys.exit(exc.exit_code)
    except _errors.ClickException as exc:
        typer.echo(f"venturi: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("Aborted!", err=True)
        sys.exit(1)
    # Without standalone mode a command's exit code is returned, not exited with.
    sys.exit(code if isinstance(code, int) else 0)
