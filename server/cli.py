"""The `vocalis` command: serve a model, run a gateway, or speak through a server.

This module is the composition root: the only place that imports the server, the
gateway and the client commands together, to start them in one process.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import click

from vocalis.clients.cli import say
from vocalis.gateway.app import create_app
from vocalis.server.config import ServerConfig
from vocalis.server.process import run_gateway, run_server


def _configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")


@click.group()
@click.version_option(package_name="vocalis")
def main() -> None:
    """Vocalis: streaming text-to-speech over gRPC, with an OpenAI-compatible HTTP gateway."""


@main.command()
@click.argument("model", required=False)
@click.option("--grpc-address", default="0.0.0.0:50051", show_default=True, help="gRPC listen address.")
@click.option("--host", default="0.0.0.0", show_default=True, help="HTTP gateway listen host.")
@click.option("--port", default=8091, show_default=True, type=int, help="HTTP gateway port (0: no gateway).")
@click.option("--max-input-chars", default=5000, show_default=True, type=int, help="Longest text a session may send.")
@click.option("--max-queued-requests", default=64, show_default=True, type=int, help="Utterances admitted per model before 429.")
@click.option("--deploy-config", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="YAML merged over the family's deploy defaults (per-stage max_num_seqs, chunk sizes, dtype, ...).")
@click.option("--stage-overrides", default=None, help='JSON merged last, by stage index or name: \'{"1": {"max_num_seqs": 4}}\'.')
@click.option("--family-module", multiple=True, help="Import a module that defines an extra model family (FAMILY).")
@click.option("--log-level", default="warning", show_default=True, type=click.Choice(["debug", "info", "warning", "error"]))
def serve(
    model: str | None,
    grpc_address: str,
    host: str,
    port: int,
    max_input_chars: int,
    max_queued_requests: int,
    deploy_config: Path | None,
    stage_overrides: str | None,
    family_module: tuple[str, ...],
    log_level: str,
) -> None:
    """Serve MODEL over gRPC and HTTP (default: the embedded Piper voice en_US-joe-medium)."""
    from vocalis.server.config import Limits

    _configure_logging(log_level)
    limits = Limits(max_input_chars=max_input_chars, max_buffered_chars=max_input_chars, max_queued_requests=max_queued_requests)
    config = ServerConfig(
        model=model,
        deploy_config=deploy_config,
        stage_overrides=stage_overrides,
        family_modules=family_module,
        grpc_address=grpc_address,
        http_host=host,
        http_port=port,
        limits=limits,
    )
    try:
        asyncio.run(run_server(config, create_app, log_level))
    except ValueError as error:  # a model or deploy config that cannot be loaded
        raise click.ClickException(str(error)) from None


@main.command()
@click.option("--upstream", default="localhost:50051", show_default=True, help="gRPC address of the Vocalis server.")
@click.option("--host", default="0.0.0.0", show_default=True, help="Listen host.")
@click.option("--port", default=8091, show_default=True, type=int, help="Listen port.")
@click.option("--log-level", default="warning", show_default=True, type=click.Choice(["debug", "info", "warning", "error"]))
def gateway(upstream: str, host: str, port: int, log_level: str) -> None:
    """Run the HTTP/WebSocket gateway alone, in front of a server at --upstream."""
    _configure_logging(log_level)
    asyncio.run(run_gateway(create_app, upstream, host, port, log_level))


main.add_command(say)
