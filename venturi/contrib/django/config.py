"""The app's settings (``VENTURI``: which ``DATABASES`` alias, which schema) and what is
derived from them: the DSN a worker connects with, applying the schema."""

from __future__ import annotations

import urllib.parse
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from venturi import sql
from venturi.errors import ConfigError

KNOBS = ("DATABASE", "SCHEMA")


def _settings() -> dict[str, Any]:
    value = getattr(settings, "VENTURI", {})
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"VENTURI must be a dict, got {value!r}")
    unknown = sorted(set(value) - set(KNOBS))
    if unknown:
        raise ImproperlyConfigured(
            f"VENTURI: unknown key(s) {', '.join(unknown)}; known: {', '.join(KNOBS)}"
        )
    return value


def database() -> str:
    """The ``DATABASES`` alias that holds venturi's tables (default ``"default"``)."""
    alias = _settings().get("DATABASE", "default")
    if alias not in settings.DATABASES:
        raise ImproperlyConfigured(f"VENTURI['DATABASE'] {alias!r} is not in DATABASES")
    return str(alias)


def schema() -> str:
    """The schema of venturi's tables (default ``"venturi"``)."""
    try:
        return sql.validate_schema(_settings().get("SCHEMA", sql.DEFAULT_SCHEMA))
    except ConfigError as exc:
        raise ImproperlyConfigured(f"VENTURI['SCHEMA']: {exc}") from None


def connection(alias: str | None = None) -> Any:
    """Django's connection of ``alias`` (default: venturi's), checked to be PostgreSQL."""
    from django.db import connections

    conn = connections[alias or database()]
    if conn.vendor != "postgresql":
        raise ImproperlyConfigured(
            f"venturi needs PostgreSQL: DATABASES[{conn.alias!r}] uses the {conn.vendor} backend"
        )
    return conn


def apply_schema(alias: str | None = None) -> list[int]:
    """Create or upgrade venturi's schema on Django's connection; the versions applied."""
    from venturi.db.schema import apply_schema_sync

    return apply_schema_sync(connection(alias), schema=schema())


def dsn(alias: str | None = None) -> str:
    """A libpq URL for the alias's database, for the worker's own asyncpg connections
    (the database the connection uses now: a test run's test database included)."""
    d = connection(alias).settings_dict
    user = urllib.parse.quote(str(d.get("USER") or ""), safe="")
    password = urllib.parse.quote(str(d.get("PASSWORD") or ""), safe="")
    host = str(d.get("HOST") or "")
    netloc = user + (f":{password}" if password else "") + ("@" if user else "")
    netloc += f"[{host}]" if ":" in host else urllib.parse.quote(host, safe="")
    if d.get("PORT"):
        netloc += f":{d['PORT']}"
    query = {
        k: str(v)
        for k, v in (d.get("OPTIONS") or {}).items()
        if k in ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout")
    }
    if host.startswith("/"):
        # A socket directory: libpq takes it as the host parameter.
        netloc = netloc.removesuffix(urllib.parse.quote(host, safe=""))
        query["host"] = host
    name = urllib.parse.quote(str(d.get("NAME") or ""), safe="")
    tail = f"?{urllib.parse.urlencode(query)}" if query else ""
    return f"postgresql://{netloc}/{name}{tail}"
