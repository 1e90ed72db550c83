"""What a coding agent (`RunSpec.agent`) adds to a sandbox: its CLI and session store, its model
calls through the worker's gateway, its key on Runtime and the check of its `base_url`. The
kinds themselves are plug-ins of the kit (overnight/agent_kit/clis/)."""
