"""How long a test waits for something it expects to happen."""

# A cap, not a bound: CI runs the suite five tests at a time on two loaded cores (load 15-25),
# where a step that takes a moment here can take tens of seconds. A wait for something that
# is bound to happen gives up only after CAP; a fast machine never waits that long. Below the
# default pytest timeout (300 s, pyproject.toml) so a test that waits in vain fails by its
# own assertion, saying what it waited for.
CAP = 90.0
