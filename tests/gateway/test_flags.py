"""The gateway's CLI flags take their defaults from GatewayConfig and build one from what is given."""

from __future__ import annotations

import dataclasses

import click
import pytest
from click.testing import CliRunner

from vocalis.gateway.config import BatchLimits, GatewayConfig, StreamLimits
from vocalis.gateway.flags import FLAGS, config_from, gateway_options
from vocalis.server import cli


def _field_default(path: tuple[str, ...]) -> object:
    """The default of a GatewayConfig field, read from the dataclass declarations (not from an instance)."""
    settings: type = GatewayConfig
    value: object = None
    for name in path:
        declared = {f.name: f for f in dataclasses.fields(settings)}[name]
        value = declared.default_factory() if declared.default is dataclasses.MISSING else declared.default  # type: ignore[misc]
        settings = type(value)
    return value


@pytest.mark.parametrize("command", [cli.serve, cli.gateway], ids=["serve", "gateway"])
def test_each_command_has_every_flag_with_the_dataclass_default(command: click.Command):
    options = {option: param for param in command.params for option in param.opts}
    for flag in FLAGS:
        assert flag.name in options, f"{command.name} lacks {flag.name}"
        assert options[flag.name].default == _field_default(flag.path), flag.name


def test_every_flag_names_a_field_of_its_type():
    for flag in FLAGS:
        default = _field_default(flag.path)
        assert isinstance(default, int | float) and not isinstance(default, bool), flag.name


def _run(*args: str) -> GatewayConfig:
    seen: list[GatewayConfig] = []

    @click.command()
    @gateway_options
    def command(gateway_config: GatewayConfig) -> None:
        seen.append(gateway_config)

    result = CliRunner().invoke(command, list(args))
    assert result.exit_code == 0, result.output
    return seen[0]


def test_no_flags_is_the_default_config():
    assert _run() == GatewayConfig()


def test_flags_set_their_fields_nested_ones_too():
    config = _run("--request-timeout", "5", "--max-body-bytes", "1000", "--ws-idle-timeout", "2.5", "--batch-max-items", "3")
    assert config == GatewayConfig(
        request_timeout_s=5.0,
        max_body_bytes=1000,
        stream=StreamLimits(idle_timeout_s=2.5),
        batch=BatchLimits(max_items=3),
    )


def test_a_limit_must_be_positive():
    @click.command()
    @gateway_options
    def command(gateway_config: GatewayConfig) -> None:
        pass

    result = CliRunner().invoke(command, ["--batch-max-items", "0"])
    assert result.exit_code == 2 and "--batch-max-items" in result.output


def test_config_from_keeps_what_is_not_given():
    assert config_from({"batch_max_concurrency": 2}) == GatewayConfig(batch=BatchLimits(max_concurrency=2))


def test_the_gateway_command_builds_its_app_with_the_flags(monkeypatch):
    built = []

    async def fake_run_gateway(create_gateway, listener, upstream, host, port, log_level):
        built.append(create_gateway(upstream))
        assert listener == built[0].state.config

    monkeypatch.setattr("vocalis.server.process.run_gateway", fake_run_gateway)
    result = CliRunner().invoke(cli.main, ["gateway", "--upstream", "127.0.0.1:1", "--request-timeout", "7", "--batch-max-items", "4"])
    assert result.exit_code == 0, result.output
    assert built[0].state.config == GatewayConfig(request_timeout_s=7.0, batch=BatchLimits(max_items=4))
