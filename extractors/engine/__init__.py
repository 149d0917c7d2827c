"""The data-flow engine over libcst, and the questions both sides ask of its values."""
