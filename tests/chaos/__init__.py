"""Chaos tests: real runs on the real stack under injected faults (see harness.py)."""
