"""The ground of overnight: the models, the constants and the spec rules, and the small pure
helpers every floor shares (texts, settings, addresses, the codec, the Temporal connection).

It imports no activity, no workflow and nothing of the roof (`overnight.cli`,
`overnight.worker`, `overnight.console`, `overnight.demo`): every other floor stands on it
(`.importlinter`, docs/layout.md). A module here holds one concern; this package's own
`__init__` imports nothing.
"""
