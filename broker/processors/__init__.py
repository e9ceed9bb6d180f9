"""One module per request family, each a table of request code -> handler (DESIGN.md)."""
