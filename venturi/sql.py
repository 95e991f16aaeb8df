"""Renders venturi's SQL from the jinja2 templates in ``sql_templates/``.

Every statement the runtime runs comes from here, rendered once per schema name and
cached. Templates fill in identifiers only (the schema name, validated and quoted);
values are always ``$n`` bind parameters. Rendering never touches a database.

A statement renders in the parameter style of the driver that runs it (``STYLES``):
``dollar`` is the templates' own ``$n`` (asyncpg, SQLAlchemy's asyncpg dialect);
``pyformat`` names each ``$n`` ``%(pn)s`` and doubles literal ``%`` (psycopg 3,
psycopg2, Django, SQLAlchemy over either), with the values passed as ``{"pn": ...}``
(``bind``). Named rather than positional ``%s`` because a template may use one ``$n``
twice.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

import jinja2

from venturi import validate
from venturi.errors import ConfigError

DEFAULT_SCHEMA = "venturi"

# Lower-case only, so the quoted and the unquoted spelling name the same schema, and short
# enough that the derived notify channel ("<schema>_pending") stays within 63 bytes.
_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,54}")

PARTS: tuple[str, ...] = ("all", "tables", "indexes", "claim")

# The parameter styles a statement renders in: the drivers' placeholders.
STYLES: tuple[str, ...] = ("dollar", "pyformat")
_PLACEHOLDER = re.compile(r"\$(\d+)")

# Statement headers declare their parameters as "-- $n <type> <name>: <what>"; the types
# let `schema render` print each statement as a PREPARE that psql can check.
_PARAM = re.compile(r"^-- \$(\d+) +(\S+) +\w+")


def validate_schema(name: object) -> str:
    """Return ``name`` if it can be a venturi schema name, else raise ``ConfigError``."""
    # PostgreSQL refuses to create a schema named pg_*, the prefix of its system schemas:
    # refused here, `venturi stats --schema pg_x` told the operator to apply it, and the
    # apply then failed in the server.
    if not isinstance(name, str) or not _IDENT.fullmatch(name) or name.startswith("pg_"):
        raise ConfigError(
            f"schema must be a lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 55 "
            f"characters) that does not start with pg_ (PostgreSQL reserves it), got "
            f"{validate.shown(name)}"
        )
    return name


def channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel on which a schema announces claimable work."""
    return f"{validate_schema(schema)}_pending"


def finished_channel(schema: str) -> str:
    """The channel on which a schema announces the id of a job that ``venturi.wait`` waits
    for once it finished (short enough, like ``channel``, for 63 bytes)."""
    return f"{validate_schema(schema)}_done"


@functools.cache
def _env() -> jinja2.Environment:
    root = resources.files("venturi") / "sql_templates"
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _render(template: str, schema: str) -> str:
    validate_schema(schema)
    text = (
        _env()
        .get_template(template)
        .render(s=f'"{schema}"', channel=channel(schema), finished_channel=finished_channel(schema))
    )
    # A marker that survived rendering means a template bug; refuse to hand it to Postgres.
    if "{{" in text or "{%" in text or "{#" in text:
        raise RuntimeError(f"unrendered template marker left in {template}")
    return text


def statement_names() -> list[str]:
    """Names of every runtime statement, sorted (files starting with _ are fragments)."""
    names = []
    for tpl in _env().list_templates():
        if tpl.startswith("statements/") and tpl.endswith(".sql.j2"):
            base = tpl.removeprefix("statements/").removesuffix(".sql.j2")
            if not base.startswith("_"):
                names.append(base)
    return sorted(names)


@functools.cache
def statement(name: str, schema: str = DEFAULT_SCHEMA, style: str = "dollar") -> str:
    """The rendered text of statement ``name``: a file of ``sql_templates/statements``, or
    ``folder/name`` for the other folders (maintenance statements that are not runtime
    statements and cannot be PREPAREd), with its placeholders in ``style``."""
    path = name if "/" in name else f"statements/{name}"
    text = _render(f"{path}.sql.j2", schema)
    if style == "dollar":
        return text
    if style == "pyformat":
        # A dollar-quoted body would hold "$" that is not a placeholder; no statement
        # has one, and one that did must not be rewritten blindly.
        if "$$" in text:
            raise RuntimeError(f"statement {name} holds a dollar-quoted body")
        return _PLACEHOLDER.sub(r"%(p\1)s", text.replace("%", "%%"))
    raise ConfigError(f"style must be one of {', '.join(STYLES)}, got {style!r}")


def bind(args: tuple[object, ...], style: str) -> tuple[object, ...] | dict[str, object]:
    """The values of a statement's ``$1..$n`` as the driver of ``style`` takes them."""
    if style == "pyformat":
        return {f"p{i}": value for i, value in enumerate(args, 1)}
    return args


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str
    # The template's name for ``statement`` ("migrations/0001_initial").
    template: str = ""


def _migration_templates() -> list[tuple[int, str, str]]:
    """(version, label, template) of every versioned migration, from the file names."""
    found = []
    for tpl in _env().list_templates():
        if tpl.startswith("migrations/") and tpl.endswith(".sql.j2"):
            stem = tpl.removeprefix("migrations/").removesuffix(".sql.j2")
            number, _, label = stem.partition("_")
            found.append((int(number), label, tpl))
    return found


@functools.cache
def migrations(schema: str = DEFAULT_SCHEMA) -> tuple[Migration, ...]:
    """Every versioned migration, oldest first."""
    found = [
        Migration(version, label, _render(tpl, schema), tpl.removesuffix(".sql.j2"))
        for version, label, tpl in _migration_templates()
    ]
    return tuple(sorted(found, key=lambda m: m.version))


@functools.cache
def latest_migration() -> int:
    """The newest migration's version, from the file names alone: every command and
    worker checks the database's schema against it at start, and rendering the
    migrations to learn it compiled each template (0.15 s of a 0.5 s `venturi jobs
    list`, issue 39)."""
    return max(version for version, _, _ in _migration_templates())


@functools.cache
def fresh_schema(schema: str = DEFAULT_SCHEMA) -> str:
    """Tables, trigger and indexes of the current version, for an empty database."""
    return _render("schema/tables.sql.j2", schema) + "\n" + _render("schema/indexes.sql.j2", schema)


_DATABASE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def database_statement(name: str, database: str, **databases: str) -> str:
    """A database-level statement (create, clone, drop) of ``sql_templates/database``.

    Used by the test helpers; database names are validated identifiers, quoted.
    """
    names = {"database": database, **databases}
    for knob, value in names.items():
        if not _DATABASE.fullmatch(value):
            raise ConfigError(
                f"{knob} must be a lower-case SQL identifier, got {validate.shown(value)}"
            )
    quoted = {k: f'"{v}"' for k, v in names.items()}
    return _env().get_template(f"database/{name}.sql.j2").render(**quoted)


def _params(text: str) -> list[str]:
    types: dict[int, str] = {}
    for line in text.splitlines():
        m = _PARAM.match(line)
        if m:
            types[int(m.group(1))] = m.group(2)
    if sorted(types) != list(range(1, len(types) + 1)):
        raise RuntimeError(f"statement header declares parameters {sorted(types)}")
    return [types[i] for i in range(1, len(types) + 1)]


def _as_prepare(name: str, schema: str) -> str:
    text = statement(name, schema).rstrip().rstrip(";")
    header: list[str] = []
    body: list[str] = []
    for line in text.splitlines():
        (header if line.startswith("--") and not body else body).append(line)
    types = _params(text)
    args = f"({', '.join(types)})" if types else ""
    return "\n".join([*header, f"PREPARE {schema}_{name}{args} AS", *body]) + ";\n"


def render(schema: str = DEFAULT_SCHEMA, part: str = "all") -> str:
    """The SQL a DBA reviews or applies by hand; deterministic and offline.

    ``claim`` prints every runtime statement as a ``PREPARE`` so that psql checks it
    against the tables without running it.
    """
    validate_schema(schema)
    if part not in PARTS:
        raise ConfigError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    chunks = []
    if part in ("all", "tables"):
        chunks.append(_render("schema/tables.sql.j2", schema))
    if part in ("all", "indexes"):
        chunks.append(_render("schema/indexes.sql.j2", schema))
    if part in ("all", "claim"):
        chunks.append(
            "-- Runtime statements, as PREPAREd by the worker. Parameters are $n binds.\n"
        )
        chunks.extend(_as_prepare(name, schema) for name in statement_names())
    return "\n".join(chunks)
