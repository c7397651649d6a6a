"""A fault-injecting TCP proxy for live tests, after asyncpg's ``tests/test_adversity.py``.

``FaultProxy`` listens on a free 127.0.0.1 port and forwards every connection to a real server.
On request it does what networks do to a replication stream: resets every connection, cuts at
an exact byte of the server→client stream, flips one byte, stalls without closing (blackhole),
or refuses new connections. It runs a ``selectors`` loop in its own thread, so the code under
test may run any event loop it likes; every control method is thread-safe and has taken effect
when it returns.

Offsets (``cut_after``, ``flip_byte``) count server→client bytes over all connections, from the
moment the call reaches the proxy thread. Only the Linux socket API is used (SO_REUSEPORT,
SIOCOUTQ); the harness runs on Linux.
"""

from __future__ import annotations

import contextlib
import fcntl
import queue
import selectors
import socket
import struct
import termios
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from types import TracebackType
from typing import Final, TypeVar, cast

__all__ = ["FaultProxy", "ProxyStats"]

_T = TypeVar("_T")

_HOST: Final = "127.0.0.1"
_CHUNK: Final = 65536
# Stop reading one side while this much waits to be written to the other (back-pressure).
_HIGH_WATER: Final = 1 << 20
_CONNECT_TIMEOUT: Final = 5.0
_CALL_TIMEOUT: Final = 10.0
_JOIN_TIMEOUT: Final = 10.0
# cut_after: how long to wait for the last bytes before the cut to reach the client's kernel.
_DRAIN_TIMEOUT: Final = 2.0
_DRAIN_POLL: Final = 0.002
_RST_LINGER: Final = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST
_WAKE: Final = "wake"
_LISTEN: Final = "listen"


@dataclass(frozen=True, slots=True)
class ProxyStats:
    """A snapshot of the proxy's counters since ``start()``."""

    connections_accepted: int
    connections_active: int
    upstream_failures: int  # accepted, but the target refused: the client got a reset
    bytes_client_to_server: int
    bytes_server_to_client: int
    cuts: int  # connections reset by cut_all() or cut_after()
    flips: int  # bytes corrupted by flip_byte()


class _Counters:
    """Mutable counters, written by the proxy thread under ``lock``."""

    __slots__ = ("accepted", "c2s", "cuts", "flips", "lock", "s2c", "upstream_failures")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.accepted = 0
        self.upstream_failures = 0
        self.c2s = 0
        self.s2c = 0
        self.cuts = 0
        self.flips = 0


class _Flow:
    """One direction of a link: bytes read from ``src`` wait in ``pending`` for ``dst``."""

    __slots__ = ("downstream", "dst", "eof", "pending", "shut", "src")

    def __init__(self, src: socket.socket, dst: socket.socket, *, downstream: bool) -> None:
        self.src = src
        self.dst = dst
        self.downstream = downstream  # server→client
        self.pending = bytearray()
        self.eof = False  # src sent FIN
        self.shut = False  # FIN passed on to dst


class _Link:
    """One client connection and the upstream connection opened for it."""

    __slots__ = ("client", "cut_deadline", "down", "masks", "server", "up")

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.up = _Flow(client, server, downstream=False)
        self.down = _Flow(server, client, downstream=True)
        self.masks: dict[socket.socket, int] = {client: 0, server: 0}
        # Set when this link carried the byte that fires cut_after(): cut once drained.
        self.cut_deadline: float | None = None

    def flow_from(self, sock: socket.socket) -> _Flow:
        return self.up if sock is self.client else self.down

    def flow_to(self, sock: socket.socket) -> _Flow:
        return self.down if sock is self.client else self.up


def _unsent(sock: socket.socket) -> int:
    """Bytes still in the kernel send queue of ``sock`` (Linux SIOCOUTQ == TIOCOUTQ)."""
    raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    count: int = struct.unpack("i", raw)[0]
    return count


def _reuse_port_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    return sock


class FaultProxy:
    """A TCP proxy from a free 127.0.0.1 port to ``target_host:target_port``, with faults."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._counters = _Counters()
        # Command queue into the proxy thread; _call_lock orders puts against shutdown.
        self._commands: queue.SimpleQueue[tuple[Callable[[], object], Future[object]]] = (
            queue.SimpleQueue()
        )
        self._call_lock = threading.Lock()
        self._accepting_calls = False
        self._failure: BaseException | None = None
        # Owned by the proxy thread once it runs:
        self._sel: selectors.DefaultSelector | None = None
        self._listener: socket.socket | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._links: list[_Link] = []
        self._stopping = False
        self._blackhole = False
        self._refusing = False
        self._s2c_offset = 0  # server→client bytes read so far, the origin of all offsets
        self._cut_at: int | None = None
        self._flips: dict[int, int] = {}  # absolute s2c offset -> xor mask

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FaultProxy:
        """Bind a free port and start forwarding in a background thread."""
        if self._thread is not None:
            raise RuntimeError(f"{self!r} was already started")
        listener = _reuse_port_socket()
        try:
            listener.bind((_HOST, 0))
            listener.listen(64)
            listener.setblocking(False)
            self._wake_r, self._wake_w = socket.socketpair()
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
            self._sel = selectors.DefaultSelector()
            self._sel.register(listener, selectors.EVENT_READ, _LISTEN)
            self._sel.register(self._wake_r, selectors.EVENT_READ, _WAKE)
        except BaseException:
            listener.close()
            self._close_control()
            raise
        self._listener = listener
        self._port = listener.getsockname()[1]
        self._accepting_calls = True
        self._thread = threading.Thread(
            target=self._run, name=f"FaultProxy-{self._port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Reset every connection, close every socket and join the thread (idempotent).

        Raises RuntimeError if the proxy thread died of an unexpected exception.
        """
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._stopping = True
            self._wake()
            thread.join(_JOIN_TIMEOUT)
            if thread.is_alive():
                raise RuntimeError(f"{thread.name} did not stop within {_JOIN_TIMEOUT} s")
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise RuntimeError(f"the proxy thread failed: {failure!r}") from failure

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        host, port = self._target
        return f"<FaultProxy :{self._port} -> {host}:{port}>"

    @property
    def host(self) -> str:
        return _HOST

    @property
    def port(self) -> int:
        """The listening port; it stays the same across ``refuse(True)``/``refuse(False)``."""
        if self._port is None:
            raise RuntimeError(f"{self!r} has not been started")
        return self._port

    @property
    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ------------------------------------------------------------------ faults

    def cut_all(self) -> int:
        """Reset (RST) every live client and server connection now; return how many links.

        The listener keeps accepting: the next connection works.
        """
        return self._call(self._do_cut_all)

    def cut_after(self, n_bytes: int) -> None:
        """Reset every live connection once ``n_bytes`` more server→client bytes have passed.

        The connection carrying the last byte delivers exactly ``n_bytes`` (waiting briefly for
        them to reach the client) and then every live connection is reset. One cut is armed at
        a time: a new call replaces the previous one. ``cut_after(0)`` is ``cut_all()``.
        """
        if n_bytes < 0:
            raise ValueError(f"n_bytes must be >= 0, got {n_bytes}")

        def arm() -> None:
            if n_bytes == 0:
                self._cut_at = None
                self._do_cut_all()
            else:
                self._cut_at = self._s2c_offset + n_bytes

        self._call(arm)

    def flip_byte(self, at: int, xor: int = 0xFF) -> None:
        """XOR the server→client byte ``at`` bytes from now with ``xor`` (one-shot)."""
        if at < 0:
            raise ValueError(f"at must be >= 0, got {at}")
        if not 0 < xor <= 0xFF:
            raise ValueError(f"xor must be in 1..255 (0 would change nothing), got {xor}")

        def arm() -> None:
            offset = self._s2c_offset + at
            self._flips[offset] = self._flips.get(offset, 0) ^ xor

        self._call(arm)

    def set_blackhole(self, on: bool) -> None:
        """While on, connections stay open but nothing is read or written either way.

        Nothing is dropped: data waits in the kernel buffers and flows again when turned off.
        New connections are still accepted (and stall).
        """

        def apply() -> None:
            self._blackhole = on

        self._call(apply)

    def refuse(self, on: bool) -> None:
        """While on, the port is not listening and connect() fails with ECONNREFUSED.

        Existing connections keep working. The port stays reserved (bound, not listening), so
        turning it off again listens on the same port.
        """
        self._call(lambda: self._do_refuse(on))

    def reset(self) -> None:
        """Disarm pending cuts and flips, end blackhole and refusal; connections are kept."""

        def apply() -> None:
            self._cut_at = None
            self._flips.clear()
            self._blackhole = False
            self._do_refuse(False)

        self._call(apply)

    def stats(self) -> ProxyStats:
        """The counters now (readable after ``stop()`` as well)."""
        c = self._counters
        with c.lock:
            return ProxyStats(
                connections_accepted=c.accepted,
                connections_active=len(self._links),
                upstream_failures=c.upstream_failures,
                bytes_client_to_server=c.c2s,
                bytes_server_to_client=c.s2c,
                cuts=c.cuts,
                flips=c.flips,
            )

    # ------------------------------------------------------------------ calls into the thread

    def _call(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` in the proxy thread and return its result (or raise its exception)."""
        if threading.current_thread() is self._thread:
            return fn()
        future: Future[object] = Future()
        with self._call_lock:
            if not self._accepting_calls:
                raise RuntimeError(f"{self!r} is not running")
            self._commands.put((fn, future))
        self._wake()
        return cast(_T, future.result(timeout=_CALL_TIMEOUT))

    def _wake(self) -> None:
        wake_w = self._wake_w
        if wake_w is not None:
            with contextlib.suppress(OSError):  # full (a wake is already pending) or closed
                wake_w.send(b"\0")

    def _run_commands(self) -> None:
        assert self._wake_r is not None
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass
        while True:
            try:
                fn, future = self._commands.get_nowait()
            except queue.Empty:
                return
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except Exception as exc:
                future.set_exception(exc)

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._step()
        except BaseException as exc:
            self._failure = exc
        finally:
            self._shutdown()

    def _step(self) -> None:
        assert self._sel is not None
        draining = any(link.cut_deadline is not None for link in self._links)
        for key, events in self._sel.select(_DRAIN_POLL if draining else None):
            if key.data == _WAKE:
                self._run_commands()
            elif key.data == _LISTEN:
                self._accept()
            else:
                link, sock = key.data
                if link not in self._links:
                    continue  # closed earlier in this batch
                if events & selectors.EVENT_READ:
                    self._read(link, sock)
                if events & selectors.EVENT_WRITE and link in self._links:
                    self._write(link, sock)
                if link in self._links:
                    self._pass_on_eof(link)
        self._finish_cuts()
        for link in self._links:
            self._update_interest(link)

    def _accept(self) -> None:
        listener = self._listener
        while listener is not None and not self._refusing:
            try:
                client, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:  # the client gave up while in the accept queue
                continue
            with self._counters.lock:
                self._counters.accepted += 1
            try:
                server = socket.create_connection(self._target, timeout=_CONNECT_TIMEOUT)
            except OSError:
                with self._counters.lock:
                    self._counters.upstream_failures += 1
                self._reset(client)
                continue
            for sock in (client, server):
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._counters.lock:  # stats() reads len(self._links) under this lock
                self._links.append(_Link(client, server))

    def _read(self, link: _Link, sock: socket.socket) -> None:
        flow = link.flow_from(sock)
        try:
            data = sock.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # reset by the peer: pass the reset on
            self._close(link, reset=True)
            return
        if not data:
            flow.eof = True
            return
        if flow.downstream:
            flow.pending += self._shape(link, data)
        else:
            flow.pending += data

    def _shape(self, link: _Link, data: bytes) -> bytearray:
        """Apply an armed cut and any flips to server→client ``data``; advance the offset."""
        start = self._s2c_offset
        buf = bytearray(data)
        if self._cut_at is not None and self._cut_at <= start + len(buf):
            del buf[self._cut_at - start :]
            self._cut_at = None
            link.cut_deadline = time.monotonic() + _DRAIN_TIMEOUT
        end = start + len(buf)
        for offset in [o for o in self._flips if start <= o < end]:
            buf[offset - start] ^= self._flips.pop(offset)
            with self._counters.lock:
                self._counters.flips += 1
        self._s2c_offset = end
        return buf

    def _write(self, link: _Link, sock: socket.socket) -> None:
        flow = link.flow_to(sock)
        if not flow.pending:
            return
        # Send under the counters lock: a peer that has the bytes cannot read stale counters.
        with self._counters.lock:
            try:
                sent = sock.send(flow.pending)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                sent = -1
            else:
                if flow.downstream:
                    self._counters.s2c += sent
                else:
                    self._counters.c2s += sent
        if sent < 0:
            self._close(link, reset=True)
            return
        del flow.pending[:sent]

    def _pass_on_eof(self, link: _Link) -> None:
        """Forward a FIN once its direction is flushed; close the link when both are done."""
        for flow in (link.up, link.down):
            if flow.eof and not flow.pending and not flow.shut:
                with contextlib.suppress(OSError):
                    flow.dst.shutdown(socket.SHUT_WR)
                flow.shut = True
        if link.up.shut and link.down.shut:
            self._close(link, reset=False)

    def _finish_cuts(self) -> None:
        """Fire a cut_after() once its last bytes have reached the client (or time is up)."""
        now = time.monotonic()
        for link in self._links:
            if link.cut_deadline is None:
                continue
            if now >= link.cut_deadline or (not link.down.pending and _unsent(link.client) == 0):
                self._do_cut_all()
                return

    def _update_interest(self, link: _Link) -> None:
        assert self._sel is not None
        for sock in (link.client, link.server):
            mask = 0
            if not self._blackhole:
                out, inc = link.flow_from(sock), link.flow_to(sock)
                held = out.downstream and link.cut_deadline is not None
                if not out.eof and not held and len(out.pending) < _HIGH_WATER:
                    mask |= selectors.EVENT_READ
                if inc.pending:
                    mask |= selectors.EVENT_WRITE
            old = link.masks[sock]
            if mask == old:
                continue
            if old == 0:
                self._sel.register(sock, mask, (link, sock))
            elif mask == 0:
                self._sel.unregister(sock)
            else:
                self._sel.modify(sock, mask, (link, sock))
            link.masks[sock] = mask

    # ------------------------------------------------------------------ actions (proxy thread)

    def _do_cut_all(self) -> int:
        links = list(self._links)
        with self._counters.lock:  # count first: a client may look as soon as it sees the RST
            self._counters.cuts += len(links)
        for link in links:
            self._close(link, reset=True)
        return len(links)

    def _do_refuse(self, on: bool) -> None:
        if on == self._refusing:
            return
        assert self._sel is not None and self._listener is not None
        if on:
            # Reserve the port with a bound, non-listening socket, then drop the listener:
            # connects are refused and nobody else can take the port meanwhile.
            holder = _reuse_port_socket()
            try:
                holder.bind((_HOST, self.port))
            except OSError:
                holder.close()
                raise
            self._sel.unregister(self._listener)
            self._reset(self._listener)
            self._listener = holder
        else:
            self._listener.listen(64)
            self._listener.setblocking(False)
            self._sel.register(self._listener, selectors.EVENT_READ, _LISTEN)
        self._refusing = on

    def _close(self, link: _Link, *, reset: bool) -> None:
        assert self._sel is not None
        with self._counters.lock:  # stats() reads len(self._links) under this lock
            self._links.remove(link)
        for sock in (link.client, link.server):
            if link.masks[sock]:
                self._sel.unregister(sock)
            if reset:
                self._reset(sock)
            else:
                sock.close()

    @staticmethod
    def _reset(sock: socket.socket) -> None:
        """Close ``sock`` abortively: SO_LINGER 0 makes the kernel send RST, not FIN."""
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RST_LINGER)
        sock.close()

    def _shutdown(self) -> None:
        """In the proxy thread on exit: fail waiting calls, reset links, close every socket."""
        with self._call_lock:
            self._accepting_calls = False
        while True:
            try:
                _, future = self._commands.get_nowait()
            except queue.Empty:
                break
            if future.set_running_or_notify_cancel():
                future.set_exception(RuntimeError(f"{self!r} stopped"))
        for link in list(self._links):
            self._close(link, reset=True)
        if self._listener is not None:
            self._reset(self._listener)
            self._listener = None
        self._close_control()

    def _close_control(self) -> None:
        if self._sel is not None:
            self._sel.close()
            self._sel = None
        for sock in (self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        self._wake_r = self._wake_w = None
