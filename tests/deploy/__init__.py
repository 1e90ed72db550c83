"""Tests of the deployment examples in deploy/."""
