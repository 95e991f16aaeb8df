"""The removed pooler= parameter is refused with its replacement named."""

from __future__ import annotations

import pytest

from venturi import db, errors


def test_the_pooler_parameter_is_removed_and_checked() -> None:
    split = db.connect.split_pooler
    assert split("postgresql://u@h:6432/db?pooler=transaction") == (
        "postgresql://u@h:6432/db",
        True,
    )
    assert split("postgresql://u@h/db?sslmode=disable&pooler=Transaction&x=1") == (
        "postgresql://u@h/db?sslmode=disable&x=1",
        True,
    )
    assert split("postgresql://u@h/db?sslmode=disable") == (
        "postgresql://u@h/db?sslmode=disable",
        False,
    )
    assert split("host=h port=6432 pooler=transaction dbname=d") == (
        "host=h port=6432 dbname=d",
        True,
    )
    with pytest.raises(errors.ConnectError, match="pooler must be 'transaction'"):
        split("postgresql://u:secret@h/db?pooler=session")
    with pytest.raises(errors.ConnectError) as caught:
        split("postgresql://u:secret@h/db?pooler=yes")
    assert "secret" not in str(caught.value)
