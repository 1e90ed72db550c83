"""A hostile agent: tries, from inside its sandbox, what a prompt-injected agent would try
against its supervisor and its host, and writes what happened to its checkpoint (one JSON
object: probe -> outcome), then exits 0.

The probes it is given come from its environment (`HOSTILE_*`): the Temporal frontend's
port, a host socket, the worker's venv and state folder, a declared host port and an
address outside the host.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import time


def connect(host: str, port: int) -> str:
    try:
        with socket.create_connection((host, port), timeout=3):
            return "reached"
    except OSError as error:
        return f"refused: {error.strerror or error}"


def proxied_get(url: str) -> str:
    """A GET through the sandbox's proxy (the worker's gateway), whatever NO_PROXY says: its
    status, or why none."""
    import base64
    import http.client
    import urllib.parse

    proxy = urllib.parse.urlsplit(os.environ.get("HTTP_PROXY", ""))
    if not proxy.hostname or proxy.port is None:
        return "no proxy"
    pair = f"{proxy.username}:{proxy.password}".encode()
    connection = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=10)
    try:
        headers = {"Proxy-Authorization": "Basic " + base64.b64encode(pair).decode()}
        connection.request("GET", url, headers=headers)
        answer = connection.getresponse()
        said = answer.read().decode(errors="replace").strip()
        return (
            f"reached: {answer.status}"
            if answer.status < 400
            else f"refused: {answer.status} {said}"
        )
    except OSError as error:
        return f"failed: {error}"
    finally:
        connection.close()


def try_write(path: str, text: str) -> str:
    try:
        with open(path, "w") as out:
            out.write(text)
        return "written"
    except OSError as error:
        return f"refused: {error.strerror}"


def try_read(path: str) -> str:
    try:
        with open(path, "rb") as found:
            found.read(16)
        return "read"
    except OSError as error:
        return f"refused: {error.strerror}"


def try_list(path: str) -> str | list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError as error:
        return f"refused: {error.strerror}"


def forks(most: int) -> int:
    """How many sleeping children it can hold at once (stopped at `most`)."""
    children = []
    try:
        for _ in range(most):
            pid = os.fork()
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            children.append(pid)
    except OSError:
        pass
    for pid in children:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return len(children)


def main() -> int:
    env = os.environ
    found: dict[str, object] = {
        "uid": os.getuid(),
        "frontend": connect("127.0.0.1", int(env["HOSTILE_FRONTEND_PORT"])),
        "frontend_through_gateway": connect("10.0.2.2", int(env["HOSTILE_FRONTEND_PORT"])),
        "declared_port": connect("127.0.0.1", int(env["HOSTILE_DECLARED_PORT"])),
        "temporal_cli": shutil.which("temporal"),
        "venv_seen": os.path.exists(env["HOSTILE_VENV"]),
        "state_seen": os.path.exists(env["HOSTILE_STATE"]),
        "host_socket_seen": os.path.exists(env["HOSTILE_HOST_SOCKET"]),
        "proc_sys": try_write("/proc/sys/kernel/printk_ratelimit", "1"),
        "sysrq": try_write("/proc/sysrq-trigger", "h"),
        "shadow": try_read("/etc/shadow"),
        "root_home": try_list("/root"),
        "homes": try_list("/home"),
        "run": try_list("/run"),
        "forks": forks(int(env.get("HOSTILE_FORKS", "0"))),
    }
    outside = env.get("HOSTILE_OUTSIDE", "")
    if outside:
        host, _, port = outside.rpartition(":")
        found["outside"] = connect(host, int(port))
        found["outside_through_gateway"] = proxied_get(f"http://{outside}/")
        # The worker's Temporal frontend, asked of the gateway by a name of its loopback.
        frontend = f"http://127.0.0.1:{env['HOSTILE_FRONTEND_PORT']}/"
        found["frontend_by_gateway"] = proxied_get(frontend)
    checkpoint = env["OVERNIGHT_CHECKPOINT"]
    with open(checkpoint + ".tmp", "w") as out:
        json.dump(found, out)
    os.replace(checkpoint + ".tmp", checkpoint)
    print(json.dumps(found), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
