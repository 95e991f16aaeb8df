"""A migration's statements never change once committed: a database records the versions
it applied, not what they held, so a migration changed after some database applied it
leaves that database short of what the version says (migrations 19, 20 and 25 did, until
migration 26 made their objects again). Comments may change; statements may not. A
change to the schema is a new migration; a part of the schema that a migration includes
(schema/_*.sql.j2) is changed by forking it, or by a new migration that alters it."""

from __future__ import annotations

import hashlib
import re

from venturi import sql

# The first 16 hex digits of the SHA-256 of each migration's statements (default schema,
# comments and blank space removed), as committed.
FROZEN = {
    1: "0d7c148bebb35b69",
    2: "6fbb4b86b8106e35",
    3: "ae71197b4dca705d",
    4: "0fb88bb8ed0c12df",
    5: "e92e24d61a10cc79",
    6: "e193b4c4f7efa24c",
    7: "9728cf281af41c92",
    8: "3a9bed7b89d59869",
    9: "1257fd2a881ae472",
    10: "7b3f42966a98c8aa",
    11: "f200472b06e47da8",
    12: "84dc53b493f90c9c",
    13: "3f401db11566f857",
    14: "ac3ef4b50ce54062",
    15: "e9f4213816e880a1",
    16: "9501da13824cfd69",
    17: "03d16015f72ad813",
    18: "9beef69c8d3f2313",
    19: "58b2c6e51c0f3a5f",
    20: "ffbabb7f0037e0ab",
    21: "e1757eb77472a2a8",
    22: "b5d7728e6ebf400a",
    23: "97c368786632f53d",
    24: "a43471b70bcf1cfa",
    25: "f8b64c52a1602c54",
    26: "0324b7aa1553fadb",
    27: "df78971b07c8a1ba",
    28: "bdd40aaa412d67aa",
}


def statements(text: str) -> str:
    without_comments = re.sub(r"--[^\n]*", "", text)
    return " ".join(without_comments.split())


def digest(text: str) -> str:
    return hashlib.sha256(statements(text).encode()).hexdigest()[:16]


def test_no_migration_changes_once_committed() -> None:
    now = {m.version: digest(m.sql) for m in sql.migrations()}
    changed = sorted(v for v, d in FROZEN.items() if now.get(v) != d)
    assert not changed, (
        f"migration(s) {changed} changed: a database that applied them holds the old "
        "statements; write the change as a new migration (fork an included schema part)"
    )
    # A new migration is pinned when it is committed.
    assert sorted(now) == sorted(FROZEN), sorted(set(now) - set(FROZEN))


def test_comments_are_not_statements() -> None:
    assert statements("SELECT 1; -- why\n--  more\n  SELECT   2;") == "SELECT 1; SELECT 2;"
