"""The pinned client connects to the address it was given, while Host, SNI and the certificate check keep the URL's host."""

from __future__ import annotations

import asyncio
import http.server
import ssl
import subprocess
import threading

import httpx
import pytest

from vocalis.server.pinned_http import pinned_client


class Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str | None, str | None]] = []
    server_names: list[str | None] = []

    def do_GET(self) -> None:  # noqa: N802
        type(self).seen.append((self.path, self.headers.get("host")))
        self.send_response(200)
        self.send_header("content-length", "5")
        self.end_headers()
        self.wfile.write(b"audio")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", "/CN=voices.example", "-addext", "subjectAltName=DNS:voices.example"],
        check=True, capture_output=True,
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: Recorder.server_names.append(name)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], ssl.create_default_context(cafile=str(cert))
    server.shutdown()


async def fetch(url: str, verify: ssl.SSLContext) -> httpx.Response:
    async with pinned_client("127.0.0.1", timeout=10, verify=verify) as client:
        return await client.get(url)


def test_connects_to_the_pinned_address_with_the_urls_host(tls_server):
    port, verify = tls_server
    # voices.example resolves nowhere: reaching the server at all shows no lookup was made.
    response = asyncio.run(fetch(f"https://voices.example:{port}/clip.wav", verify))
    assert response.status_code == 200 and response.content == b"audio"
    assert Recorder.seen[-1] == ("/clip.wav", f"voices.example:{port}")
    assert Recorder.server_names[-1] == "voices.example"


def test_certificate_is_checked_against_the_urls_host(tls_server):
    port, verify = tls_server
    with pytest.raises(httpx.ConnectError):
        asyncio.run(fetch(f"https://other.example:{port}/clip.wav", verify))  # the certificate names voices.example only
