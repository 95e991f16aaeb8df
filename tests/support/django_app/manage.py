"""manage.py of the test project (settings: tests.support.django_app.settings)."""

import os
import sys

if __name__ == "__main__":
    if os.environ.get("VENTURI_DJANGO_DRIVER") == "psycopg2":
        sys.modules["psycopg"] = None  # type: ignore[assignment]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.support.django_app.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
