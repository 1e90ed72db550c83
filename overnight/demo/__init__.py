"""`overnight demo`: the demo, in a package of its own so an installed wheel runs it.

`commands.py` says the command (gathered by overnight/cli/command_registry.py);
`sample_demo.py` plays the sample agent (`sample_agent/main.py`, shipped as package data)
through a crash, against the outside world of `outside_world.py`; `agent_demo.py` plays a real
coding agent's CLI (`--agent`), on the fake model of `fake_model.py` and the fake GitHub of
`fake_github.py`, killed once by `kill.py`. It stands on the CLI's client helpers and
rendering; the fakes it plays on are installed beside overnight (pyproject.toml).
"""
