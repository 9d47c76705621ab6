"""Which addresses a ref_audio URL may lead to: IPv6 forms are judged by the IPv4 address they embed."""

from __future__ import annotations

import ipaddress

import pytest

from vocalis.server.public_address import is_public, reached_addresses

INTERNAL = [
    "127.0.0.1", "10.1.2.3", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1",
    "::1", "::", "fe80::1", "fc00::1",
    "::ffff:127.0.0.1", "::ffff:169.254.169.254",  # IPv4-mapped
    "::127.0.0.1", "::10.0.0.1",  # IPv4-compatible
    "64:ff9b::127.0.0.1", "64:ff9b::a9fe:a9fe",  # NAT64 well-known prefix
    "64:ff9b:1::5db8:d70e",  # local-use NAT64: the operator's own translator, whatever it embeds
    "2002:7f00:1::", "2002:a00:1::1",  # 6to4
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
]
PUBLIC = ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "64:ff9b::5db8:d70e", "2002:5db8:d70e::1", "::ffff:8.8.8.8"]


@pytest.mark.parametrize("address", INTERNAL)
def test_internal(address):
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_public(address):
    assert is_public(ipaddress.ip_address(address))


def test_embedded_ipv4_is_what_is_judged():
    assert reached_addresses(ipaddress.ip_address("64:ff9b::7f00:1")) == [ipaddress.ip_address("127.0.0.1")]
    assert reached_addresses(ipaddress.ip_address("2002:7f00:1::")) == [ipaddress.ip_address("127.0.0.1")]
    assert reached_addresses(ipaddress.ip_address("::7f00:1")) == [ipaddress.ip_address("127.0.0.1")]
