"""A run's workspace kept off the sandbox (`activities.py`: `keep_workspace` and the restore
half of a create), its work pushed to the origin, and what the origin itself says it holds."""
