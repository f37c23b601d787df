"""A TCP proxy in front of a real server that holds each chunk a client sends for ``delay`` seconds before
passing it on (the server's answers pass at once): a dependency whose every round trip takes ``delay``
longer, as one across a network does. ``with DelayProxy(port, delay) as proxy: proxy.port``; on leaving,
every connection is cut and every thread of the proxy has ended."""

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
        self._threads: list[threading.Thread] = []
        self._mutex = threading.Lock()
        self._closed = False
        self._start(self._accept)

    def _start(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name="delay-proxy", daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # the listener was shut down
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()  # the server is down: so is the proxy, for this client
                continue
            with self._mutex:
                if self._closed:
                    client.close()
                    server.close()
                    return
                for s in (client, server):
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    self._sockets.append(s)
                self._start(self._pump, client, server, self.delay)
                self._start(self._pump, server, client, 0.0)

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
            for s in (source, sink):  # the other direction ends too
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            sockets, threads = list(self._sockets), list(self._threads)
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (closing alone would not)
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)  # wakes a pump in recv
        for thread in threads:
            thread.join(timeout=5)
        self._listener.close()
        for s in sockets:
            s.close()

    def __enter__(self) -> DelayProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
