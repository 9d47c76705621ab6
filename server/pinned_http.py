"""An httpx client that connects to one address chosen in advance, whatever the URL's host resolves to later.

Checking a host's addresses and then letting the HTTP library resolve it again to
connect leaves a gap (DNS rebinding: public on the first answer, 127.0.0.1 on the
second). Here the connection goes to the checked address; the URL keeps its host,
so the Host header, TLS SNI and certificate check all still name that host.
"""

from __future__ import annotations

import ssl
import typing

import httpcore
import httpx


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Opens every TCP connection to `address` (the port is the URL's)."""

    def __init__(self, address: str) -> None:
        self._address = address
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_tcp(self._address, port, timeout, local_address, socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options=None) -> httpcore.AsyncNetworkStream:  # noqa: ANN001
        raise httpcore.ConnectError("unix sockets are not reachable through a pinned client")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _PinnedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, address: str, verify: ssl.SSLContext | bool) -> None:
        super().__init__(verify=verify, trust_env=False)
        # httpx has no public hook for the network backend; its pool is rebuilt with the same TLS context.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=self._pool._ssl_context, max_connections=1, network_backend=_PinnedBackend(address)
        )


def pinned_client(address: str, *, timeout: float, verify: ssl.SSLContext | bool = True) -> httpx.AsyncClient:
    """A client whose every request connects to `address`; no proxies from the environment, no redirects."""
    return httpx.AsyncClient(
        transport=_PinnedTransport(address, verify), timeout=timeout, follow_redirects=False, trust_env=False
    )
