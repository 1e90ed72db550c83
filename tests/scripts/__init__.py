"""Tests of the two commands in scripts/ (what they install)."""
