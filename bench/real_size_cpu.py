"""Real-size random checkpoints on this CPU: Vocalis against the family's official reference package, side by side.

For each family it builds random weights at the published sizes in the real layout (bench/gpu.py's
builders: the committed tiny checkpoint's files with the published sizes laid over; stop heads silenced
so every request runs to --frames), then runs the same texts, greedy, on the same weights:
Qwen3-TTS 0.6B and 1.7B CustomVoice (a preset speaker) and 0.6B Base (an ICL clone of REF_TEXT spoken by a synthetic
3 s clip, the same samples on both sides), VoxCPM2, OmniVoice (auto voice; its length comes from the
text, not --frames: 145 frames at 25 Hz for TEXT; --steps unmasking passes, positions chosen
by confidence alone so that both sides are deterministic), CosyVoice3 and GLM-TTS (a clone of REF_TEXT spoken by the
same clip; greedy, stop tokens masked for all --frames steps on both sides), higgs-audio v2 (plain text, greedy, the
stream EOS silenced; both sides in bfloat16, as its 5.4 B-parameter talker is 20 GiB in float32: Vocalis's
through the deploy override of stage 0's dtype, the reference's through from_pretrained's), Fish Speech S2 Pro (plain
text, greedy; the dual AR in bfloat16 on both sides, 18 GiB in float32; the stop's tied embedding row is zero, so its
logit never leads and every request runs to --frames), and AuK (no reference exists, so Vocalis only: told its
length, --frames latent frames at 50 a second, and --steps flow steps; the thinker and the DiT in bfloat16), and
Gepard-1.0 (none installs either: Vocalis only; its backbone at the size its vendor's model guide gives, the rest of
bench/configs/gepard_real_sizes.json assumed, the NanoCodec tiny, its audio counted at the published 1024 samples a frame;
stop head silenced, --frames frames at 21.5 a second).
- Vocalis: the family loader and the staged pipeline as the server runs it, c callers at once;
- the reference package (bench/real_size_reference.py in its own venv, --reference-python): no server
  and no streaming, so c requests run one after another in one process, as a user would.

CosyVoice3 and GLM-TTS have no upstream package on PyPI, so their reference is the code path their golden tests use
(tests/goldens/cosyvoice3/make_goldens.py, tests/goldens/glm_tts/make_goldens.py): transformers' Qwen2ForCausalLM
and LlamaForCausalLM on the same weights, the published prompt layout, greedy. It is the speech LM ONLY (the goldens
have no oracle for flow matching or the vocoder), while the Vocalis side runs the whole pipeline (voice prompt, LM,
flow and HiFT, streamed): the comparison is conservative for Vocalis in throughput, and the reference's "TTFA" is its
whole LM decode. For a like-for-like figure the Vocalis side also times its LM stage (from a level's start to the
stage's last step, the flow and vocoder still sharing the cores), given as "LM throughput Vocalis/ref". With
--reference-flow their reference then runs the published whole-utterance flow too, as the flow goldens read it
(tests/goldens/cosyvoice3/plain_flow.py, tests/goldens/glm_tts/plain_flow.py), still no vocoder. The reference venv has no vocalis, so the Vocalis child writes the prompt token ids it decodes from
(text tokenised the family's way, the clip's speech tokens) to a file that the reference reads.
higgs-audio v2 has no package either; its reference is its goldens' oracle whole (tests/goldens/higgs_audio_v2/
make_goldens.py: transformers' HiggsAudioV2ForConditionalGeneration.generate, then HiggsAudioV2Processor.decode with
the codec), on the prompt ids and frame budget the Vocalis side writes the same way. Fish S2 Pro's reference is its
package, fish-speech 0.1.0 (the goldens' venv): its own `generate()` and DAC on the prompt ids the Vocalis side writes
(bench/real_size_reference.py says how the venv is made and the model built).
Their real-size checkpoints (bench/gpu.py's builders, shared with bench/memory_parts.py) keep the tiny text
tokenisers and frontends (GLM-TTS: 64 <|audio_k|> tokens), whose cost is not what is measured; --frames must stay
below twice the text's token count (the families' minimum length, over 150 for TEXT) for Vocalis's stop mask to
cover every step, as the reference's does.
Each side runs in its own child process, one model in memory at a time, and reports its peak RSS.

    python bench/real_size_cpu.py                                   # every family below, c = 1 and 4
    python bench/real_size_cpu.py --tiny --reference-python ''      # CI-sized: the tiny checkpoint, Vocalis only
    python bench/real_size_cpu.py --families omnivoice --steps 4 --reps 3   # 3 interleaved pairs
    python bench/real_size_cpu.py --families cosyvoice3,glm-tts --frames 24 --reps 3   # the LM-only references
    python bench/real_size_cpu.py --families cosyvoice3,glm-tts --frames 24 --reps 3 --reference-flow   # LM + published flow
    python bench/real_size_cpu.py --families higgs-audio-v2 --frames 16 --reps 3      # bfloat16 on both sides
    python bench/real_size_cpu.py --families fish-speech-s2-pro --frames 16 --reps 3  # bfloat16 on both sides
    python bench/real_size_cpu.py --families auk --reference-python '' --frames 50 --steps 4 --reps 3
    python bench/real_size_cpu.py --families gepard --reference-python '' --frames 48 --reps 3

With --reps N each family runs N pairs, the two sides one right after the other, which goes first alternating from
pair to pair; the ratios are taken within each pair and given as median [min-max] over the pairs, so that a load that
moves from minute to minute moves both sides of a pair alike.

Figures per side and level: frames/s and audio-s/s (total over wall time), time to first audio p50
and RTF p50 (end-to-end latency over audio duration, queueing included), peak RSS; then the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.report import spread, write_json  # noqa: E402
from bench.voice_clip import REF_RATE, REF_TEXT, bench_voice, reference_audio, reference_clip  # noqa: E402

GOLDENS = ROOT / "tests" / "goldens"
TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away into the quiet green hills."
QWEN3_GREEDY = {"temperature": 0.0, "subtalker_temperature": 0.0}
"""Vocalis's spelling of the reference's do_sample=False, subtalker_dosample=False."""


@dataclass(frozen=True)
class Family:
    key: str
    published: str
    """Name of the published checkpoint whose sizes are laid over the tiny one."""
    tiny: Path
    reference: str
    """Runner name in bench/real_size_reference.py."""
    frame_rate: float
    """Codec frames per second of audio."""
    reference_python: str
    """Python of the venv with the reference package (made as bench/real_size_reference.py says)."""
    clone: bool = False
    """Clones a reference clip with its transcript (in-context), as a Base checkpoint does."""
    length_from_text: bool = False
    """The model sets the length from the text (OmniVoice); --frames does not apply."""
    built: bool = False
    """The checkpoint is bench/gpu.py's (CASES: its tiny one, and build_real at the published sizes), not laid over a
    committed one here; `tiny` is then its folder under --work-dir."""
    prompt_ids: bool = False
    """The reference's venv has no vocalis: the Vocalis side writes the prompt ids it decodes from to a file that the
    reference reads."""
    lm_only_reference: bool = False
    """No reference package: the reference runs the speech LM only (no codec or vocoder; no flow matching where the
    goldens have no oracle for it: CosyVoice3, GLM-TTS)."""
    dtype: str = "float32"
    """Both sides' compute dtype of the speech LM (the codec stays float32); Vocalis's through its deploy override."""
    dtype_stages: tuple[str, ...] = ("0",)
    """The stages (deploy indices) that run in `dtype`: the generator's, and the stage before it where that one is
    as big (AuK's thinker)."""
    timed_stage: str | None = None
    """The stage bench/machine_limit.py times, by name; None: the first that is not a voice's PrepareStage."""
    told_length: bool = False
    """The request says its length in seconds (duration_seconds: --frames / frame_rate) and its passes (--steps as
    num_inference_steps), not a token budget."""
    published_samples_per_frame: int | None = None
    """Where the checkpoint's codec is a smaller stand-in (Gepard's tiny NanoCodec: the published one's module graph is
    not known here), the published codec's samples per frame: the Vocalis side counts each request's audio at it, so
    that frames/s, audio-s/s and RTF describe the published model's output."""


FAMILIES = {
    "qwen3-0.6b-customvoice": Family("qwen3-0.6b-customvoice", "Qwen3-TTS-12Hz-0.6B-CustomVoice", GOLDENS / "qwen3_tts" / "cv-0b6",
                                     "qwen3", 12.5, "/tmp/realsize-ref/bin/python"),
    "qwen3-1.7b-customvoice": Family("qwen3-1.7b-customvoice", "Qwen3-TTS-12Hz-1.7B-CustomVoice", GOLDENS / "qwen3_tts" / "cv-1b7",
                                     "qwen3", 12.5, "/tmp/realsize-ref/bin/python"),
    # frames are patches: 4 latent frames of 40 ms
    "voxcpm2": Family("voxcpm2", "VoxCPM2", GOLDENS / "voxcpm2" / "tiny", "voxcpm2", 6.25,
                      "/tmp/realsize2-ref/bin/python"),
    # the tiny Base checkpoint is the 1.7B layout; the 0.6B Base sizes (and tts_model_size) are laid over it
    "qwen3-0.6b-base": Family("qwen3-0.6b-base", "Qwen3-TTS-12Hz-0.6B-Base", GOLDENS / "qwen3_tts" / "base-1b7",
                              "qwen3-base", 12.5, "/tmp/realsize-ref/bin/python", clone=True),
    "omnivoice": Family("omnivoice", "OmniVoice", GOLDENS / "omnivoice" / "tiny", "omnivoice", 25.0,
                        "/tmp/realsize3-ov-ref/bin/python", length_from_text=True),
    # 25 Hz speech tokens; the reference is transformers' LM on the goldens' code path (no upstream package)
    "cosyvoice3": Family("cosyvoice3", "Fun-CosyVoice3-0.5B-2512", Path("tiny") / "cosyvoice3", "cosyvoice3", 25.0,
                         "/tmp/realsize4-tf-ref/bin/python", clone=True, built=True, prompt_ids=True, lm_only_reference=True),
    "glm-tts": Family("glm-tts", "GLM-TTS", Path("tiny") / "glm-tts", "glm-tts", 25.0,
                      "/tmp/realsize4-tf-ref/bin/python", clone=True, built=True, prompt_ids=True, lm_only_reference=True),
    # the goldens' oracle, talker and codec; bfloat16: the 5.4 B-parameter talker is 20 GiB in float32
    "higgs-audio-v2": Family("higgs-audio-v2", "higgs-audio-v2-generation-3B-base", Path("tiny") / "higgs-audio-v2",
                             "higgs-audio-v2", 25.0, "/tmp/realsize-higgs-ref/bin/python", built=True, prompt_ids=True,
                             dtype="bfloat16"),
    # no package: the goldens' decoder and flow (transformers' Mistral blocks) as a loop, LM only; 12.5 frames/s
    "voxtral": Family("voxtral", "Voxtral-4B-TTS-2603", Path("tiny") / "voxtral", "voxtral", 12.5,
                      "/tmp/realsize-higgs-ref/bin/python", built=True, prompt_ids=True, lm_only_reference=True,
                      dtype="bfloat16"),
    # fish-speech 0.1.0's generate() and DAC; bfloat16: the 4.6 B-parameter dual AR is 18 GiB in float32
    "fish-speech-s2-pro": Family("fish-speech-s2-pro", "s2-pro", Path("tiny") / "fish-speech-s2-pro", "fish-s2-pro",
                                 44100 / 2048, "/tmp/realsize-fish-ref/bin/python", built=True, prompt_ids=True,
                                 dtype="bfloat16"),
    # no reference at all (none upstream): Vocalis only, for its step against the machine's limit; the thinker (3.1 B)
    # and the DiT in bfloat16, as float32 would not fit beside the replay; 50 latent frames per second of audio
    "auk": Family("auk", "AuK", Path("tiny") / "auk", "", 50.0, "", built=True, dtype="bfloat16", dtype_stages=("0", "1"),
                  timed_stage="flow", told_length=True),
    # no reference (none installs: the vendor's runner is GitHub-only and needs NeMo): Vocalis only; the backbone at
    # its published size, the NanoCodec tiny (bench/configs/gepard_real_sizes.json); 21.5 frames per second
    "gepard": Family("gepard", "gepard-1.0", Path("tiny") / "gepard", "", 22050 / 1024, "", built=True,
                     published_samples_per_frame=1024),
}
FLOW_REFERENCES = ("cosyvoice3", "glm-tts")
"""The LM-only references that --reference-flow extends with the published flow (its goldens' plain reading)."""
LM_GREEDY = {"cosyvoice3": {"sampler": "standard", "temperature": 0.0, "repetition_penalty": 1.0},
             "glm-tts": {"sampler": "topk", "temperature": 0.0},
             "higgs-audio-v2": {"temperature": 0.0, "ras_win_len": 0},
             "fish-speech-s2-pro": {"temperature": 0.0}}
"""Greedy in these families' extra params: CosyVoice3's and GLM-TTS's alternative sampler at temperature 0 (RAS, their
default, samples); higgs-audio v2 at temperature 0 without RAS (transformers' generate applies none unless asked)."""


def _gpu_bench():
    """bench/gpu.py (imported when used: the reference packages' venvs, which run this file too, lack vocalis)."""
    from bench import gpu

    return gpu


# -- child processes ------------------------------------------------------------------------------


def build(key: str, out: Path, tiny: bool = False) -> None:
    """Random weights at the published sizes into `out` (reused when complete); with `tiny`, a built family's tiny
    checkpoint (bench/gpu.py's CASES builders, as bench/memory_parts.py uses them)."""
    import torch

    family = FAMILIES[key]
    if family.built:
        if not (out / ".complete").exists():
            shutil.rmtree(out, ignore_errors=True)
            if tiny:
                built = _gpu_bench().tiny_checkpoint(key, out.parent / "work")
                shutil.copytree(built, out)  # copied: a committed tiny checkpoint (Fish S2 Pro's) stays where it is
                (out / ".complete").write_text("")
            else:
                assert out.name == key, out  # bench/gpu.py builds into work/key
                _gpu_bench().build_real(key, out.parent, "cpu")
        return
    if (out / ".complete").exists():
        fit_config(out)  # a checkpoint another bench built (bench/memory_parts.py) may lack the fits
        return
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(family.tiny, out, ignore=shutil.ignore_patterns("*.safetensors"))
    gpu = _gpu_bench()
    torch.manual_seed(0)
    with torch.no_grad():
        if family.reference == "voxcpm2":
            gpu._build_voxcpm2(out)
        elif family.reference == "omnivoice":
            gpu._build_omnivoice(out)
        else:
            gpu._build_qwen3(family.published, out)
    fit_config(out)
    (out / ".complete").write_text("")


def fit_config(checkpoint: Path) -> None:
    """The config fits below, written into the checkpoint's config.json (a no-op where they are there already)."""
    config = json.loads((checkpoint / "config.json").read_text())
    fitted = json.loads(json.dumps(config))
    fit_layer_types(fitted)
    fit_cpu(fitted)
    if fitted != config:
        (checkpoint / "config.json").write_text(json.dumps(fitted, indent=2))


def fit_cpu(config: dict) -> None:
    """VoxCPM2's published config names the device and dtype the reference package loads in (cuda, bfloat16);
    on this CPU both sides run float32 (Vocalis's deploy default), so the reference is told the same."""
    if config.get("architecture") == "voxcpm2":
        config.update(device="cpu", dtype="float32")


def fit_layer_types(config: dict) -> None:
    """A tiny config's `layer_types` lists one entry per tiny layer; at the published depth the reference
    package indexes it per layer, so it is stretched (the published sub-configs use full attention throughout)."""
    for value in config.values():
        if isinstance(value, dict):
            fit_layer_types(value)
    types = config.get("layer_types")
    if types is not None and len(types) != config.get("num_hidden_layers", len(types)):
        assert set(types) == {"full_attention"}, types
        config["layer_types"] = ["full_attention"] * config["num_hidden_layers"]


def make_request(model, family: Family, frames: int, steps: int):
    """One request as the reference side makes it: greedy, the same text, voice and length."""
    from vocalis.stages.runtime.output import AudioOutput
    from vocalis.stages.runtime.request import RequestParams, SynthesisRequest

    fields: dict = {"seed": 1}
    reference = None
    if family.reference == "omnivoice":
        fields |= {"language": "en", "extra_params": {"num_step": steps, "position_temperature": 0.0}}
    elif family.told_length:
        fields |= {"duration_seconds": frames / family.frame_rate, "extra_params": {"num_inference_steps": steps}}
    else:
        fields["max_new_tokens"] = _gpu_bench().frame_budget(model.family, frames)
    if family.reference.startswith("qwen3"):
        fields["extra_params"] = dict(QWEN3_GREEDY)
    if family.key in LM_GREEDY:
        fields["extra_params"] = dict(LM_GREEDY[family.key])
    if family.clone:
        if family.reference.startswith("qwen3"):
            fields["language"] = "english"
        reference = reference_audio()
    params = RequestParams(model=model.name, voice=bench_voice(model, family.clone), fields=fields, reference=reference)
    return SynthesisRequest(text=TEXT, stage_input=model.adapter.stage_input(params), output=AudioOutput())


async def one(model, family: Family, frames: int, steps: int) -> tuple[float, float, float]:
    """(TTFA s, end-to-end s, audio s) of one request through the pipeline."""
    request = make_request(model, family, frames, steps)  # its output belongs to the running loop
    return await _gpu_bench().timed(model, request)


def stage_overrides(dtype: str, max_num_seqs: int, dtype_stages: tuple[str, ...] = ("0",)) -> dict:
    """The deploy overrides both benches load with: `dtype_stages` (by default the first) in `dtype`, room for every
    caller in the first two."""
    overrides = {"0": {"device": "cpu", "max_num_seqs": max_num_seqs}, "1": {"device": "cpu", "max_num_seqs": max_num_seqs}}
    for index in dtype_stages:
        overrides.setdefault(index, {"device": "cpu"})["dtype"] = dtype
    return overrides


def stage_of(model, kind: type):
    """The pipeline's one stage of a runtime kind (the speech LM is the AutoregressiveStage, the voice prompt's
    encoder the PrepareStage)."""
    found = [stage for stage in model.pipeline.stages if isinstance(stage, kind)]
    if len(found) != 1:
        raise ValueError(f"{model.family} has {len(found)} {kind.__name__}s, not one")
    return found[0]


async def lm_prompt(model, family: Family, frames: int) -> dict:
    """The speech LM's prompt as the Vocalis side decodes it (the text tokenised the family's way, a clone's speech
    tokens from its prepared voice), for a reference whose venv has no vocalis to tokenise with."""
    from vocalis.stages.runtime.autoregressive import AutoregressiveStage
    from vocalis.stages.runtime.prepare import PrepareStage

    request = make_request(model, family, 1, 1)  # its output belongs to the running loop
    lm = stage_of(model, AutoregressiveStage).model
    if family.key == "higgs-audio-v2":
        prompt = lm.prompt(request.text, request.stage_input)
        assert prompt.audio is None, "a plain-text prompt is one run of ids"
        # the frame budget as Vocalis's requests give it, which the reference's generate counts alike
        return {"ids": list(prompt.before), "max_new_tokens": _gpu_bench().frame_budget(model.family, frames)}
    if family.key == "voxtral":  # a preset voice: its rows go in at the [AUDIO] positions
        from vocalis.stages.models.voxtral.adapter import DEFAULT_CFG_ALPHA
        from vocalis.stages.models.voxtral.config import AUDIO_SPECIALS, EMPTY_AUDIO, END_AUDIO

        voice = request.stage_input.voice
        spoken = lm.tekken.speech_prompt(request.text, voice)
        c = lm.config
        return {"ids": spoken.ids, "voice_positions": spoken.voice_positions, "voice": voice,
                "codebook_sizes": c.codebook_sizes, "semantic_codes": c.semantic_codebook_size,
                "audio_specials": AUDIO_SPECIALS, "empty_audio": EMPTY_AUDIO, "end_audio": END_AUDIO,
                "levels": c.acoustic_levels, "decoding_steps": c.acoustic.decoding_steps, "cfg_alpha": DEFAULT_CFG_ALPHA}
    if family.key == "fish-speech-s2-pro":  # text only: the prompt's codes are all zero
        return {"ids": lm.prompt(request).ids.tolist(), "im_end": lm.tokenizer.im_end}
    voice = stage_of(model, PrepareStage).preparer.prepare(request)  # cached since the warm-up
    ref_text = request.stage_input.ref_text
    if family.key == "cosyvoice3":
        from vocalis.stages.models.cosyvoice3.tokenizer import prompt_text

        encode = lm.modules.tokenizer.encode
        return {"text_ids": encode(prompt_text(ref_text)) + encode(request.text),  # prompt_speech: flow_prompt's
                "sos": lm.lm.config.sos, "task_id": lm.lm.config.task_id, "speech_tokens": lm.speech_tokens} | flow_prompt(model, voice)
    return {"ids": lm.prompt_ids(ref_text, request.text, list(voice.speech_tokens)), "audio_start": lm.audio_start,
            "speech_tokens": lm.speech_tokens} | flow_prompt(model, voice)


def flow_prompt(model, voice) -> dict:
    """What --reference-flow's whole-utterance flow reads besides the LM's tokens: the voice's prompt mel and speaker
    embedding, and the flow's published settings as the family's loader read them."""
    from vocalis.stages.components.flow_matching import CausalMaskedDiffWithDiT
    from vocalis.stages.runtime.chunk_stage import ChunkStage

    decoder = stage_of(model, ChunkStage).decoder
    flow = decoder.flow
    if isinstance(flow, CausalMaskedDiffWithDiT):
        settings = {"chunk": flow.decoder.estimator.static_chunk_size, "cfg_rate": flow.decoder.inference_cfg_rate}
    else:  # GLM-TTS's
        settings = {"cfg_rate": flow.inference_cfg_rate, "speech_token_cfg": flow.speech_token_cfg}
    return {"prompt_speech": list(voice.speech_tokens), "prompt_mel": voice.mel.tolist(), "embedding": voice.embedding.tolist(),
            "flow": settings | {"ratio": flow.token_mel_ratio, "steps": decoder.n_timesteps}}


class LMSteps:
    """When the speech-LM stage last stepped (pipeline observer): the end of a level's LM work, to set beside the
    LM-only reference, like for like (the flow and vocoder still share the cores meanwhile)."""

    def __init__(self, model) -> None:
        from vocalis.stages.runtime.autoregressive import AutoregressiveStage

        self.name = stage_of(model, AutoregressiveStage).name
        self.last = 0.0

    def __call__(self, name: str, batch: int) -> None:
        if name == self.name:
            self.last = time.perf_counter()


def run_vocalis(key: str, checkpoint: Path, levels: list[int], frames: int, steps: int, dtype: str | None = None,
                prompt_out: Path | None = None, overrides: str = "") -> dict:
    from vocalis.server.heap_trim import keep_freed_heap
    from vocalis.stages.models.registry import load_model

    keep_freed_heap()  # the heap as `vocalis serve` keeps it
    family = FAMILIES[key]
    start = time.perf_counter()
    merged = stage_overrides(dtype or family.dtype, max(levels), family.dtype_stages)
    for stage, settings in json.loads(overrides or "{}").items():  # --vocalis-overrides, over the bench's own
        merged.setdefault(stage, {}).update(settings)
    model = load_model(str(checkpoint), stage_overrides=json.dumps(merged))
    load_s = time.perf_counter() - start
    out = []
    try:
        asyncio.run(one(model, family, frames, steps))  # warm-up (a clone's reference is encoded here)
        lm_steps = None
        if family.prompt_ids and prompt_out is not None:
            prompt_out.write_text(json.dumps(asyncio.run(lm_prompt(model, family, frames))))
        if family.lm_only_reference:
            lm_steps = LMSteps(model)
            model.pipeline.observe(lm_steps)
        scale = 1.0
        if family.published_samples_per_frame:
            from vocalis.stages.runtime.chunk_stage import ChunkStage

            scale = family.published_samples_per_frame / stage_of(model, ChunkStage).decoder.samples_per_frame

        async def level(clients: int) -> dict:
            start = time.perf_counter()
            requests = await asyncio.gather(*(one(model, family, frames, steps) for _ in range(clients)))
            out = {"concurrency": clients, "wall_s": time.perf_counter() - start,
                   "requests": [[ttfa, latency, audio * scale] for ttfa, latency, audio in requests]}
            if lm_steps is not None:
                out["lm_wall_s"] = lm_steps.last - start
            return out

        out = [asyncio.run(level(c)) for c in levels]
    finally:
        model.close()
    return {"load_s": load_s, "levels": out, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def _child(argv: list[str]) -> dict:
    result = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    if result.returncode:
        raise RuntimeError(f"{argv[:3]} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# -- the table ------------------------------------------------------------------------------------


def summarise(side: str, family: Family, raw: dict, rep: int = 0) -> list[dict]:
    rows = []
    for level in raw["levels"]:
        requests = level["requests"]
        audio = sum(r[2] for r in requests)
        rows.append({
            "family": family.key, "side": side, "concurrency": level["concurrency"], "rep": rep,
            "frames_per_s": audio * family.frame_rate / level["wall_s"], "audio_s_per_s": audio / level["wall_s"],
            "ttfa_p50_s": statistics.median(r[0] for r in requests),
            "rtf_p50": statistics.median(r[1] / r[2] for r in requests),
            "frames_per_request": statistics.median(r[2] * family.frame_rate for r in requests),
            "peak_rss_bytes": raw["peak_rss_bytes"], "load_s": raw["load_s"],
            # the speech LM's frames/s alone: the Vocalis LM stage's, or an LM-only reference's whole figure
            "lm_frames_per_s": audio * family.frame_rate / level.get("lm_wall_s", level["wall_s"]) if family.lm_only_reference else None,
        })
    return rows


def _line(r: dict) -> str:
    return (f"| {r['family']} | {r['side']} | {r['concurrency']} | {r['frames_per_s']:.2f} | {r['audio_s_per_s']:.3f} | "
            f"{1000 * r['ttfa_p50_s']:.0f} | {r['rtf_p50']:.2f} | {r['peak_rss_bytes'] / 2**30:.2f} |")


RATIOS = ("throughput_x", "ttfa_x", "rtf_x", "rss_x", "lm_throughput_x")
"""The last only for the LM-only references: Vocalis's LM stage (to its last step) over the reference's LM."""


def ratios(rows: list[dict]) -> list[dict]:
    """Vocalis over reference per family, level and pair (rep): throughput (higher is better) and TTFA, RTF, RSS
    (lower is better)."""
    out = []
    for v in (r for r in rows if r["side"] == "vocalis"):
        same = ("family", "concurrency", "rep")
        ref = next((r for r in rows if r["side"] == "reference" and all(r.get(k) == v.get(k) for k in same)), None)
        if ref is not None:
            out.append({"family": v["family"], "concurrency": v["concurrency"], "rep": v.get("rep", 0),
                        "throughput_x": v["frames_per_s"] / ref["frames_per_s"], "ttfa_x": v["ttfa_p50_s"] / ref["ttfa_p50_s"],
                        "rtf_x": v["rtf_p50"] / ref["rtf_p50"], "rss_x": v["peak_rss_bytes"] / ref["peak_rss_bytes"]})
            if v.get("lm_frames_per_s") and ref.get("lm_frames_per_s"):
                out[-1]["lm_throughput_x"] = v["lm_frames_per_s"] / ref["lm_frames_per_s"]
    return out


def over_pairs(compared: list[dict]) -> list[dict]:
    """Per family and level: each ratio's (min, median, max) over the pairs."""
    out = []
    for key in dict.fromkeys((r["family"], r["concurrency"]) for r in compared):
        pairs = [r for r in compared if (r["family"], r["concurrency"]) == key]
        out.append({"family": key[0], "concurrency": key[1], "pairs": len(pairs)}
                   | {name: _spread([r[name] for r in pairs]) for name in RATIOS if name in pairs[0]})
    return out


def _spread(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)

def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--levels", default="1,4")
    parser.add_argument("--frames", type=int, default=24, help="frames (max_new_tokens) per request")
    parser.add_argument("--steps", "--omnivoice-steps", dest="steps", type=int, default=32,
                        help="passes per request of the families that take a count: OmniVoice's unmasking passes (num_step), "
                             "AuK's flow steps (num_inference_steps); --omnivoice-steps is its older name")
    parser.add_argument("--vocalis-dtype", default=None, help="compute dtype of Vocalis's first stage (default: the family's, "
                        "which its reference runs in too: float32, bfloat16 for higgs-audio v2)")
    parser.add_argument("--vocalis-overrides", default="", help="more stage overrides for the Vocalis side (JSON, keyed "
                        "by stage index as the bench's own: '0' the first stage), e.g. '{\"0\": {\"packed_linears\": false}}'")
    parser.add_argument("--reference-flow", action="store_true", help="CosyVoice3's and GLM-TTS's references run the "
                        "published whole-utterance flow after their LM (the flow goldens' plain readings; no vocoder), not the LM only")
    parser.add_argument("--tiny", action="store_true", help="the committed tiny checkpoints instead of real-size random ones")
    parser.add_argument("--reference-python", default=None,
                        help="python of the venv with the reference package (default: the family's); empty to run Vocalis only")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "vocalis-real-size")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "real_size_cpu.json")
    parser.add_argument("--child", choices=("build", "vocalis"), help=argparse.SUPPRESS)
    parser.add_argument("--reps", type=int, default=1, help="interleaved pairs (Vocalis, reference) per family")
    parser.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--prompt-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    if args.child == "build":
        build(args.families, args.checkpoint, args.tiny)
        print(json.dumps({"built": str(args.checkpoint)}))
        return {}
    if args.child == "vocalis":
        print(json.dumps(run_vocalis(args.families, args.checkpoint, levels, args.frames, args.steps, args.vocalis_dtype,
                                     args.prompt_out, args.vocalis_overrides)))
        return {}

    keys = args.families.split(",")
    references = {}
    for key in keys:
        python = FAMILIES[key].reference_python if args.reference_python is None else args.reference_python
        references[key] = python if python and Path(python).exists() else None
    print(f"{'tiny' if args.tiny else 'real-size random'} checkpoints, {args.frames} frames per request "
          f"(OmniVoice: from the text, {args.steps} steps), greedy, "
          f"{os.cpu_count()} cores; reference: " + ", ".join(f"{k} {v or 'not run'}" for k, v in references.items()))
    if args.reference_flow:
        print(f"{', '.join(k for k in keys if k in FLOW_REFERENCES)}: the reference runs its LM, then the published whole-utterance "
              "flow (tests/goldens/*/plain_flow.py: the prompt's frames and the new ones, every request), no vocoder")
    lm_only = [k for k in keys if FAMILIES[k].lm_only_reference and not (args.reference_flow and k in FLOW_REFERENCES)]
    if lm_only:
        print(f"{', '.join(lm_only)}: no upstream package; the reference is the goldens' code path (transformers' blocks), "
              "the speech LM ONLY (no codec or vocoder; CosyVoice3's and GLM-TTS's no flow either), against Vocalis's whole "
              "pipeline: conservative for Vocalis in throughput, and the reference's TTFA is its whole LM decode")
    print("| family | side | concurrency | frames/s | audio-s/s | TTFA p50 ms | RTF p50 | peak RSS GiB | pair |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    me = [sys.executable, str(Path(__file__).resolve())]
    common = ["--levels", args.levels, "--frames", str(args.frames), "--steps", str(args.steps)]
    for key in keys:
        family = FAMILIES[key]
        reference = references[key]
        checkpoint = family.tiny
        if family.built and args.tiny:
            checkpoint = args.work_dir / family.tiny
            _child(me + ["--child", "build", "--tiny", "--families", key, "--checkpoint", str(checkpoint)])
        if not args.tiny:
            checkpoint = args.work_dir / key
            _child(me + ["--child", "build", "--families", key, "--checkpoint", str(checkpoint)])
        prompt = []
        if family.prompt_ids:  # written by the Vocalis side, which always runs first in the first pair
            prompt_file = args.work_dir / f"{key}{'-tiny' if args.tiny else ''}-prompt.json"
            prompt = ["--prompt-out", str(prompt_file)]
        dtype = ["--vocalis-dtype", args.vocalis_dtype] if args.vocalis_dtype else []
        dtype += ["--vocalis-overrides", args.vocalis_overrides] if args.vocalis_overrides else []
        sides = [("vocalis", me + ["--child", "vocalis", "--families", key, "--checkpoint", str(checkpoint)] + dtype + common + prompt)]
        if reference:
            clone = []
            if family.prompt_ids:
                clone = ["--prompt", str(prompt_file), "--frame-rate", str(family.frame_rate), "--dtype", family.dtype]
                clone += ["--flow"] if args.reference_flow and key in FLOW_REFERENCES else []
            elif family.clone:
                clip = args.work_dir / "reference_clip.npy"
                clip.parent.mkdir(parents=True, exist_ok=True)
                np.save(clip, reference_clip())
                clone = ["--ref-audio", str(clip), "--ref-rate", str(REF_RATE), "--ref-text", REF_TEXT]
            sides.append(("reference", [reference, str(ROOT / "bench" / "real_size_reference.py"), "--family", family.reference,
                                        "--checkpoint", str(checkpoint), "--text", TEXT] + common + clone))
        for rep in range(args.reps):
            for side, argv_side in sides if rep % 2 == 0 else sides[::-1]:  # one model in memory at a time
                for row in summarise(side, family, _child(argv_side), rep):
                    rows.append(row | {"load_average": os.getloadavg()[0]})
                    print(_line(row) + f" {rep} |", flush=True)
    compared = ratios(rows)
    summary = over_pairs(compared)
    if compared:
        print("\n| family | concurrency | pairs | throughput Vocalis/ref | TTFA Vocalis/ref | RTF Vocalis/ref | peak RSS Vocalis/ref |")
        print("|---|---|---|---|---|---|---|")
        for r in summary:
            print(f"| {r['family']} | {r['concurrency']} | {r['pairs']} | " + " | ".join(spread(list(r[name])) for name in RATIOS[:4]) + " |")
        lm = [r for r in summary if "lm_throughput_x" in r]
        if lm:
            print("\nLike for like against the LM-only references: Vocalis's LM stage (level start to its last step, the flow and "
                  "vocoder sharing the cores) over the reference's LM\n\n| family | concurrency | pairs | LM throughput Vocalis/ref |\n|---|---|---|---|")
            for r in lm:
                print(f"| {r['family']} | {r['concurrency']} | {r['pairs']} | {spread(list(r['lm_throughput_x']))} |")
    result = {"tiny": args.tiny, "frames": args.frames, "steps": args.steps,
              "dtypes": {k: args.vocalis_dtype or FAMILIES[k].dtype for k in keys}, "vocalis_overrides": args.vocalis_overrides,
              "reps": args.reps, "reference_flow": args.reference_flow, "text": TEXT, "rows": rows, "ratios": compared, "ratios_over_pairs": summary}
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
