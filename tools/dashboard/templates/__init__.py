"""The console's jinja2 templates (package data; a package so that setuptools ships them as one)."""
