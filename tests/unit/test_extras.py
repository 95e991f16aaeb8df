"""The extras of pyproject.toml bring a stack that works as installed."""

from __future__ import annotations

import tomllib

from packaging.requirements import Requirement

from tests.support.cli import ROOT


def test_the_django_extra_brings_a_postgresql_driver() -> None:
    """Django brings no database driver: without one, the first ``manage.py migrate``
    fails before venturi's migration runs. psycopg 3 is the driver Django prefers."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extra = [Requirement(r) for r in project["project"]["optional-dependencies"]["django"]]
    drivers = [r for r in extra if r.name in ("psycopg", "psycopg2", "psycopg2-binary")]
    assert drivers, "the django extra has no PostgreSQL driver"
    [psycopg] = drivers
    # The binary wheel: a fresh machine has no compiler or libpq headers.
    assert psycopg.name == "psycopg" and "binary" in psycopg.extras


def test_the_pydantic_extra_brings_pydantic_2_and_the_tests_install_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    [pydantic] = [Requirement(r) for r in extras["pydantic"]]
    assert pydantic.name == "pydantic" and pydantic.specifier.contains("2.0")
    assert not pydantic.specifier.contains("1.10")
    assert "pydantic" in {Requirement(r).name for r in extras["test"]}
    # venturi itself never imports Pydantic: only an application's model brings it.
    assert "pydantic" not in {Requirement(r).name for r in project["project"]["dependencies"]}
