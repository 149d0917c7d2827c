"""Bounds on the work any input can cause; safe reads and writes; the template sandbox."""
