"""No Django models: venturi's tables are venturi's own (``venturi.sql``), created by its
migrations. The module exists so that Django sends this app ``post_migrate``, which
upgrades the schema (apps.py)."""
