"""A local HTTP server playing a model provider for the official SDK clients (127.0.0.1, an
ephemeral port, in a thread): no provider is called. Shared by the tests that hand our bodies to
the clients (``test_sdk_clients``) and read the clients' responses (``test_read_response_streams``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["Handler", "local_server"]


class Handler(BaseHTTPRequestHandler):
    """A handler that answers with :meth:`reply` and logs nothing."""

    def reply(self, status: int, content_type: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@contextmanager
def local_server(handler: type[BaseHTTPRequestHandler], monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Serve ``handler`` and yield its base URL; no proxy of the environment is used for it."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
