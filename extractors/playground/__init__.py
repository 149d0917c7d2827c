"""MuJoCo Playground's configs and scripts, read for the sides that train on it."""
