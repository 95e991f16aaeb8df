"""Statements only the tests run (fault injection and server control for the chaos
scenarios: settings, replication, probes), kept out of the wheel: one that ends every
other session of a database has no place in a library's package data.

The templates follow venturi's own conventions (a header naming the statement and what it
does); none takes an identifier, and a value is a bind parameter.
"""

from __future__ import annotations

import functools
from pathlib import Path

import jinja2

TEMPLATES = Path(__file__).resolve().parent / "sql_templates"


@functools.cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )


@functools.cache
def statement(name: str) -> str:
    """The rendered text of ``sql_templates/<name>.sql.j2``."""
    return _env().get_template(f"{name}.sql.j2").render()
