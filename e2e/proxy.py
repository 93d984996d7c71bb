"""A loopback TCP proxy whose open connections a test can cut, like a network drop.

The listener stays up, so the browser's reconnect goes through; only the connections
open at the moment of the cut die — exactly what a flaky network does to a stream.
Given several servers it sends each new connection to the next one, as a load balancer
does: the browser sees one origin, whichever replica answers.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

__all__ = ["CuttableProxy", "proxy_to"]


class CuttableProxy:
    def __init__(self, *target_ports: int) -> None:
        self.target_ports = target_ports
        #: How many connections went to each target port.
        self.connections = dict.fromkeys(target_ports, 0)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            port = self.target_ports[sum(self.connections.values()) % len(self.target_ports)]
            self.connections[port] += 1
            upstream = socket.create_connection(("127.0.0.1", port))
            with self._lock:
                self._open |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        self._drop(source, sink)

    def _drop(self, *sockets: socket.socket) -> None:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
            with self._lock:
                self._open.discard(sock)

    def cut(self) -> None:
        """Kill every connection open right now."""
        with self._lock:
            sockets = list(self._open)
        self._drop(*sockets)

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        self.cut()


@contextlib.contextmanager
def proxy_to(*ports: int) -> Iterator[CuttableProxy]:
    proxy = CuttableProxy(*ports)
    try:
        yield proxy
    finally:
        proxy.close()
