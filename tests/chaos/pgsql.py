"""The chaos scenarios' own statements (server control: settings, replication, probes),
one jinja2 template each under ``tests/chaos/sql_templates/``, like the library's."""

from __future__ import annotations

import functools
from pathlib import Path

import jinja2

ROOT = Path(__file__).with_name("sql_templates")


@functools.cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(ROOT)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )


@functools.cache
def statement(name: str) -> str:
    return _env().get_template(f"{name}.sql.j2").render()
