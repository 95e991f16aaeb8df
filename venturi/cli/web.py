"""``venturi web``: serve the dashboard (the ``web`` extra)."""

from __future__ import annotations

import importlib
import ipaddress
import logging
import os
import sys
from typing import Annotated

import typer

from venturi import sql
from venturi.cli.app import app
from venturi.cli.common import (
    DsnOption,
    SchemaOption,
    admin_run,
    fail,
    need_dsn,
)
from venturi.errors import ConfigError


@app.command("web")
def web(
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    read_only: Annotated[bool, typer.Option(help="Refuse every action (403).")] = False,
    token_file: Annotated[
        str | None,
        typer.Option(
            help="File holding the token every request must carry (or VENTURI_WEB_TOKEN)."
        ),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A name in the Host header to serve besides localhost and the loopback "
            "addresses (repeatable; '*': any). Default: any with a token, none without.",
        ),
    ] = None,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            "--forwarded-allow-ips",
            help="Trust X-Forwarded-For and X-Forwarded-Proto from these proxies: addresses "
            "or networks, comma-separated ('*': any). Default: trust none.",
        ),
    ] = None,
    tasks: Annotated[
        list[str] | None,
        typer.Option(
            "--tasks", help="Import MODULE so /schedules shows its cron tasks (repeatable)."
        ),
    ] = None,
) -> None:
    """Serve the web dashboard (needs the web extra). Without a token it binds loopback
    addresses only."""
    from venturi.web.auth import check_token, is_loopback

    target = need_dsn(dsn)
    token = os.environ.get("VENTURI_WEB_TOKEN") or None
    if token_file is not None:
        try:
            with open(token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as exc:
            raise fail(f"token-file: cannot read {token_file}: {exc.strerror}") from None
        if not token:
            raise fail(f"token-file: {token_file} is empty")
    if token is not None:
        try:
            check_token(token)
        except ConfigError as exc:
            knob = f"--token-file {token_file}" if token_file is not None else "VENTURI_WEB_TOKEN"
            raise fail(f"{knob}: {exc}") from None
    if token is None and not is_loopback(host):
        raise fail(
            f"refusing to serve {host} without a token: pass --token-file or set "
            "VENTURI_WEB_TOKEN (or bind 127.0.0.1)"
        )
    proxies = None if forwarded_allow_ips is None else _proxies(forwarded_allow_ips)
    if not 0 < port < 65536:
        raise fail(f"port must be between 1 and 65535, got {port}")
    try:
        import uvicorn

        import venturi.web
    except ImportError as exc:
        raise fail(
            f"the dashboard needs the web extra (pip install 'venturi-jobs[web]'): {exc}"
        ) from None
    for module in tasks or []:
        sys.path.insert(0, os.getcwd())
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise fail(f"cannot import {module!r}: {exc}") from None
        finally:
            sys.path.pop(0)
    try:
        dashboard = venturi.web.app(
            target,
            token=token,
            read_only=read_only,
            schema=schema,
            allowed_hosts=allowed_host or None,
        )
    except ConfigError as exc:
        raise fail(str(exc)) from None
    # Check the database now: a wrong DSN or an unapplied schema is a one-line error at
    # start, not a 503 on the first page.
    from venturi.admin import connection  # not at import: see venturi/cli/__init__.py

    admin_run(target, schema, lambda c: connection.check_schema(c, schema=schema))
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    typer.echo(
        f"venturi dashboard on http://{host}:{port}/" + (" (read-only)" if read_only else "")
    )
    # uvicorn trusts X-Forwarded-* from 127.0.0.1 unless told otherwise: any local client
    # (an SSH tunnel, another process) would name the journal's operator and the scheme.
    uvicorn.run(
        dashboard,
        host=host,
        port=port,
        log_level="warning",
        proxy_headers=proxies is not None,
        forwarded_allow_ips=proxies or "",
    )


def _proxies(value: str) -> str:
    """``--forwarded-allow-ips`` checked: addresses or networks, comma-separated, or '*'."""
    items = [item.strip() for item in value.split(",")]
    networks = []
    for item in items:
        if item == "*":
            continue
        try:
            networks.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            raise fail(
                "--forwarded-allow-ips: each must be an IP address or network (or '*'), "
                f"got {item[:60]!r}"
            ) from None
    # As uvicorn reads them: a network with host bits (10.0.0.5/24) it takes for a name
    # that matches no address, and '*' only when it is the whole value.
    return "*" if "*" in items else ",".join(networks)
