"""`vocalis bench`: a closed-loop concurrency sweep and open-loop rates against a running server."""

from __future__ import annotations

import asyncio
import datetime
import importlib.util
import sys
from collections import Counter
from pathlib import Path

import click
import httpx

from vocalis.clients import load_report, prompts
from vocalis.clients.aio import AsyncClient
from vocalis.clients.cli import api_key_option, server_option, timeout_option
from vocalis.clients.load_test import (
    GrpcTarget,
    HttpTarget,
    LevelResult,
    Target,
    closed_loop,
    default_requests,
    open_loop,
    warm_up,
)

DEFAULT_CONCURRENCY = "1,2,4,8,16"


def _numbers(text: str | None, kind: type, option: str) -> list:
    if not text:
        return []
    try:
        values = [kind(piece) for piece in text.split(",") if piece.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {text!r}", param_hint=option) from None
    if any(v <= 0 for v in values):
        raise click.BadParameter("every value must be above 0", param_hint=option)
    return values


@click.command()
@click.option("--protocol", type=click.Choice(["grpc", "http"]), default="grpc", show_default=True,
              help="grpc: Synthesizer.Synthesize at --server; http: POST /v1/audio/speech at --http-url. Both stream PCM.")
@server_option
@click.option("--http-url", default="http://localhost:8091", show_default=True, envvar="VOCALIS_HTTP_URL", show_envvar=True,
              help="Base URL of the HTTP gateway (with --protocol http).")
@click.option("-c", "--concurrency", default=None, metavar="LIST",
              help=f"Closed-loop levels: requests in flight, comma-separated. [default: {DEFAULT_CONCURRENCY}, unless --rate is given]")
@click.option("-r", "--rate", default=None, metavar="LIST", help="Open-loop levels: arrival rates in requests per second, comma-separated.")
@click.option("-n", "--requests", type=click.IntRange(min=1), default=None,
              help="Requests per level. [default: 4 per concurrent worker, or 10 s of arrivals; at least 8]")
@click.option("--prompts", "categories", default="short,medium,long", show_default=True,
              help="Bundled prompt categories to use, comma-separated.")
@click.option("--prompt-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Use the texts of this UTF-8 file instead of the bundled prompts.")
@click.option("--split", type=click.Choice(["paragraphs", "lines"]), default="paragraphs", show_default=True,
              help="How --prompt-file is cut into prompts: blank-line-separated paragraphs, or lines.")
@click.option("--model", default="", help="Model name (default: the server's default).")
@click.option("--voice", default="", help="Voice name (default: the model's default).")
@click.option("--warmup", type=click.IntRange(min=0), default=2, show_default=True, help="Untimed requests before the first level.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the open-loop arrival times.")
@click.option("--underrun-threshold-ms", type=float, default=10.0, show_default=True,
              help="Playback gaps shorter than this are not counted as underruns.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the full report (every request) as JSON.")
@click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the summary table as markdown.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Draw the sweep as a PNG (needs matplotlib: pip install 'vocalis[bench]').")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars (they are also off when stderr is not a terminal).")
@api_key_option
@timeout_option(120.0)
def bench(
    protocol: str,
    server: str,
    http_url: str,
    concurrency: str | None,
    rate: str | None,
    requests: int | None,
    categories: str,
    prompt_file: Path | None,
    split: str,
    model: str,
    voice: str,
    warmup: int,
    seed: int,
    underrun_threshold_ms: float,
    json_path: Path | None,
    markdown_path: Path | None,
    plot_path: Path | None,
    quiet: bool,
    api_key: str | None,
    timeout: float,
) -> None:
    """Load-test a running server and report latency, throughput and playback underruns.

    Each level sends its requests, streamed 16-bit PCM, and reports time to first
    audio (TTFA), end-to-end latency (E2E), real-time factor (E2E / audio seconds),
    audio seconds delivered per wall second, and underruns of real-time playback.
    Audio seconds come from the sample rate the server announces. The summary table
    is printed on stdout in markdown.

    \b
    Examples:
      vocalis bench                                   # gRPC, concurrency 1,2,4,8,16
      vocalis bench --protocol http -c 1,4 --rate 1,2 --json bench.json --plot bench.png
      vocalis bench --prompt-file chapters.txt --prompts long -n 20
    """
    closed_levels = _numbers(concurrency, int, "--concurrency")
    open_levels = _numbers(rate, float, "--rate")
    if not closed_levels and not open_levels:
        closed_levels = _numbers(DEFAULT_CONCURRENCY, int, "--concurrency")
    if plot_path and importlib.util.find_spec("matplotlib") is None:
        raise click.UsageError("--plot needs matplotlib: pip install 'vocalis[bench]' (or matplotlib)")
    if prompt_file:
        prompt_set, source = prompts.from_file(prompt_file, split), str(prompt_file)
    else:
        try:
            prompt_set = prompts.bundled([c.strip() for c in categories.split(",") if c.strip()])
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--prompts") from None
        source = f"bundled: {categories}"
    threshold_s = underrun_threshold_ms / 1000
    show_progress = sys.stderr.isatty() and not quiet

    async def run() -> tuple[str, list[LevelResult]]:
        await _check_reachable(protocol, server, http_url, api_key)
        target: Target
        if protocol == "grpc":
            target = GrpcTarget(server, model=model, voice=voice, api_key=api_key, timeout=timeout, underrun_threshold_s=threshold_s)
        else:
            target = HttpTarget(http_url, model=model, voice=voice, api_key=api_key, timeout=timeout, underrun_threshold_s=threshold_s)
        try:
            await warm_up(target, prompt_set, warmup)
            plan = [("closed", c) for c in closed_levels] + [("open", r) for r in open_levels]
            return target.description, await _sweep(target, prompt_set, plan, requests, seed, show_progress)
        finally:
            await target.aclose()

    description, levels = asyncio.run(run())
    summaries = [level.summary() for level in levels]
    table = load_report.markdown_table(summaries)
    click.echo(table, nl=False)
    report = {
        "tool": "vocalis bench",
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "protocol": protocol,
        "target": description,
        "model": model,
        "voice": voice,
        "prompts": {"source": source, "count": len(prompt_set), "categories": dict(Counter(p.category for p in prompt_set))},
        "warmup": warmup,
        "seed": seed,
        "underrun_threshold_s": threshold_s,
        "levels": [level.to_dict() for level in levels],
    }
    if json_path:
        load_report.write_json(json_path, report)
    if markdown_path:
        markdown_path.write_text(table)
    if plot_path:
        load_report.plot(plot_path, summaries, title=f"vocalis bench ({protocol})")
    if show_progress:
        for path in (json_path, markdown_path, plot_path):
            if path:
                click.echo(f"wrote {path}", err=True)


async def _check_reachable(protocol: str, server: str, http_url: str, api_key: str | None) -> None:
    """Fail in a second, with the address, when the server is not there, rather than after a sweep of errors."""
    if protocol == "grpc":
        async with AsyncClient(server, timeout=5, api_key=api_key) as client:
            if not await client.serving():
                raise click.ClickException(f"no Vocalis server is serving at {server} (gRPC health check failed)")
        return
    try:
        async with httpx.AsyncClient(timeout=5) as http:
            response = await http.get(http_url.rstrip("/") + "/health")
    except httpx.HTTPError as error:
        raise click.ClickException(f"cannot reach the gateway at {http_url}: {error}") from None
    if response.status_code != 200:
        raise click.ClickException(f"the gateway at {http_url} is not healthy: HTTP {response.status_code} {response.text}")


async def _sweep(
    target: Target,
    prompt_set: list[prompts.Prompt],
    plan: list[tuple[str, float]],
    requests: int | None,
    seed: int,
    show_progress: bool,
) -> list[LevelResult]:
    progress = None
    if show_progress:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(
            TextColumn("{task.description:>12}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("errors {task.fields[errors]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        )
        progress.start()
    levels = []
    try:
        for mode, load in plan:
            count = requests or default_requests(mode, load)
            label = f"c={load:g}" if mode == "closed" else f"{load:g} req/s"
            on_done = None
            if progress is not None:
                task = progress.add_task(label, total=count, errors=0)
                errors = 0

                def on_done(result, task=task) -> None:
                    nonlocal errors
                    errors += not result.ok
                    progress.update(task, advance=1, errors=errors)

            if mode == "closed":
                levels.append(await closed_loop(target, prompt_set, int(load), count, on_done))
            else:
                levels.append(await open_loop(target, prompt_set, load, count, seed=seed, on_done=on_done))
    finally:
        if progress is not None:
            progress.stop()
    return levels
