"""The DSN's password never shows in what a command prints when it fails: for every
command, the DSN by --dsn or VENTURI_DSN, in every spelling of a DSN; a real subprocess."""

from __future__ import annotations

import urllib.parse

import pytest

from tests.support import venturi_cli

SECRET = "Pa55-w0rd-never-shown"


@pytest.mark.parametrize(
    "command",
    [
        ["worker", "tests.support.workertasks"],
        ["recover"],
        ["jobs", "list"],
        ["jobs", "show", "1"],
        ["jobs", "retry", "1"],
        ["jobs", "cancel", "1"],
        ["stats"],
        ["top", "--once"],
        ["purge", "--older-than", "1d"],
        ["schema", "apply"],
    ],
)
@pytest.mark.parametrize("via", ["--dsn", "VENTURI_DSN"])
def test_password_never_in_a_command_error(command: list[str], via: str) -> None:
    dsn = f"postgresql://me:{SECRET}@127.0.0.1:1/db"
    if via == "--dsn":
        out = venturi_cli(*command, "--dsn", dsn)
    else:
        out = venturi_cli(*command, env={"VENTURI_DSN": dsn})
    assert out.returncode == 2, out.stderr
    assert SECRET not in out.stderr + out.stdout
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("venturi: cannot connect to")


@pytest.mark.parametrize(
    "dsn",
    [
        pytest.param(f"postgresql://me:{SECRET}@127.0.0.1:1/db?sslmode=disable", id="uri"),
        pytest.param(f"postgresql://me@127.0.0.1:1/db?password={SECRET}", id="query"),
        pytest.param(
            f"postgresql://me:{urllib.parse.quote(SECRET + '@/#', safe='')}@127.0.0.1:1/db",
            id="encoded",
        ),
        pytest.param(
            f"host=127.0.0.1 port=1 user=me password={SECRET}",
            id="conninfo",
        ),
        pytest.param(
            f"postgresql://me:{SECRET[:4]}/{SECRET[4:]}@127.0.0.1:1/db",
            id="slash-in-password",
        ),
        pytest.param(
            f"postgresql://me:{SECRET[:4]}?{SECRET[4:]}@127.0.0.1:1/db",
            id="question-mark-in-password",
        ),
    ],
)
def test_password_never_in_a_connect_error(dsn: str) -> None:
    out = venturi_cli("schema", "apply", "--dsn", dsn)
    assert out.returncode == 2
    text = out.stderr + out.stdout
    for piece in {SECRET, SECRET[:4], SECRET[4:], urllib.parse.quote(SECRET + "@/#", safe="")}:
        assert piece not in text, text


@pytest.mark.parametrize(
    ("given", "passed", "trusted", "not_trusted"),
    [
        ("10.0.0.5/24", "10.0.0.0/24", "10.0.0.5", "10.0.1.5"),
        ("10.0.0.1, *", "*", "192.168.1.9", None),
        ("127.0.0.1, ::1", "127.0.0.1/32,::1/128", "::1", "10.0.0.1"),
    ],
)
def test_forwarded_allow_ips_mean_what_they_say_to_uvicorn(
    given: str, passed: str, trusted: str, not_trusted: str | None
) -> None:
    # A network written with host bits (10.0.0.5/24) passed the check and uvicorn, which
    # reads it strictly, took it for a name that matches no address; '*' beside others
    # trusted none of them but those. What venturi web passes uvicorn trusts what was
    # written.
    from uvicorn.middleware.proxy_headers import _TrustedHosts

    from venturi.cli.web import _proxies

    assert _proxies(given) == passed
    hosts = _TrustedHosts(passed)
    assert trusted in hosts
    if not_trusted is not None:
        assert not_trusted not in hosts
