"""What every concern builds on in a sandbox: its clone, branch, kit files, environment and first
checkpoint (`setup.py`), its checkpoint read (`checkpoints.py`), and git's words when a clone
fails. Below `sandbox/`, `coding_agent/`, `workspace/` and `delivery/`, which all use it."""
