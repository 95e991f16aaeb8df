"""The statements only the benchmarks run (housekeeping between measurements, what they
read of the server and of venturi's tables, the steady state's samples and its held
transaction), kept out of the package as the tests keep theirs
(``tests/support/sql_templates``): a benchmark's reading of the catalog has no place in a
library's package data.

The templates in ``sql_templates/`` follow venturi's conventions: a header naming the
statement and what it does, its ``$n`` parameters declared; identifiers only are filled
in (``s``, venturi's schema, validated and quoted as ``venturi.sql`` does), values are
bind parameters. venturi's own statements come from ``venturi.sql``; the peers' few
housekeeping statements stay in their adapters (``benchmarks/systems``), on their own
tables.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import jinja2

from venturi.sql import DEFAULT_SCHEMA, validate_schema

TEMPLATES = Path(__file__).resolve().parent / "sql_templates"
_IDENT = re.compile(r"[a-z_][a-z0-9_]*")


@functools.cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )


def statement(name: str, schema: str = DEFAULT_SCHEMA, **fill: Any) -> str:
    """The rendered text of ``sql_templates/<name>.sql.j2`` for ``schema``; ``fill``
    holds a template's other fill-ins (an index name, a relation, a statement to
    EXPLAIN), which the caller vouches for."""
    validate_schema(schema)
    return _env().get_template(f"{name}.sql.j2").render(s=f'"{schema}"', **fill)


def index_drop(index: str, schema: str = DEFAULT_SCHEMA) -> str:
    """``index_drop`` of one of venturi's index names (validated, then quoted)."""
    if not _IDENT.fullmatch(index):
        raise ValueError(f"not an index name: {index!r}")
    return statement("index_drop", schema, index=f'"{index}"')


def explain(text: str, options: str, name: str = "a statement") -> str:
    """``EXPLAIN (options)`` of a statement's text (one of venturi's, rendered)."""
    return statement("explain", options=options, statement=text, statement_name=name)
