"""A network of its own for an isolated local sandbox: outbound through slirp4netns, the
worker's loopback only on the ports the spec names.

bubblewrap makes the sandbox's network namespace (`--unshare-net`: only `lo`) and waits on
its block pipe; `start` then plugs a user-mode network stack into it and lets it go:

- `slirp4netns --configure --disable-host-loopback`: a tap device with a default route
  through a NAT that opens the sandbox's connections from the worker's own namespace. The
  gateway's way to the host's 127.0.0.1 is shut, so the Temporal frontend, the dev server's
  UI and every other service on the worker's loopback stay out of reach. DNS goes to
  slirp's resolver (10.0.2.3, which forwards to the worker's).
- `port_relay.py` for `host_ports`: listens on 127.0.0.1:PORT inside the sandbox and carries each
  connection to the same port on the worker's loopback, and nothing else.

Both end with the sandbox (`Network.close`, called by whoever started bubblewrap), and die
with their parent when that one is killed (slirp4netns's exit pipe closes; the relay watches
its parent).

Standard library only: the launcher loads it by path (it runs with `python -I`).
"""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

SLIRP_ADDRESS = "10.0.2.100"
SLIRP_DNS = "10.0.2.3"
RESOLV_CONF_TEXT = f"nameserver {SLIRP_DNS}\n"
READY_SECONDS = 10.0
RELAY = Path(__file__).with_name("port_relay.py")
TUN = "/dev/net/tun"
# ioctl(2) on a namespace file: the user namespace that owns it.
NS_GET_USERNS = 0xB701
INSTALL_HINT = "install slirp4netns (Debian/Ubuntu: sudo apt-get install slirp4netns)"


class NetworkError(Exception):
    """The sandbox's network could not be set up (the sandbox must not run without it)."""


def problem() -> str | None:
    """Why this machine cannot give sandboxes a network of their own, or None."""
    if shutil.which("slirp4netns") is None:
        return f"local sandboxes get a network of their own from slirp4netns: {INSTALL_HINT}"
    if not os.path.exists(TUN):
        return (
            f"local sandboxes get a network of their own through {TUN}, which this machine "
            "lacks (load the tun module: modprobe tun; in a container, pass the device in)"
        )
    if os.geteuid() != 0 and not os.access(TUN, os.R_OK | os.W_OK):
        return (
            f"local sandboxes get a network of their own through {TUN}, which this user may "
            f"not open (as root: chmod 0666 {TUN}, as most distributions ship it)"
        )
    return None


class Network:
    """The helpers of one sandbox's network; `close` ends them."""

    def __init__(self) -> None:
        self._slirp: subprocess.Popen[bytes] | None = None
        self._exit_fd: int | None = None
        self._relay: subprocess.Popen[bytes] | None = None

    def close(self) -> None:
        if self._relay is not None:
            self._relay.kill()
        if self._exit_fd is not None:
            os.close(self._exit_fd)  # slirp4netns's exit pipe: it ends on its own
            self._exit_fd = None
        for helper in (self._relay, self._slirp):
            if helper is None:
                continue
            try:
                helper.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                helper.kill()
                helper.wait()
            for stream in (helper.stdout, helper.stderr):
                if stream is not None:
                    stream.close()
        self._relay = self._slirp = None


def start(
    child_pid: int, host_ports: list[int], uid: int | None, *, outbound: bool = True
) -> Network:
    """Plug a network into the namespace of `child_pid` (bwrap's first process) and return
    once it is up: relays to `host_ports`, and slirp4netns's route out when `outbound` (a
    sandbox behind the gateway has none: its way out is the gateway's port, relayed). Raises
    NetworkError (after cleaning up) when it cannot."""
    network = Network()
    try:
        _wait_for_loopback(child_pid)
        if outbound:
            _start_slirp(network, child_pid)
        if host_ports:
            _start_relay(network, child_pid, host_ports, uid)
    except BaseException:
        network.close()
        raise
    return network


def _wait_for_loopback(child_pid: int) -> None:
    """bwrap brings the namespace's loopback up after it says its pid; two netlink clients
    configuring one namespace at once trip each other, so slirp4netns waits for it (a local
    route to 127.0.0.1 exists once `lo` is up)."""
    give_up = time.monotonic() + READY_SECONDS
    while time.monotonic() < give_up:
        try:
            if "127.0.0.1" in Path(f"/proc/{child_pid}/net/fib_trie").read_text():
                return
        except OSError as error:
            raise NetworkError(f"the sandbox ended before its network was up ({error})") from None
        time.sleep(0.002)
    raise NetworkError("the sandbox's loopback did not come up")


def helper_env() -> dict[str, str]:
    """The helpers' environment: not the agent's (its secrets, its markers), only PATH."""
    return {"PATH": os.environ.get("PATH", os.defpath)}


def owner_user_namespace(child_pid: int) -> int | None:
    """A file descriptor of the user namespace owning the sandbox's network namespace, or None
    when that is ours (a root worker). A worker that is not root must join it to configure
    the network: bubblewrap nests the sandbox's own user namespace inside that one."""
    try:
        net = os.open(f"/proc/{child_pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as error:
        raise NetworkError(f"the sandbox ended before its network was up ({error})") from None
    try:
        owner = fcntl.ioctl(net, NS_GET_USERNS)
    finally:
        os.close(net)
    if os.fstat(owner).st_ino == os.stat("/proc/self/ns/user").st_ino:
        os.close(owner)
        return None
    return owner


def _start_slirp(network: Network, child_pid: int) -> None:
    # Asked first: it raises when the sandbox has already ended, before any pipe is made.
    owner = owner_user_namespace(child_pid)
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    join = [] if owner is None else [f"--userns-path=/proc/self/fd/{owner}"]
    argv = [
        shutil.which("slirp4netns") or "slirp4netns",
        "--configure",
        "--mtu=65520",
        "--disable-host-loopback",
        # As root it can shut itself in (its own mounts, no capabilities, a syscall filter);
        # for another user it cannot become root in the sandbox's user namespace to do so.
        *(["--enable-sandbox", "--enable-seccomp"] if owner is None else []),
        f"--ready-fd={ready_w}",
        f"--exit-fd={exit_r}",
        *join,
        str(child_pid),
        "tap0",
    ]
    try:
        network._slirp = subprocess.Popen(
            argv,
            env=helper_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(ready_w, exit_r) if owner is None else (ready_w, exit_r, owner),
        )
    except BaseException as error:
        for fd in (ready_r, ready_w, exit_r, exit_w):
            os.close(fd)
        if isinstance(error, OSError):
            raise NetworkError(f"cannot start slirp4netns ({error}): {INSTALL_HINT}") from None
        raise
    finally:
        if owner is not None:
            os.close(owner)
    os.close(ready_w)
    os.close(exit_r)
    network._exit_fd = exit_w
    try:
        ready, _, _ = select.select([ready_r], [], [], READY_SECONDS)
        said = os.read(ready_r, 1) if ready else b""
    finally:
        os.close(ready_r)
    if said != b"1":
        slirp = network._slirp
        if slirp.poll() is None:
            slirp.kill()
        why = _last_line(slirp.stderr.read() if slirp.stderr else b"") or "no word"
        network.close()
        raise NetworkError(f"slirp4netns did not bring the sandbox's network up: {why}")
    if network._slirp.stderr is not None:
        network._slirp.stderr.close()


def _start_relay(network: Network, child_pid: int, host_ports: list[int], uid: int | None) -> None:
    argv = [
        sys.executable,
        "-I",
        "-S",
        str(RELAY),
        str(child_pid),
        str(uid if uid is not None else -1),
        *(str(port) for port in host_ports),
    ]
    relay = subprocess.Popen(
        argv,
        env=helper_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    network._relay = relay
    assert relay.stdout is not None
    give_up = time.monotonic() + READY_SECONDS
    said = b""
    while time.monotonic() < give_up and b"\n" not in said:
        ready, _, _ = select.select([relay.stdout], [], [], 0.1)
        if ready:
            chunk = os.read(relay.stdout.fileno(), 64)
            if not chunk:
                break
            said += chunk
    if not said.startswith(b"ready"):
        if relay.poll() is None:
            relay.kill()
            relay.wait()
        why = _last_line(relay.stderr.read() if relay.stderr else b"")
        raise NetworkError(f"the host port relay did not start: {why or said!r}")
    relay.stdout.close()


def _last_line(text: bytes) -> str:
    lines = [line for line in text.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
