"""Carries connections from inside a sandbox to the worker's loopback, on the ports its spec
names (`RunSpec.host_ports`) and no others.

`python -I -S port_relay.py PID UID PORT...`: a child process joins the network namespace of
`PID` (the sandbox's first process; its user namespace first, for a worker that is not
root), listens on 127.0.0.1:PORT there and hands the listening sockets back; the relay then
runs in the worker's own namespace, where each accepted connection is joined to
127.0.0.1:PORT. It prints `ready` once listening, drops to `UID` (when root and UID >= 0)
and dies with its parent.

Standard library only, no site packages: it runs beside the launcher.
"""

from __future__ import annotations

import ctypes
import encodings.idna  # noqa: F401 - loaded before dropping to a user who may not read it
import errno
import fcntl
import os
import selectors
import signal
import socket
import sys
import time

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
NS_GET_USERNS = 0xB701
MAX_CONNECTIONS = 64
CHUNK = 64 * 1024
# A peer that takes no bytes for this long loses its connection (the relay is one thread).
SEND_TIMEOUT = 30.0
LOOPBACK_WAIT_SECONDS = 5.0


def _join(pid: int, kind: str, flag: int, libc: ctypes.CDLL) -> None:
    path = f"/proc/{pid}/ns/{kind}"
    if os.stat(path).st_ino == os.stat(f"/proc/self/ns/{kind}").st_ino:
        return
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, flag) != 0:
            raise OSError(ctypes.get_errno(), f"cannot join the sandbox's {kind} namespace")
    finally:
        os.close(fd)


def _join_owner(pid: int, libc: ctypes.CDLL) -> None:
    """Join the user namespace owning the sandbox's network namespace, unless it is ours (a
    worker that is not root: bubblewrap nests the sandbox's own user namespace in it)."""
    net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        owner = fcntl.ioctl(net, NS_GET_USERNS)
    finally:
        os.close(net)
    try:
        if os.fstat(owner).st_ino == os.stat("/proc/self/ns/user").st_ino:
            return
        if libc.setns(owner, CLONE_NEWUSER) != 0:
            raise OSError(ctypes.get_errno(), "cannot join the sandbox's user namespace")
    finally:
        os.close(owner)


def listen_inside(pid: int, ports: list[int]) -> list[socket.socket]:
    """Listening sockets on 127.0.0.1:PORT in the sandbox's network namespace."""
    here, there = socket.socketpair()
    child = os.fork()
    if child == 0:  # joins the namespaces: a process can enter a user namespace only alone
        here.close()
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _join_owner(pid, libc)
            _join(pid, "net", CLONE_NEWNET, libc)
            made = [_listener(port) for port in ports]
            socket.send_fds(there, [b"ok"], [sock.fileno() for sock in made])
            os._exit(0)
        except BaseException as error:  # told to the parent, then gone
            there.sendall(f"error: {error}".encode()[:500])
            os._exit(1)
    there.close()
    message, fds, _, _ = socket.recv_fds(here, 1024, len(ports))
    os.waitpid(child, 0)
    if message != b"ok":
        raise SystemExit(message.decode(errors="replace") or "the namespace helper died")
    return [socket.socket(fileno=fd) for fd in fds]


def _listener(port: int) -> socket.socket:
    # bwrap brings the sandbox's loopback up just after it says its pid: wait for it.
    give_up = time.monotonic() + LOOPBACK_WAIT_SECONDS
    while True:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as error:
            sock.close()
            if error.errno != errno.EADDRNOTAVAIL or time.monotonic() > give_up:
                raise
            time.sleep(0.005)
            continue
        sock.listen(16)
        return sock


class Relay:
    def __init__(self, listeners: list[socket.socket]) -> None:
        self.selector = selectors.DefaultSelector()
        self.peers: dict[socket.socket, socket.socket] = {}
        for listener in listeners:
            listener.setblocking(False)
            self.selector.register(listener, selectors.EVENT_READ, "listen")

    def serve(self) -> None:
        while True:
            for key, _ in self.selector.select():
                if key.data == "listen":
                    self._accept(key.fileobj)  # type: ignore[arg-type]
                else:
                    self._pump(key.fileobj)  # type: ignore[arg-type]

    def _accept(self, listener: socket.socket) -> None:
        try:
            inside, _ = listener.accept()
        except OSError:
            return
        if len(self.peers) >= 2 * MAX_CONNECTIONS:
            inside.close()
            return
        port = listener.getsockname()[1]
        try:
            outside = socket.create_connection(("127.0.0.1", port), timeout=5.0)
        except OSError:
            inside.close()
            return
        for sock in (inside, outside):
            sock.settimeout(SEND_TIMEOUT)
            self.selector.register(sock, selectors.EVENT_READ, "pump")
        self.peers[inside], self.peers[outside] = outside, inside

    def _pump(self, sock: socket.socket) -> None:
        peer = self.peers.get(sock)
        try:
            data = sock.recv(CHUNK)
            if data and peer is not None:
                peer.sendall(data)
                return
        except OSError:
            pass
        self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        peer = self.peers.pop(sock, None)
        for one in (sock, peer):
            if one is None:
                continue
            self.peers.pop(one, None)
            try:
                self.selector.unregister(one)
            except (KeyError, ValueError):
                pass
            one.close()


def main(argv: list[str]) -> int:
    pid, uid, ports = int(argv[1]), int(argv[2]), [int(port) for port in argv[3:]]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    parent = os.getppid()
    listeners = listen_inside(pid, ports)
    if os.geteuid() == 0 and uid >= 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        # A change of user clears the death signal (prctl(2)): set again, or the relay
        # outlives a killed launcher for good.
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        return 0  # the parent died before the death signal was set
    print("ready", flush=True)
    Relay(listeners).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
