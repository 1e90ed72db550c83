"""What a run may have: a place in its pool (`activities.py`), what the worker grants a spec,
whose the host ports it names are, and whether a host's task queue is still served."""
