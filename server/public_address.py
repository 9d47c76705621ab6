"""Whether an address a caller's URL leads to is on the public internet (SSRF defence).

`ipaddress.is_global` alone is not enough: several IPv6 forms carry an IPv4 address
inside them and reach it through a translator or tunnel (NAT64 64:ff9b::/96, 6to4
2002::/16, IPv4-compatible ::a.b.c.d, IPv4-mapped ::ffff:a.b.c.d, Teredo), and
`is_global` counts most of them as global even when they embed 127.0.0.1. Each is
judged by the IPv4 address it embeds; the local-use NAT64 prefix 64:ff9b:1::/48
(RFC 8215) only ever leads to an operator's own translator, so it is internal.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")


class UnresolvableHost(Exception):
    pass


def reached_addresses(address: IPAddress) -> list[IPAddress]:
    """The addresses a connection to `address` ends up at: the embedded IPv4 for the forms that embed one."""
    if isinstance(address, ipaddress.IPv4Address):
        return [address]
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)  # (server, client): either may be the real target
    if address in _NAT64:
        return [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)]
    if int(address) >> 32 == 0:  # IPv4-compatible ::a.b.c.d (and :: and ::1, which land on 0.0.0.x: internal)
        return [ipaddress.IPv4Address(int(address))]
    return [address]


def is_public(address: IPAddress) -> bool:
    """True only when every address `address` can reach is a global unicast address."""
    if isinstance(address, ipaddress.IPv6Address) and address in _LOCAL_NAT64:
        return False
    return all(a.is_global and not a.is_multicast for a in reached_addresses(address))


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to (one lookup: the caller connects to what it checked)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise UnresolvableHost(host) from error
    addresses: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise UnresolvableHost(host)
    return addresses
