"""A container's network: its own namespace (its own loopback: two tasks can use one port), and,
where the task wants the internet, outside access through slirp4netns (user-mode TCP/IP over this
machine's own sockets: no bridge, no NAT rules on the host; the host's loopback stays out of reach).

Names are resolved by a DNS forwarder at 127.0.0.11 inside the namespace (where Docker's embedded
DNS sits), run by this process: it asks this machine's resolvers and records every name and its
outcome, so a task that fails after looking up a host this machine cannot reach is reported as
"needs the internet: <host>" rather than as a failure. Without outside access (slirp4netns
missing) the forwarder refuses every name and still records it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import select
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

DNS_ADDRESS = "127.0.0.11"
GUEST_ADDRESS = "10.0.2.100"  # slirp4netns's default address for the namespace's tap0
_CLONE_NEWNET = 0x40000000
_FAILED_RCODES = {2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED"}
_ADDRESS_TYPES = {1, 28, 255}  # A, AAAA, ANY
# Names no public resolver answers: local or reserved (RFC 2606, 6761, 6762, 8375), and reverse lookups.
_LOCAL_NAME = re.compile(
    r"(?:^[^.]+$)|\.(?:local|localhost|localdomain|invalid|test|example|internal|lan|"
    r"home\.arpa|in-addr\.arpa|ip6\.arpa)$"
)


def outside_access_problem() -> str | None:
    if shutil.which("slirp4netns") is None:
        return "slirp4netns is not installed (apt-get install slirp4netns): tasks get no outside access"
    if not Path("/dev/net/tun").exists():
        return "/dev/net/tun is missing: tasks get no outside access"
    return None


def nameservers(resolv_conf: Path = Path("/etc/resolv.conf")) -> list[str]:
    """This machine's resolvers (IPv4), as its resolv.conf names them."""
    try:
        text = resolv_conf.read_text()
    except OSError:
        return []
    return [m.group(1) for m in re.finditer(r"^\s*nameserver\s+(\d+\.\d+\.\d+\.\d+)\s*$", text, re.MULTILINE)]


def in_namespace(pid: int, make):
    """Call `make()` in the network namespace of process `pid` (on a short-lived thread: setns moves
    only the calling thread; a socket keeps the namespace it was made in)."""
    libc = ctypes.CDLL(None, use_errno=True)
    out: dict = {}

    def run() -> None:
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        try:
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns into the container's network namespace failed")
            out["value"] = make()
        except BaseException as exc:  # handed to the caller's thread
            out["error"] = exc
        finally:
            os.close(fd)

    worker = threading.Thread(target=run, name="clover-netns")
    worker.start()
    worker.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def question(message: bytes) -> tuple[str, int] | None:
    """(name, type) of a DNS message's first question; None when it has none."""
    if len(message) < 12 or int.from_bytes(message[4:6], "big") == 0:
        return None
    pos, labels = 12, []
    while True:
        if pos >= len(message):
            return None  # the name never ends
        size = message[pos]
        if size == 0:
            pos += 1
            break
        if size & 0xC0 or pos + 1 + size > len(message):  # a question's name is never compressed
            return None
        labels.append(message[pos + 1 : pos + 1 + size].decode("ascii", "replace"))
        pos += 1 + size
    if pos + 4 > len(message):
        return None
    return ".".join(labels).lower(), int.from_bytes(message[pos : pos + 2], "big")


def failure_reply(query: bytes, rcode: int) -> bytes:
    """An answer to `query` with no records and `rcode` (the question kept, as resolvers expect)."""
    flags = (0x8000 | (int.from_bytes(query[2:4], "big") & 0x7900) | 0x0080 | rcode).to_bytes(2, "big")
    return query[:2] + flags + query[4:6] + b"\0\0\0\0\0\0" + _question_bytes(query)


def _question_bytes(query: bytes) -> bytes:
    pos = 12
    while pos < len(query) and query[pos] != 0:
        pos += 1 + query[pos]
    return query[12 : pos + 5]


@dataclass
class Lookup:
    name: str
    qtype: int
    outcome: str  # "ok" | "NXDOMAIN" | "SERVFAIL" | "REFUSED" | "timeout"


class DnsForwarder:
    """The namespace's resolver at 127.0.0.11:53 (UDP and TCP); see the module's docstring."""

    def __init__(
        self, pid: int, *, upstream: list[str] | None, log: Path | None = None, timeout: float = 5.0
    ) -> None:
        self.upstream = upstream  # "address[:port]" of the resolvers to ask; None: refuse every name
        self.timeout = timeout
        self.log = log
        self.lookups: list[Lookup] = []
        self._lock = threading.Lock()
        self._stop_r, self._stop_w = os.pipe()
        self._udp, self._tcp = in_namespace(pid, self._sockets)
        self._thread = threading.Thread(target=self._serve, name="clover-dns", daemon=True)
        self._thread.start()

    @staticmethod
    def _sockets() -> tuple[socket.socket, socket.socket]:
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind((DNS_ADDRESS, 53))
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind((DNS_ADDRESS, 53))
        tcp.listen(16)
        return udp, tcp

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._stop_w, b"x")
        self._thread.join(timeout=5)
        for handle in (self._udp, self._tcp):
            handle.close()
        for fd in (self._stop_r, self._stop_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def failed_names(self) -> list[str]:
        """Public hosts whose address never resolved (each once, in the order first asked). Only
        address lookups count: a service record (apt asks for _http._tcp.<mirror>) may well not exist."""
        with self._lock:
            lookups = [x for x in self.lookups if x.qtype in _ADDRESS_TYPES and not x.name.startswith("_")]
        resolved = {x.name for x in lookups if x.outcome == "ok"}
        names = [
            x.name
            for x in lookups
            if x.outcome != "ok" and x.name not in resolved and not _LOCAL_NAME.search(x.name)
        ]
        return list(dict.fromkeys(names))

    # ------------------------------------------------------------------ serving

    def _serve(self) -> None:
        while True:
            ready, _, _ = select.select([self._udp, self._tcp, self._stop_r], [], [])
            if self._stop_r in ready:
                return
            if self._udp in ready:
                with contextlib.suppress(OSError):
                    query, peer = self._udp.recvfrom(4096)
                    threading.Thread(target=self._answer_udp, args=(query, peer), daemon=True).start()
            if self._tcp in ready:
                with contextlib.suppress(OSError):
                    conn, _ = self._tcp.accept()
                    threading.Thread(target=self._answer_tcp, args=(conn,), daemon=True).start()

    def _answer_udp(self, query: bytes, peer) -> None:
        reply = self._resolve(query, tcp=False)
        if reply:
            with contextlib.suppress(OSError):
                self._udp.sendto(reply, peer)

    def _answer_tcp(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(self.timeout)
            with contextlib.suppress(OSError, ValueError):
                while True:
                    size = int.from_bytes(_recv_exact(conn, 2), "big")
                    reply = self._resolve(_recv_exact(conn, size), tcp=True)
                    if not reply:
                        return
                    conn.sendall(len(reply).to_bytes(2, "big") + reply)

    def _resolve(self, query: bytes, *, tcp: bool) -> bytes | None:
        asked = question(query)
        if asked is None:
            return None
        reply, outcome = None, "timeout"
        if self.upstream is None:
            reply, outcome = failure_reply(query, 5), "REFUSED"
        for server in self.upstream or []:
            with contextlib.suppress(OSError):
                reply = (
                    _ask_tcp(server, query, self.timeout) if tcp else _ask_udp(server, query, self.timeout)
                )
                rcode = reply[3] & 0x0F
                outcome = _FAILED_RCODES.get(rcode, "ok")
                if rcode != 2:  # SERVFAIL: try the next resolver
                    break
        if reply is None:
            reply = failure_reply(query, 2)
        self._record(Lookup(asked[0], asked[1], outcome))
        return reply

    def _record(self, lookup: Lookup) -> None:
        with self._lock:
            self.lookups.append(lookup)
            if self.log is not None:
                with contextlib.suppress(OSError), self.log.open("a") as fh:
                    fh.write(
                        f"{time.strftime('%H:%M:%S')} {lookup.name} type={lookup.qtype} {lookup.outcome}\n"
                    )


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ValueError("connection closed")
        data += chunk
    return data


def _address(server: str) -> tuple[str, int]:
    """ "10.0.0.2" or "127.0.0.1:5353" -> (host, port)."""
    host, _, port = server.partition(":")
    return host, int(port or 53)


def _ask_udp(server: str, query: bytes, timeout: float) -> bytes:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.connect(_address(server))
        sock.send(query)
        while True:
            reply = sock.recv(65535)
            if reply[:2] == query[:2]:
                return reply


def _ask_tcp(server: str, query: bytes, timeout: float) -> bytes:
    with socket.create_connection(_address(server), timeout=timeout) as sock:
        sock.sendall(len(query).to_bytes(2, "big") + query)
        return _recv_exact(sock, int.from_bytes(_recv_exact(sock, 2), "big"))


class Slirp:
    """slirp4netns attached to the namespace of `pid` (tap0, 10.0.2.100/24, default route); it
    ends when this process closes its end of the exit pipe (or dies), or at `close`."""

    def __init__(self, pid: int, *, log: Path, timeout: float = 30) -> None:
        ready_r, ready_w = os.pipe()
        self._exit_r, self._exit_w = os.pipe()
        with log.open("ab") as out:
            self._proc = subprocess.Popen(
                [
                    "slirp4netns",
                    "--configure",
                    "--mtu=65520",
                    "--disable-host-loopback",
                    "--enable-sandbox",
                    "--enable-seccomp",
                    f"--ready-fd={ready_w}",
                    f"--exit-fd={self._exit_r}",
                    str(pid),
                    "tap0",
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                pass_fds=(ready_w, self._exit_r),
                start_new_session=True,
            )
        os.close(ready_w)
        os.close(self._exit_r)
        try:
            ready, _, _ = select.select([ready_r], [], [], timeout)
            ok = bool(ready) and os.read(ready_r, 1) == b"1"
        finally:
            os.close(ready_r)
        if not ok:
            self.close()
            raise OSError("slirp4netns did not come up: " + log.read_text(errors="replace").strip()[-300:])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._exit_w)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=5)
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
