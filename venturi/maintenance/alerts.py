"""Alert hooks: thresholds on the queue checked beside the worker, delivered to a webhook.

``Alerts`` is a maintenance task. Every ``interval`` it reads, per kind, the due pending
jobs, how long the oldest has been claimable, and the completions and failed executions
of the last ``window``; each threshold crossed is an alert for that kind. An alert is
POSTed as JSON to ``webhook`` (and/or passed to ``hook``), then stays quiet for
``cooldown``; one that reached no target is retried after ``retry_after``. Cooldowns
live in ``<schema>.alert_state``, so many workers with the same ``Alerts`` deliver each
alert once, and a restart does not repeat one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from venturi import db, validate
from venturi.blocking import in_thread
from venturi.errors import ConfigError
from venturi.status import MANUAL_RETRY
from venturi.threads import DaemonThreads
from venturi.validate import seconds

log = logging.getLogger("venturi.alerts")

DEFAULT_INTERVAL = 30.0
DEFAULT_WINDOW = 300.0
DEFAULT_MIN_EXECUTIONS = 10
DEFAULT_COOLDOWN = 300.0
DEFAULT_TIMEOUT = 10.0
DEFAULT_RETRY_AFTER = 60.0

_ENCODER = msgspec.json.Encoder()
# The webhook's POST and a sync hook run here: one that outlives its timeout runs on, and
# in asyncio's default executor it kept the process from exiting (venturi.threads).
_THREADS = DaemonThreads(4, "venturi-alert")


class Alert(msgspec.Struct, frozen=True):
    """One threshold crossed by one kind; the webhook's JSON body has these fields."""

    alert: str  # "error_rate", "queue_depth" or "oldest_pending"
    kind: str
    value: float
    threshold: float
    message: str
    schema: str
    at: datetime


AlertHook = Callable[[Alert], Awaitable[None] | None]


class Alerts:
    """Maintenance task: checks the thresholds given and delivers what they find.

    ``error_rate`` (0-1): failed executions / (failed + completed) in the last ``window``
    seconds, once there were at least ``min_executions``. ``queue_depth``: due pending
    jobs, one number for every kind or a mapping kind -> number (only those kinds).
    ``oldest_pending``: seconds the oldest due job has waited. ``kinds`` limits every
    check to those kinds (default: all kinds in the database).
    """

    name = "alerts"

    def __init__(
        self,
        webhook: str | None = None,
        *,
        hook: AlertHook | None = None,
        error_rate: float | None = None,
        queue_depth: int | Mapping[str, int] | None = None,
        oldest_pending: timedelta | float | None = None,
        window: timedelta | float = DEFAULT_WINDOW,
        min_executions: int = DEFAULT_MIN_EXECUTIONS,
        kinds: Iterable[str] | None = None,
        interval: timedelta | float = DEFAULT_INTERVAL,
        cooldown: timedelta | float = DEFAULT_COOLDOWN,
        timeout: timedelta | float = DEFAULT_TIMEOUT,
        retry_after: timedelta | float = DEFAULT_RETRY_AFTER,
    ) -> None:
        if webhook is not None:
            parts = urllib.parse.urlsplit(webhook) if isinstance(webhook, str) else None
            if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
                raise ConfigError(
                    f"alerts webhook must be an http(s) URL, got {validate.shown(webhook)}"
                )
        if hook is not None and not callable(hook):
            raise ConfigError(f"alerts hook must be callable, got {validate.shown(hook)}")
        if webhook is None and hook is None:
            raise ConfigError("alerts: give a webhook URL or a hook to deliver alerts to")
        if error_rate is not None and (
            isinstance(error_rate, bool)
            or not isinstance(error_rate, int | float)
            or not 0 < error_rate <= 1
        ):
            raise ConfigError(
                f"alerts error_rate must be a fraction in (0, 1], got {validate.shown(error_rate)}"
            )
        depth: dict[str, int] | int | None
        if queue_depth is None or isinstance(queue_depth, int):
            depth = None if queue_depth is None else _count(queue_depth, "queue_depth")
        elif isinstance(queue_depth, Mapping):
            depth = {
                validate.kind(k, "alerts queue_depth's kind"): _count(v, f"queue_depth[{k!r}]")
                for k, v in queue_depth.items()
            }
        else:
            raise ConfigError(
                f"alerts queue_depth must be an integer or a mapping kind -> integer, "
                f"got {validate.shown(queue_depth)}"
            )
        if error_rate is None and depth is None and oldest_pending is None:
            raise ConfigError(
                "alerts: set at least one threshold (error_rate, queue_depth, oldest_pending)"
            )
        if isinstance(min_executions, bool) or not isinstance(min_executions, int):
            raise ConfigError(
                f"alerts min_executions must be an integer, got {validate.shown(min_executions)}"
            )
        self.webhook = webhook
        self.hook = hook
        self.error_rate = None if error_rate is None else float(error_rate)
        self.queue_depth = depth
        self.oldest_pending = (
            None if oldest_pending is None else seconds(oldest_pending, "alerts oldest_pending")
        )
        self.window = seconds(window, "alerts window")
        self.min_executions = max(1, min_executions)
        self.kinds = None if kinds is None else _kinds(kinds)
        self.interval = seconds(interval, "alerts interval")
        self.cooldown = seconds(cooldown, "alerts cooldown", allow_zero=True)
        self.timeout = seconds(timeout, "alerts timeout")
        self.retry_after = seconds(retry_after, "alerts retry_after")

    def __repr__(self) -> str:
        return f"<venturi.Alerts every {self.interval:g}s>"

    def evaluate(self, rows: Iterable[Any], schema: str, at: datetime) -> list[Alert]:
        """The alerts that rows of ``alert_metrics`` raise."""
        found = []
        for r in rows:
            kind = r["kind"]
            if self.kinds is not None and kind not in self.kinds:
                continue
            limit = (
                self.queue_depth.get(kind)
                if isinstance(self.queue_depth, dict)
                else self.queue_depth
            )
            if limit is not None and r["due"] > limit:
                found.append(
                    Alert(
                        "queue_depth",
                        kind,
                        float(r["due"]),
                        float(limit),
                        f"{r['due']} due job(s) of kind {kind!r} wait (threshold {limit})",
                        schema,
                        at,
                    )
                )
            oldest = r["oldest_due_seconds"]
            if self.oldest_pending is not None and r["due"] and oldest > self.oldest_pending:
                found.append(
                    Alert(
                        "oldest_pending",
                        kind,
                        oldest,
                        self.oldest_pending,
                        f"the oldest due job of kind {kind!r} has waited {oldest:.0f}s "
                        f"(threshold {self.oldest_pending:g}s)",
                        schema,
                        at,
                    )
                )
            executions = r["completed"] + r["failures"]
            if self.error_rate is not None and executions >= self.min_executions:
                rate = r["failures"] / executions
                if rate > self.error_rate:
                    found.append(
                        Alert(
                            "error_rate",
                            kind,
                            rate,
                            self.error_rate,
                            f"{rate:.1%} of the executions of kind {kind!r} failed in the last "
                            f"{self.window:g}s ({r['failures']} of {executions}; threshold "
                            f"{self.error_rate:.1%})",
                            schema,
                            at,
                        )
                    )
        return found

    async def run(self, pool: Any, worker: Any) -> None:
        schema = worker.schema
        rows = await db.alerts.alert_metrics(
            pool, schema=schema, window=self.window, manual_detail=MANUAL_RETRY
        )
        for alert in self.evaluate(rows, schema, datetime.now(UTC)):
            key = f"{alert.alert}:{alert.kind}"
            # Held for the retry delay (or the cooldown, if shorter) in case this fails.
            if not await db.alerts.alert_claim_if_due(
                pool, schema=schema, key=key, hold=min(self.retry_after, self.cooldown)
            ):
                continue  # delivered (or being delivered) by a worker within its cooldown
            log.warning("alert %s: %s", alert.alert, alert.message)
            error = await self.deliver(alert)
            if error is None:
                await db.alerts.alert_delivered(
                    pool, schema=schema, key=key, cooldown=self.cooldown
                )
                worker.stats["alerts_sent"] += 1
            else:
                await db.alerts.alert_failed(pool, schema=schema, key=key, error=error)
                worker.stats["alerts_failed"] += 1
                log.warning(
                    "alert %s for kind %r reached no target (retrying in %gs): %s",
                    alert.alert,
                    alert.kind,
                    self.retry_after,
                    error,
                )

    async def deliver(self, alert: Alert) -> str | None:
        """Send ``alert`` to every target; None if at least one took it, else the errors."""
        errors = []
        delivered = False
        if self.webhook is not None:
            try:
                async with asyncio.timeout(self.timeout):
                    await in_thread(
                        _THREADS, _post, self.webhook, _ENCODER.encode(alert), self.timeout
                    )
                delivered = True
            except TimeoutError:
                errors.append(f"webhook: no answer within {self.timeout:g}s")
            except (OSError, ValueError) as exc:
                errors.append(f"webhook: {_one_line(exc)}")
        if self.hook is not None:
            try:
                async with asyncio.timeout(self.timeout):
                    if inspect.iscoroutinefunction(self.hook):
                        await self.hook(alert)
                    else:
                        result = await in_thread(_THREADS, self.hook, alert)
                        if inspect.isawaitable(result):
                            await result
                delivered = True
            except TimeoutError:
                errors.append(f"hook: no return within {self.timeout:g}s")
            except Exception as exc:
                errors.append(f"hook: {type(exc).__name__}: {_one_line(exc)}")
        return None if delivered else "; ".join(errors)


def _post(url: str, body: bytes, timeout: float) -> None:
    """POST ``body`` as JSON; raises unless the answer is a 2xx."""
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "venturi-alerts"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:  # a 4xx or 5xx answer
        exc.close()
        raise OSError(f"HTTP {exc.code} {exc.reason}") from None


def _count(value: object, knob: str) -> int:
    return validate.integer(value, f"alerts {knob}", minimum=0)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def _kinds(kinds: Any) -> frozenset[str]:
    """``kinds`` checked: an iterable of kinds, not one kind (a string iterates its
    letters: ``kinds="export"`` checked e, x, p, o, r and t, and never export)."""
    if isinstance(kinds, str) or not isinstance(kinds, Iterable):
        raise ConfigError(f"alerts kinds must be a list of kinds, got {validate.shown(kinds)}")
    return frozenset(validate.kind(k, "alerts kinds") for k in kinds)
