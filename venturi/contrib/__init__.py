"""Integrations with the frameworks an application runs: ``venturi.contrib.django``."""
