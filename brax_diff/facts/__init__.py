"""Canonical facts: the vocabulary both sides are mapped onto, facts with provenance, scopes."""
