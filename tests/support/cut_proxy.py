"""A TCP proxy in front of a real server that can lose an answer: after ``lose_next_answer()``, it passes
the client's next request on to the server, then cuts that connection instead of passing the server's
answer back, as a network that fails mid-command does (the command ran; its caller cannot know).
``with CutProxy(port) as proxy: proxy.port``; ``proxy.cuts`` counts the answers lost."""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.support.delay_proxy import DelayProxy


class CutProxy(DelayProxy):
    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self._armed = threading.Event()  # before the proxy starts accepting
        self.cuts = 0
        super().__init__(upstream_port, 0.0, host)

    def __enter__(self) -> CutProxy:
        return self

    def lose_next_answer(self) -> None:
        self._armed.set()

    def _pump(self, source: socket.socket, sink: socket.socket, delay: float) -> None:  # type: ignore[override]
        from_server = source.getpeername()[:2] == self.upstream
        try:
            while chunk := source.recv(65536):
                if from_server and self._armed.is_set():
                    self._armed.clear()
                    self.cuts += 1
                    break  # the answer goes nowhere, and the connection is cut below
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
