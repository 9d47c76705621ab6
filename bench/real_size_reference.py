"""The reference side of bench/real_size_cpu.py: one family's official package, in its own venv.

Run by bench/real_size_cpu.py as a child process (never imported by Vocalis, never in CI):

    /tmp/realsize-ref/bin/python bench/real_size_reference.py --family qwen3 --checkpoint DIR --levels 1,4 --frames 24

The reference packages have no server, so c > 1 requests run one after another in this process, as
a user would run them; a queued request's time to first audio includes its wait. qwen-tts does not
stream (nor does omnivoice), so a request's first audio is its whole waveform; voxcpm does (`generate_streaming`, one
patch at a time), and its first chunk is timed. Prints one JSON line: per level the
per-request (TTFA s, end-to-end s, audio s) and the wall time, plus the process's peak RSS.

The venv, as it was made for BENCHMARKS.md (qwen-tts pins transformers 4.57.3; gradio is left out):

    python3 -m venv /tmp/realsize-ref
    /tmp/realsize-ref/bin/pip install torch==2.13.0 transformers==4.57.3 accelerate==1.12.0 librosa soundfile sox einops onnxruntime
    /tmp/realsize-ref/bin/pip install --no-deps torchaudio==2.11.1 qwen-tts==0.1.1

There is no torchaudio 2.13 wheel here, and PyPI's 2.11.1 is a CUDA build whose `lib/*.so` fail to load
against torch 2.13.0+cpu. qwen-tts only needs its pure-Python `compliance.kaldi`, so those .so files are
moved out of `torchaudio/lib/` (torchaudio then imports without its extension).

OmniVoice's venv (as tests/goldens/omnivoice/make_goldens.py makes it, torchaudio's CUDA .so files moved out):

    python3 -m venv /tmp/realsize3-ov-ref && echo torch==2.13.0 > /tmp/c.txt
    /tmp/realsize3-ov-ref/bin/pip install -c /tmp/c.txt omnivoice==0.2.1 transformers==5.24.0
    mv /tmp/realsize3-ov-ref/lib/python3.11/site-packages/torchaudio/lib/*.so /tmp/realsize3-ov-ref/

VoxCPM2's venv (voxcpm pulls its own transformers; its torchaudio dependency is left out, as
tests/goldens/voxcpm2/make_goldens.py does: VoxCPM2 never uses it, so a placeholder module stands in):

    python3 -m venv /tmp/realsize2-ref
    /tmp/realsize2-ref/bin/pip install torch==2.13.0 voxcpm==2.0.3
    mv /tmp/realsize2-ref/lib/python3.11/site-packages/torchaudio/lib/*.so /tmp/realsize2-ref/   # where pip took a CUDA torchaudio

CosyVoice3 and GLM-TTS have no upstream package on PyPI: their runners are the code path of their golden tests
(tests/goldens/cosyvoice3/make_goldens.py, tests/goldens/glm_tts/make_goldens.py), transformers' Qwen2ForCausalLM on
llm.pt's `llm.model.*` (config from CosyVoice-BlankEN/) and LlamaForCausalLM on llm/, with the published prompt layout
and greedy decode, stop tokens masked for all --frames steps. They run the speech LM ONLY (no flow, no vocoder: the
goldens have no oracle for them), so a request's audio is its tokens at --frame-rate and its first audio is its whole
decode. This venv has no vocalis, so the prompt ids come in a JSON file (--prompt) that the Vocalis side wrote with
the family's own tokenisers. Attention is transformers' default (sdpa), not the goldens' eager (exactness there,
speed here), and GLM-TTS's head runs on the last position only (`logits_to_keep=1`), as generate() does. Their venv
(the goldens' transformers):

    python3 -m venv /tmp/realsize4-tf-ref
    /tmp/realsize4-tf-ref/bin/pip install torch==2.13.0 transformers==5.24.0 safetensors numpy

higgs-audio v2's runner is its goldens' oracle too (tests/goldens/higgs_audio_v2/make_goldens.py), but whole: transformers'
HiggsAudioV2ForConditionalGeneration.generate and HiggsAudioV2Processor.decode (the codec included), on the prompt ids
and frame budget the Vocalis side wrote (--prompt), greedy, the talker in bfloat16 on both sides (--dtype: 20 GiB in
float32 does not fit this machine). transformers will not build the codec without torchaudio importable, though plain
text never calls it; PyPI's is the CUDA build, so its .so files are moved out, as above:

    python3 -m venv /tmp/realsize-higgs-ref
    /tmp/realsize-higgs-ref/bin/pip install torch==2.13.0 transformers==5.24.0 safetensors numpy soundfile==0.14.0
    /tmp/realsize-higgs-ref/bin/pip install --no-deps torchaudio==2.11.1
    mkdir /tmp/realsize-higgs-ref/torchaudio-so
    mv /tmp/realsize-higgs-ref/lib/python3.11/site-packages/torchaudio/lib/*.so /tmp/realsize-higgs-ref/torchaudio-so/
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import torch

GREEDY = {"do_sample": False, "subtalker_dosample": False}


def qwen3_runner(checkpoint: str, text: str, frames: int, args: argparse.Namespace):
    from qwen_tts import Qwen3TTSModel

    wrapper = Qwen3TTSModel.from_pretrained(checkpoint, dtype=torch.float32, local_files_only=True)
    config = json.loads(open(f"{checkpoint}/config.json").read())
    speaker = next(iter(config["talker_config"]["spk_id"]))

    def run() -> tuple[float | None, float]:
        # qwen-tts emits max_new_tokens - 1 frames (as tests/goldens/qwen3_tts/make_goldens.py allows for)
        wavs, rate = wrapper.generate_custom_voice(text=text, speaker=speaker, language="english", max_new_tokens=frames + 1, **GREEDY)
        return None, len(wavs[0]) / rate

    return run


def voxcpm2_runner(checkpoint: str, text: str, frames: int, args: argparse.Namespace):
    import importlib.machinery
    import sys
    import types

    try:
        import torchaudio  # noqa: F401
    except Exception:  # noqa: BLE001 - no torchaudio build for torch 2.13; only the v1 model module imports it
        placeholder = types.ModuleType("torchaudio")
        placeholder.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
        sys.modules["torchaudio"] = placeholder
    from voxcpm import VoxCPM

    engine = VoxCPM(checkpoint, zipenhancer_model_path=None, enable_denoiser=False, optimize=False, device="cpu")
    rate = engine.tts_model.sample_rate

    def run() -> tuple[float | None, float]:
        # Vocalis's defaults (cfg 2.0, 10 flow-matching steps); exactly `frames` patches, no retries or text normalisation
        start, first, samples = time.perf_counter(), None, 0
        for chunk in engine.generate_streaming(text=text, cfg_value=2.0, inference_timesteps=10, min_len=frames, max_len=frames,
                                               retry_badcase=False, normalize=False, denoise=False):
            first = first if first is not None else time.perf_counter() - start
            samples += len(chunk)
        return first, samples / rate

    return run


def qwen3_base_runner(checkpoint: str, text: str, frames: int, args: argparse.Namespace):
    """An in-context clone: the reference clip's codes and transcript in the prompt. The clone prompt (speaker
    embedding and codes of the clip) is made once and reused, as qwen-tts offers; Vocalis caches it by content."""
    import numpy as np
    from qwen_tts import Qwen3TTSModel

    wrapper = Qwen3TTSModel.from_pretrained(checkpoint, dtype=torch.float32, local_files_only=True)
    clip = np.load(args.ref_audio)
    prompt = wrapper.create_voice_clone_prompt(ref_audio=(clip, args.ref_rate), ref_text=args.ref_text, x_vector_only_mode=False)

    def run() -> tuple[float | None, float]:
        wavs, rate = wrapper.generate_voice_clone(text=text, language="english", voice_clone_prompt=prompt, non_streaming_mode=False,
                                                  max_new_tokens=frames + 1, **GREEDY)
        return None, len(wavs[0]) / rate

    return run


def omnivoice_runner(checkpoint: str, text: str, frames: int, args: argparse.Namespace):
    """Auto voice; the length comes from the text (frames does not apply); positions by confidence alone (deterministic)."""
    from omnivoice import OmniVoice

    model = OmniVoice.from_pretrained(checkpoint, dtype=torch.float32).eval()
    rate = model.sampling_rate

    def run() -> tuple[float | None, float]:
        torch.manual_seed(1)
        audio = model.generate(text=text, language="en", num_step=args.omnivoice_steps, position_temperature=0.0)[0]
        return None, len(audio) / rate

    return run


def cosyvoice3_runner(checkpoint: str, text: str, frames: int, args: argparse.Namespace):
    """tests/goldens/cosyvoice3/make_goldens.py's decode: [sos, text ids, task id, prompt speech] as embeddings into
    Qwen2ForCausalLM's backbone, `llm_decoder` over the last hidden state, the argmax over speech tokens only."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    prompt = json.loads(open(args.prompt).read())
    state = torch.load(f"{checkpoint}/llm.pt", map_location="cpu", weights_only=True)
    model = Qwen2ForCausalLM(Qwen2Config.from_pretrained(f"{checkpoint}/CosyVoice-BlankEN")).eval()
    prefix = "llm.model."
    missing, unexpected = model.load_state_dict({k[len(prefix):]: v.float() for k, v in state.items() if k.startswith(prefix)}, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    decoder = state["llm_decoder.weight"].float()
    bias = state["llm_decoder.bias"].float() if "llm_decoder.bias" in state else None
    speech = state["speech_embedding.weight"].float()
    del state
    speech_tokens = prompt["speech_tokens"]

    def run() -> tuple[float | None, float]:
        embeds = torch.cat([speech[prompt["sos"]][None], model.model.embed_tokens(torch.tensor(prompt["text_ids"])),
                            speech[prompt["task_id"]][None], speech[torch.tensor(prompt["prompt_speech"], dtype=torch.long)]])[None]
        past, step_input = None, embeds
        for _ in range(frames):
            out = model.model(inputs_embeds=step_input, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = torch.nn.functional.linear(out.last_hidden_state[0, -1], decoder, bias)
            token = int(logits[:speech_tokens].argmax())  # the stop tokens masked for every step: exactly `frames` tokens
            step_input = speech[token][None, None]
        return None, frames / args.frame_rate

    return run


def glm_tts_runner(checkpoint: str, text: str, frames: int, args: argparse.Namespace):
    """tests/goldens/glm_tts/make_goldens.py's decode: `LlamaForCausalLM.from_pretrained(llm/)`, as the published code
    loads it, on [prompt text, text, <|begin_of_audio|>, prompt speech as <|audio_k|>], the argmax over <|audio_k|> only."""
    from transformers import LlamaForCausalLM

    prompt = json.loads(open(args.prompt).read())
    model = LlamaForCausalLM.from_pretrained(f"{checkpoint}/llm", dtype=torch.float32).eval()
    low = prompt["audio_start"]
    high = low + prompt["speech_tokens"]

    def run() -> tuple[float | None, float]:
        past, step_ids = None, torch.tensor([prompt["ids"]])
        for _ in range(frames):
            out = model(input_ids=step_ids, past_key_values=past, use_cache=True, logits_to_keep=1)
            past = out.past_key_values
            token = low + int(out.logits[0, -1, low:high].argmax())  # stops (and text) masked for every step
            step_ids = torch.tensor([[token]])
        return None, frames / args.frame_rate

    return run


def higgs_audio_v2_runner(checkpoint: str, text: str, frames: int, args: argparse.Namespace):
    """tests/goldens/higgs_audio_v2/make_goldens.py's oracle, whole: `HiggsAudioV2ForConditionalGeneration.generate`
    (its delay-pattern processor; greedy, no RAS) on the prompt ids the Vocalis side wrote, with its frame budget, then
    `HiggsAudioV2Processor.decode` (the delay undone, the codec). The talker in --dtype, the codec in float32, as the
    Vocalis side runs them. The stream EOS never wins (the checkpoint's EOS rows are zero), so every request makes
    the same frames."""
    from transformers import (
        AutoTokenizer,
        DacFeatureExtractor,
        HiggsAudioV2ForConditionalGeneration,
        HiggsAudioV2Processor,
        HiggsAudioV2TokenizerModel,
    )

    prompt = json.loads(open(args.prompt).read())
    model = HiggsAudioV2ForConditionalGeneration.from_pretrained(checkpoint, dtype=getattr(torch, args.dtype)).eval()
    codec_dir = f"{checkpoint}/audio_tokenizer"
    codec = HiggsAudioV2TokenizerModel.from_pretrained(codec_dir, dtype=torch.float32).eval()
    features = DacFeatureExtractor.from_pretrained(codec_dir)
    processor = HiggsAudioV2Processor(features, AutoTokenizer.from_pretrained(checkpoint), codec,
                                      audio_delay_token="<|reserved_special_token_6|>")
    ids = torch.tensor([prompt["ids"]])

    def run() -> tuple[float | None, float]:
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=prompt["max_new_tokens"],
                             do_sample=False, return_dict_in_generate=True)
        return None, processor.decode(out.audio_sequences).numel() / features.sampling_rate

    return run


RUNNERS = {"qwen3": qwen3_runner, "qwen3-base": qwen3_base_runner, "voxcpm2": voxcpm2_runner, "omnivoice": omnivoice_runner,
           "cosyvoice3": cosyvoice3_runner, "glm-tts": glm_tts_runner, "higgs-audio-v2": higgs_audio_v2_runner}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=sorted(RUNNERS), required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--levels", default="1,4")
    parser.add_argument("--frames", type=int, default=24)
    parser.add_argument("--omnivoice-steps", type=int, default=32)
    parser.add_argument("--ref-audio", help="a clone's reference clip (.npy, mono float32)")
    parser.add_argument("--ref-rate", type=int, default=24000)
    parser.add_argument("--ref-text", help="the transcript of --ref-audio")
    parser.add_argument("--prompt", help="the prompt ids of the runners without a tokeniser of their own (JSON, written by "
                        "the Vocalis side)")
    parser.add_argument("--frame-rate", type=float, default=25.0, help="an LM-only runner's speech tokens per second of audio")
    parser.add_argument("--dtype", default="float32", help="the talker's dtype (higgs-audio v2's runner; the others load float32, "
                        "as their Vocalis sides run)")
    args = parser.parse_args()
    start = time.perf_counter()
    run = RUNNERS[args.family](args.checkpoint, args.text, args.frames, args)
    load_s = time.perf_counter() - start
    with torch.inference_mode():
        run()  # warm-up
        levels = []
        for clients in (int(x) for x in args.levels.split(",")):
            start = time.perf_counter()
            requests = []
            for _ in range(clients):
                began = time.perf_counter() - start
                first, audio = run()
                done = time.perf_counter() - start
                requests.append((done if first is None else began + first, done, audio))  # None: the whole waveform at once
            levels.append({"concurrency": clients, "wall_s": time.perf_counter() - start, "requests": requests})
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"torch": torch.__version__, "load_s": load_s, "levels": levels, "peak_rss_bytes": peak}))


if __name__ == "__main__":
    main()
