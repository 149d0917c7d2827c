"""The report: its model, Markdown and JSON rendering, the report cache, what moved."""
