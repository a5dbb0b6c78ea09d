"""A TCP proxy in front of the test PostgreSQL server, to stage an outage without touching it.

``down()`` closes the listening socket and every forwarded connection, as a server that stops
does (new connections are refused, open ones are cut); ``up()`` listens again on the same port,
as the server coming back. The shared server itself is never stopped or reconfigured.

``round_trips`` counts the times a client spoke after its server had (or first): each is a wait
of the client for the server, what a request-response protocol pays once per round trip.
Counted, not timed: what ``test_append_round_trips.py`` asserts with."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

__all__ = ["TcpProxy"]


class TcpProxy:
    """Forward ``<host>:<port>`` to ``target``; ``port`` is chosen when first started."""

    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1") -> None:
        self.target = target
        self.host = host
        self.port = 0
        self.accepted = 0
        """Connections accepted (and forwarded) so far: what a client tried while the proxy was up."""
        self.round_trips = 0
        """Client turns so far, over every connection: data from a client after data from its
        server (or the connection's first)."""
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def up(self) -> TcpProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def down(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            conns, self._open = self._open, set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def __enter__(self) -> TcpProxy:
        return self.up()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.down()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by down()
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:  # went down meanwhile
                    client.close()
                    server.close()
                    return
                self.accepted += 1
                self._open.update((client, server))
            turn = ["server"]  # who spoke last on this connection
            for a, b, side in ((client, server, "client"), (server, client, "server")):
                threading.Thread(target=self._pump, args=(a, b, side, turn), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, side: str, turn: list[str]) -> None:
        try:
            while data := source.recv(65536):
                with self._lock:  # noted before it is forwarded: the reply cannot come first
                    if turn[0] != side:
                        turn[0] = side
                        self.round_trips += side == "client"
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
