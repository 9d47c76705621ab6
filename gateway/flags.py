"""The command-line flags of the gateway's knobs (`vocalis serve`, `vocalis gateway`), defaults from GatewayConfig.

Each flag names a field of GatewayConfig (a path into its nested limits); its default and type are that
field's, so the dataclass stays the one source of truth.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from vocalis.gateway.config import GatewayConfig


@dataclass(frozen=True)
class Flag:
    """One command-line flag for one GatewayConfig field."""

    name: str
    """The flag, e.g. --request-timeout."""
    path: tuple[str, ...]
    """Where its value goes in GatewayConfig: ("request_timeout_s",) or ("stream", "idle_timeout_s")."""
    help: str

    @property
    def param(self) -> str:
        """The click parameter name: the flag without dashes, in snake case."""
        return self.name.removeprefix("--").replace("-", "_")

    @property
    def default(self) -> Any:
        value: Any = GatewayConfig()
        for name in self.path:
            value = getattr(value, name)
        return value

    def option(self) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        kind = click.FloatRange(min=0, min_open=True) if isinstance(self.default, float) else click.IntRange(min=1)
        return click.option(self.name, self.param, type=kind, default=self.default, show_default=True, help=self.help)


FLAGS = (
    Flag("--request-timeout", ("request_timeout_s",), "Seconds an HTTP speech request may take before a 504 (X-Request-Timeout overrides it)."),
    Flag("--max-body-bytes", ("max_body_bytes",), "Largest HTTP request body the gateway reads; larger: 413."),
    Flag("--max-connections", ("max_connections",), "Connections and requests the HTTP listener holds at once; beyond it, 503."),
    Flag("--max-upload-bytes", ("max_upload_bytes",), "Most of a voice upload's audio_sample the gateway reads; larger: 413."),
    Flag("--ws-config-timeout", ("stream", "first_config_timeout_s"), "Seconds a new WebSocket may take to send session.config."),
    Flag("--ws-idle-timeout", ("stream", "idle_timeout_s"), "Seconds a WebSocket may stay silent both ways before it is closed."),
    Flag("--batch-max-items", ("batch", "max_items"), "Most items one POST /v1/audio/speech/batch may hold."),
    Flag("--batch-max-concurrency", ("batch", "max_concurrency"), "Items of one batch synthesized at once."),
)


def config_from(values: dict[str, Any]) -> GatewayConfig:
    """The GatewayConfig that the flags' `values` (by click parameter name) describe; missing ones keep their default."""
    config = GatewayConfig()
    for flag in FLAGS:
        if flag.param in values:
            config = _replaced(config, flag.path, values[flag.param])
    return config


def _replaced(settings: Any, path: tuple[str, ...], value: Any) -> Any:
    head, *rest = path
    return dataclasses.replace(settings, **{head: _replaced(getattr(settings, head), tuple(rest), value) if rest else value})


def gateway_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Adds the gateway flags to a click command; it receives them as one `gateway_config: GatewayConfig`.

    Put it under the @click.option decorators, right above the function.
    """

    @functools.wraps(command)
    def with_config(**kwargs: Any) -> Any:
        values = {flag.param: kwargs.pop(flag.param) for flag in FLAGS}
        return command(gateway_config=config_from(values), **kwargs)

    for flag in reversed(FLAGS):
        with_config = flag.option()(with_config)
    return with_config
