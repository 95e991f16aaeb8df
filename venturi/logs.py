"""Log formats of ``venturi worker --log-format text|json``: stdlib ``logging`` formatters.

The standard library's ``logging`` is enough: every record about a job already carries
``job_id``, ``kind`` and ``attempt`` as ``extra`` fields (the worker's own lines and
``ctx.log``), so a formatter only has to print them; structlog would add a dependency and
a second logging pipeline for what one ``Formatter`` subclass does. An application that
configures its own logging may use these formatters, or ignore them.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

FORMATS = ("text", "json")

# The fields a record about a job carries, in the order a text line shows them.
JOB_FIELDS = ("job_id", "kind", "attempt")

# Every attribute a LogRecord has without extras: what is left over is an extra field.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def extras(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra`` fields of a record (job_id, kind, attempt, error_type, ...)."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class TextFormatter(logging.Formatter):
    """``2026-01-01 12:00:00,000 INFO venturi.job: charging [job_id=7 kind=charge attempt=1]``:
    the classic line, with the job's fields at its end when the record is about a job."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = [f"{k}={getattr(record, k)}" for k in JOB_FIELDS if hasattr(record, k)]
        if not fields:
            return line
        # The fields go on the first line, before any traceback.
        first, nl, rest = line.partition("\n")
        return f"{first} [{' '.join(fields)}]{nl}{rest}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (RFC 3339, UTC), ``level``, ``logger``,
    ``message``, every extra field (``job_id``, ``kind``, ``attempt``, ``error_type``,
    ``error_message``, ...) and, when the record has one, ``exception`` (the traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in extras(record).items():
            doc.setdefault(key, value)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            doc["exception"] = record.exc_text
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return json.dumps(doc, default=str, ensure_ascii=False)


# The driver's loggers whose warnings carry a connection error's traceback: asyncpg's pool
# logs each failed attempt to restore its connections (every second at first, then doubling
# to a minute) while the database is down, twenty lines each; the error's first line says
# all of it, as the worker's own lines do.
DRIVER_LOGGERS = frozenset({"asyncpg.pool"})


class OneLineDriverErrors(logging.Filter):
    """Folds the exception of a driver's record (``DRIVER_LOGGERS``) into its message."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.name in DRIVER_LOGGERS:
            exc = record.exc_info[1]
            if exc is not None:
                lines = str(exc).strip().splitlines()
                first = lines[0][:300] if lines else ""
                record.msg = f"{record.getMessage()}: {type(exc).__name__}: {first}".rstrip(": ")
                record.args = None
                record.exc_info = record.exc_text = None
        return True


def formatter(fmt: str) -> logging.Formatter:
    """The formatter of ``--log-format``: ``text`` or ``json``."""
    return JsonFormatter() if fmt == "json" else TextFormatter()


def configure(level: int, fmt: str) -> None:
    """The root logger's one handler, to stderr, in the format asked for (what
    ``venturi worker`` sets up; ``logging.basicConfig`` with a formatter)."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(fmt))
    handler.addFilter(OneLineDriverErrors())
    logging.basicConfig(level=level, handlers=[handler])
