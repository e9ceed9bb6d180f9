"""Shared fixtures live in tests/<suite>/conftest.py; this file makes the repo root importable."""
