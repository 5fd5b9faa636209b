"""The other edge: tables, plots, markdown reports."""
