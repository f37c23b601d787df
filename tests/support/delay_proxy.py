"""A TCP proxy in front of a real server that holds each chunk a client sends for ``delay`` seconds before
passing it on (the server's answers pass at once): a dependency whose every round trip takes ``delay``
longer, as one across a network does. ``with DelayProxy(port, delay) as proxy: proxy.port``."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from types import TracebackType


class DelayProxy:
    def __init__(self, upstream_port: int, delay: float, host: str = "127.0.0.1") -> None:
        self.upstream = (host, upstream_port)
        self.delay = delay
        self._listener = socket.create_server((host, 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name="delay-proxy", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(self.upstream)
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._sockets.append(s)
            threading.Thread(target=self._pump, args=(client, server, self.delay), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, 0.0), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, delay: float) -> None:
        try:
            while chunk := source.recv(65536):
                if delay:
                    time.sleep(delay)
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for s in self._sockets:
            s.close()

    def __enter__(self) -> DelayProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
