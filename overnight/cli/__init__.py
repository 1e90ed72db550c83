"""The roof: the `overnight` command (`entry.main`, then `main`) and the client helpers it uses."""
