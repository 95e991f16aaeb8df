"""The exceptions venturi raises on purpose."""

from __future__ import annotations


class VenturiError(Exception):
    """Base class of every error venturi raises on purpose."""


class ConfigError(VenturiError, ValueError):
    """A knob was given a value it cannot take; the message names the knob."""


class SchemaError(VenturiError):
    """The database is unreachable or the venturi schema is not applied (or too old)."""


class ConnectError(VenturiError):
    """The database could not be reached; the message never contains the password."""
