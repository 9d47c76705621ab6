"""A family module for tests: the tiny-tts family, plus a DNS resolver the test scripts.

Imported into the server process with `--family-module tests.e2e.scripted_dns`. For each
host named in $VOCALIS_TEST_DNS (JSON: host -> list of answers), the n-th lookup answers
the n-th address (the last one again after that), as a rebinding attacker's DNS server
would; every lookup of those hosts is appended to $VOCALIS_TEST_DNS_LOG. Other hosts
resolve as usual.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket

from vocalis.stages.models._template.family import FAMILY

__all__ = ["FAMILY"]

_SCRIPT: dict[str, list[str]] = json.loads(os.environ.get("VOCALIS_TEST_DNS", "{}"))
_LOG = os.environ.get("VOCALIS_TEST_DNS_LOG")
_lookups: dict[str, int] = {}
_real_getaddrinfo = socket.getaddrinfo


def _scripted_getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):  # noqa: A002, ANN001, ANN202
    name = host.decode() if isinstance(host, bytes) else host
    answers = _SCRIPT.get((name or "").lower())
    if answers is None:
        return _real_getaddrinfo(host, port, family, type, proto, flags)
    count = _lookups[name] = _lookups.get(name, 0) + 1
    address = ipaddress.ip_address(answers[min(count, len(answers)) - 1])
    if _LOG:
        with open(_LOG, "a") as log:
            log.write(f"{name} {address}\n")
    port_number = int(port or 0)
    if address.version == 6:
        return [(socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (str(address), port_number, 0, 0))]
    return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (str(address), port_number))]


socket.getaddrinfo = _scripted_getaddrinfo
