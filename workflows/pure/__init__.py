"""The decision core: pure functions of a run's state, what it saw and the time.

Nothing here does I/O or knows Temporal (the `pure-decisions` contract in `.importlinter`
holds the whole folder); the workflow modules beside this folder carry out what these
decide, and only they call activities (through `workflows.calls`).
"""
