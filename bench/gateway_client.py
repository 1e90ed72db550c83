"""The request loop the gateway benchmark runs in each sandbox, with the sandbox's own python3
(standard library only; sent inline, `python3 -c`, so nothing is copied in).

`MODE HOST PORT GO OUT SECONDS`: waits for the file GO (the host writes the start time in
it, so every sandbox starts at once), then for SECONDS makes one request after another, each
on a new connection, read to its end: MODE `proxy` through the gateway (the sandbox's
`HTTP_PROXY`, its token as `Proxy-Authorization`), `direct` to 127.0.0.1:PORT (the sandbox's
`host_ports`, through the relay only). Writes what it counted to OUT as JSON.

As plain as a client gets (a socket, one `sendall`, `recv` to the end), so that the figure is
the path's, not an HTTP library's.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import sys
import time
from urllib.parse import urlsplit

WAIT_STEP = 0.02
TIMEOUT = 10.0


def request_for(mode: str, host: str, port: int) -> tuple[tuple[str, int], bytes]:
    """Where to connect, and what to send."""
    if mode == "direct":
        head = f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
        return ("127.0.0.1", port), head.encode()
    proxy = urlsplit(os.environ["HTTP_PROXY"])
    user = f"{proxy.username}:{proxy.password}".encode()
    head = (
        f"GET http://{host}:{port}/ HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Proxy-Authorization: Basic {base64.b64encode(user).decode()}\r\n\r\n"
    )
    return (proxy.hostname or "127.0.0.1", proxy.port or 80), head.encode()


def one(address: tuple[str, int], head: bytes) -> bool:
    with socket.create_connection(address, timeout=TIMEOUT) as sock:
        sock.sendall(head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok")


def main(argv: list[str]) -> int:
    mode, host, port, go, out, seconds = argv
    address, head = request_for(mode, host, int(port))
    while not os.path.exists(go):
        time.sleep(WAIT_STEP)
    start = float(open(go).read())
    time.sleep(max(0.0, start - time.time()))
    end = start + float(seconds)
    ok = failed = 0
    latencies = []
    errors: dict[str, int] = {}
    while time.time() < end:
        began = time.perf_counter()
        try:
            good = one(address, head)
        except OSError as error:
            good = False
            errors[type(error).__name__] = errors.get(type(error).__name__, 0) + 1
        if good:
            ok += 1
            latencies.append(time.perf_counter() - began)
        else:
            failed += 1
    latencies.sort()
    cut = [latencies[int(q * (len(latencies) - 1))] for q in (0.5, 0.99)] if latencies else []
    said = {"ok": ok, "failed": failed, "errors": errors, "latency_p50_p99": cut}
    with open(out, "w") as file:
        json.dump(said, file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
