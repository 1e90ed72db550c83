"""The worker's gateway: a local sandbox's only way out.

A sandbox with the default network has no route to any network: its loopback reaches the
gateway's port on the worker (through the same relay as `host_ports`), and the gateway, an
HTTP(S) proxy, connects for it to the names on its run's allow-list, and only to public
addresses. Who asks is told by the token in the proxy URL the sandbox is given (its
`sandbox:token` pair, bound to the sandbox, void once the sandbox stops). Refusals are
counted per sandbox and host name for the run's status.

The rules are the ground's (`overnight/core/egress.py`, `overnight/core/addresses.py`); this package
is the I/O: the listener, name resolution, the tokens' key, the book of refusals.
"""
