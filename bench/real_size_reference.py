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
and greedy decode, stop tokens masked for all --frames steps. They run the speech LM ONLY (no vocoder: the goldens
have no oracle for it), so a request's audio is its tokens at --frame-rate and its first audio is its whole decode;
with --flow, they then run the published whole-utterance flow too (tests/goldens/cosyvoice3/plain_flow.py,
tests/goldens/glm_tts/plain_flow.py: the flow goldens' plain readings, over the prompt's frames and the new ones, as
the published non-streaming inference does), and the first audio is after that. This venv has no vocalis, so the prompt ids come in a JSON file (--prompt) that the Vocalis side wrote with
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

Fish Speech S2 Pro's runner is its package, fish-speech 0.1.0, in the venv of its goldens (the recipe in
tests/goldens/fish_speech/make_goldens.py; the runner imports that file for the tensor names and the tiny codec's
build), made at /tmp/realsize-fish-ref:

    python3 -m venv /tmp/realsize-fish-ref
    /tmp/realsize-fish-ref/bin/pip install torch==2.13.0 numpy einops loguru hydra-core omegaconf 'transformers<5' \
        tiktoken soundfile natsort rich click pyrootutils loralib safetensors librosa flatten_dict julius ffmpy \
        importlib_resources tensorboard randomname argbind
    /tmp/realsize-fish-ref/bin/pip install --no-deps fish-speech==0.1.0 descript-audio-codec descript-audiotools torchaudio
    mv /tmp/realsize-fish-ref/lib/python3.11/site-packages/torchaudio/lib/_torchaudio.so /tmp/realsize-fish-ref/
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]

GREEDY = {"do_sample": False, "subtalker_dosample": False}
LM_SECONDS: list[float] = []
"""Each request's speech-LM decode (CosyVoice3's and GLM-TTS's runners), its time alone where --flow adds the flow."""


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
        audio = model.generate(text=text, language="en", num_step=args.steps, position_temperature=0.0)[0]
        return None, len(audio) / rate

    return run


def cosyvoice3_runner(checkpoint: str, text: str, frames: int, args: argparse.Namespace):
    """tests/goldens/cosyvoice3/make_goldens.py's decode: [sos, text ids, task id, prompt speech] as embeddings into
    Qwen2ForCausalLM's backbone, `llm_decoder` over the last hidden state, the argmax over speech tokens only. With
    --flow, then the published whole-utterance flow over the voice's prompt and the new tokens (tests/goldens/cosyvoice3/
    plain_flow.py, the flow goldens' oracle: flow.pt as published, the steps and chunk the Vocalis side wrote), as the
    published non-streaming inference runs it; the vocoder is not run (it has no oracle)."""
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
    flow = cosyvoice3_flow(checkpoint, prompt) if args.flow else None

    def run() -> tuple[float | None, float]:
        start = time.perf_counter()
        embeds = torch.cat([speech[prompt["sos"]][None], model.model.embed_tokens(torch.tensor(prompt["text_ids"])),
                            speech[prompt["task_id"]][None], speech[torch.tensor(prompt["prompt_speech"], dtype=torch.long)]])[None]
        past, step_input, tokens = None, embeds, []
        for _ in range(frames):
            out = model.model(inputs_embeds=step_input, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = torch.nn.functional.linear(out.last_hidden_state[0, -1], decoder, bias)
            token = int(logits[:speech_tokens].argmax())  # the stop tokens masked for every step: exactly `frames` tokens
            tokens.append(token)
            step_input = speech[token][None, None]
        LM_SECONDS.append(time.perf_counter() - start)
        then_flow(flow, tokens, prompt)
        return None, frames / args.frame_rate

    return run


def cosyvoice3_flow(checkpoint: str, prompt: dict):
    """The voice's whole-utterance flow as tests/goldens/cosyvoice3/plain_flow.py reads it: tokens [T] -> mel."""
    sys.path.insert(0, str(ROOT / "tests" / "goldens" / "cosyvoice3"))
    from plain_flow import flow_state, reference_mel

    state = flow_state(torch.load(f"{checkpoint}/flow.pt", map_location="cpu", weights_only=True))
    settings, voice, noise = prompt["flow"], voice_tensors(prompt), published_noise()
    return lambda tokens: reference_mel(state, settings["chunk"], settings["ratio"], tokens, *voice, settings["steps"], noise,
                                        settings["cfg_rate"])


def glm_tts_flow(checkpoint: str, prompt: dict):
    """The voice's whole-utterance flow as tests/goldens/glm_tts/plain_flow.py reads it: tokens [T] -> mel."""
    sys.path.insert(0, str(ROOT / "tests" / "goldens" / "glm_tts"))
    from plain_flow import reference_mel

    state = {k: v.float() for k, v in torch.load(f"{checkpoint}/flow/flow.pt", map_location="cpu", weights_only=True).items()}
    settings, voice, noise = prompt["flow"], voice_tensors(prompt), published_noise()
    return lambda tokens: reference_mel(state, settings["ratio"], tokens, *voice, settings["steps"], noise, settings["cfg_rate"],
                                        settings["speech_token_cfg"])


def voice_tensors(prompt: dict) -> list[torch.Tensor]:
    """The voice the Vocalis side wrote: its clip's speech tokens [P], mel [P * ratio, 80] and speaker embedding."""
    return [torch.tensor(prompt["prompt_speech"], dtype=torch.long), torch.tensor(prompt["prompt_mel"]), torch.tensor(prompt["embedding"])]


def published_noise() -> torch.Tensor:
    """The flow's fixed start noise as the published decoders draw it: seed 0, [1, 80, 50 * 300]."""
    return torch.randn([1, 80, 50 * 300], generator=torch.Generator().manual_seed(0))


def then_flow(flow, tokens: list[int], prompt: dict) -> None:
    """--flow's whole-utterance flow over a request's new tokens (its mel checked, then dropped: no vocoder runs)."""
    if flow is not None:
        mel = flow(torch.tensor(tokens))
        assert mel.shape[2] == len(tokens) * prompt["flow"]["ratio"] and bool(mel.isfinite().all())


def glm_tts_runner(checkpoint: str, text: str, frames: int, args: argparse.Namespace):
    """tests/goldens/glm_tts/make_goldens.py's decode: `LlamaForCausalLM.from_pretrained(llm/)`, as the published code
    loads it, on [prompt text, text, <|begin_of_audio|>, prompt speech as <|audio_k|>], the argmax over <|audio_k|> only.
    With --flow, then the published whole-utterance flow (tests/goldens/glm_tts/plain_flow.py: every frame attends to
    every other) over the voice's prompt and the new tokens; the vocoder is not run (it has no oracle)."""
    from transformers import LlamaForCausalLM

    prompt = json.loads(open(args.prompt).read())
    model = LlamaForCausalLM.from_pretrained(f"{checkpoint}/llm", dtype=torch.float32).eval()
    low = prompt["audio_start"]
    high = low + prompt["speech_tokens"]
    flow = glm_tts_flow(checkpoint, prompt) if args.flow else None

    def run() -> tuple[float | None, float]:
        start = time.perf_counter()
        past, step_ids, tokens = None, torch.tensor([prompt["ids"]]), []
        for _ in range(frames):
            out = model(input_ids=step_ids, past_key_values=past, use_cache=True, logits_to_keep=1)
            past = out.past_key_values
            token = low + int(out.logits[0, -1, low:high].argmax())  # stops (and text) masked for every step
            tokens.append(token - low)
            step_ids = torch.tensor([[token]])
        LM_SECONDS.append(time.perf_counter() - start)
        then_flow(flow, tokens, prompt)
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


class TensorsByName(dict):
    """A .safetensors file's tensors read one at a time as they are asked for (the file mapped for that tensor only),
    in `dtype` where floating."""

    def __init__(self, path: str, dtype: torch.dtype) -> None:
        super().__init__()
        self.path, self.dtype = path, dtype

    def names(self) -> list[str]:
        from safetensors import safe_open

        with safe_open(self.path, "pt") as weights:
            return list(weights.keys())

    def __missing__(self, name: str) -> torch.Tensor:
        from safetensors import safe_open

        with safe_open(self.path, "pt") as weights:
            tensor = weights.get_tensor(name)
        return tensor.to(self.dtype) if tensor.is_floating_point() else tensor


def weight_normed(folded: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A codec state dict with each weight-normed weight folded (`X.weight`, as bench/gpu.py writes the real-size
    codec.pth) in the reference's spellings: `X.parametrizations.weight.original0/1` or `X.weight_g/_v`, the
    magnitude the norm of the folded weight over all but its first dimension and the direction the folded weight
    itself, so that g * v / |v| is the folded weight again."""
    out = {}
    for name, like in reference.items():
        for g, v in ((".parametrizations.weight.original0", ".parametrizations.weight.original1"), (".weight_g", ".weight_v")):
            if name.endswith(g) or name.endswith(v):
                stem = name[: -len(g)] if name.endswith(g) else name[: -len(v)]
                weight = folded[stem + ".weight"]
                out[name] = weight.flatten(1).norm(dim=1).view(like.shape) if name.endswith(g) else weight
                break
        else:
            if name in folded:
                out[name] = folded[name]
    return out


def fish_s2_pro_runner(checkpoint: str, text: str, frames: int, args: argparse.Namespace):
    """fish-speech 0.1.0's own `generate()` (`decode_one_token_ar`: the slow AR, then the fast AR code by code, its
    KV caches) on the prompt ids the Vocalis side wrote, then its DAC decoding the codes (built and loaded as its
    `dac.inference.load_model` does, from the published `modded_dac_vq` config and codec.pth; a tiny checkpoint's
    codec_config.json built as the goldens build it).

    fish-speech 0.1.0 does not read S2 Pro's published layout, so the dual AR is tests/goldens/fish_speech/
    make_goldens.py's `reference_dual_ar` (`DualARTransformer` from the published config, S2 Pro's flags) in --dtype, and each
    published tensor is copied in under the reference's name, the file mapped for that tensor only (a mapping held
    for the whole load would keep the 9 GiB file resident beside the model). Its caches and causal mask are sized to
    the request, in whole 8s as `setup_caches` rounds them (its default, the config's 32,768 positions, is a 1 GiB
    mask). Sampling at temperature 0, which its sampler clips to 1e-5 (greedy), top-p 1, no repetition penalty; the
    stop's logit is 0 in the checkpoint (bench/gpu.py), so every request makes --frames frames."""
    from fish_speech.models.text2semantic.inference import generate

    sys.path.insert(0, str(ROOT / "tests" / "goldens" / "fish_speech"))
    from make_goldens import PUBLISHED_NAMES, build_reference_dac, reference_dual_ar

    prompt = json.loads(open(args.prompt).read())
    config = json.loads(open(f"{checkpoint}/config.json").read())
    published = json.loads((ROOT / "stages" / "models" / "fish_speech" / "s2_pro_config.json").read_text())
    t, f = (published[k] | config[k] for k in ("text_config", "audio_decoder_config"))
    ids = prompt["ids"]
    default = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, args.dtype))  # built in its dtype: 18 GiB in float32 does not fit
    try:
        model = reference_dual_ar(t, f, (config["semantic_start_token_id"], config["semantic_end_token_id"]),
                                  im_end=prompt["im_end"], max_seq_len=-(-(len(ids) + frames) // 8) * 8)
    finally:
        torch.set_default_dtype(default)
    renames = [(dst, src) for src, dst in PUBLISHED_NAMES]
    params, published_tensors = model.state_dict(), TensorsByName(f"{checkpoint}/model.safetensors", getattr(torch, args.dtype))
    with torch.no_grad():
        for name in published_tensors.names():
            params[next(src + name[len(dst):] for dst, src in renames if name.startswith(dst))].copy_(published_tensors[name])
    if Path(checkpoint, "codec_config.json").exists():  # a tiny codec: the goldens' reference build of its geometry
        codec = build_reference_dac(json.loads(Path(checkpoint, "codec_config.json").read_text()))
        codec.load_state_dict(torch.load(f"{checkpoint}/codec.pth", map_location="cpu", weights_only=True))
    else:  # the published geometry, as fish-speech's dac/inference.py `load_model` builds and loads it
        import fish_speech
        from hydra import compose, initialize_config_dir
        from hydra.utils import instantiate

        with initialize_config_dir(version_base="1.3", config_dir=str(Path(fish_speech.__path__[0]) / "configs")):
            codec = instantiate(compose(config_name="modded_dac_vq"))
        folded = torch.load(f"{checkpoint}/codec.pth", map_location="cpu", weights_only=True)
        missing, unexpected = codec.load_state_dict(weight_normed(folded, codec.state_dict()), strict=False)
        assert not unexpected and all(k.endswith(("causal_mask", "freqs_cis")) for k in missing), (missing[:4], unexpected[:4])
        codec.eval()
    rows = 1 + t["num_codebooks"]
    inputs = torch.zeros(rows, len(ids), dtype=torch.int)
    inputs[0] = torch.tensor(ids)

    def run() -> tuple[float | None, float]:
        seq = generate(model=model, prompt=inputs, max_new_tokens=frames, audio_masks=None, audio_parts=None,
                       temperature=0.0, top_p=1.0, repetition_penalty=1.0)
        codes = seq[1:, len(ids):]
        assert codes.shape[1] == frames, f"{codes.shape[1]} frames, not {frames}: the stop won"
        audio, _ = codec.decode(codes[None].long(), torch.tensor([frames]))
        return None, audio.shape[-1] / codec.sample_rate

    return run


def voxtral_runner(checkpoint: str, text: str, frames: int, args: argparse.Namespace):
    """tests/goldens/voxtral/make_goldens.py's code path made a generation loop: transformers' MistralModel as the
    decoder (over the prompt's embeddings, the preset voice's rows at its [AUDIO] positions; its KV cache), the
    semantic head's argmax with [EMPTY_AUDIO], [END_AUDIO] and the padding rows masked for every frame, the goldens'
    acoustic flow (three MistralDecoderLayers, Euler over the config's steps with the default guidance, from seeded
    noise), FSQ codes, and the next frame's input as the sum of its codes' embedding rows. The LM ONLY: the goldens
    have no oracle for the codec, so a request's audio is its frames at --frame-rate and its first audio is its whole
    decode. In --dtype; attention is transformers' sdpa (the goldens' eager: exactness there, speed here)."""
    sys.path.insert(0, str(ROOT / "tests" / "goldens" / "voxtral"))
    from make_goldens import flow_modules, flow_sample, fsq_codes, layer_state, mistral_config
    from transformers.models.mistral.modeling_mistral import MistralModel

    prompt = json.loads(open(args.prompt).read())
    params = json.loads(open(f"{checkpoint}/params.json").read())
    dtype = getattr(torch, args.dtype)
    weights = TensorsByName(f"{checkpoint}/consolidated.safetensors", dtype)
    config = mistral_config(params, params["n_layers"], params["vocab_size"])
    config._attn_implementation = "sdpa"
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # built in its dtype: 15 GiB in float32 does not fit beside the rest
    try:
        model = MistralModel(config).eval()
        flow = flow_modules(params, weights)
    finally:
        torch.set_default_dtype(default)
    with torch.no_grad():
        model.embed_tokens.weight.copy_(weights["mm_audio_embeddings.tok_embeddings.weight"])
        model.norm.weight.copy_(weights["norm.weight"])
        for i, layer in enumerate(model.layers):
            layer.load_state_dict(layer_state(weights, f"layers.{i}.", params["n_heads"], params["n_kv_heads"]), strict=True)
    audio_rows = weights["mm_audio_embeddings.audio_codebook_embeddings.embeddings.weight"]
    sizes = prompt["codebook_sizes"]
    offsets = torch.tensor([sum(sizes[:i]) for i in range(len(sizes))])
    voice = torch.load(f"{checkpoint}/voice_embedding/{prompt['voice']}.pt", weights_only=True).to(dtype)
    embeds = model.embed_tokens.weight[torch.tensor(prompt["ids"])].clone()
    embeds[prompt["voice_positions"]] = voice
    unused = torch.zeros(flow[2]["semantic_codebook_output"].shape[0], dtype=torch.bool)
    unused[[prompt["empty_audio"], prompt["end_audio"]]] = True
    unused[prompt["audio_specials"] + prompt["semantic_codes"]:] = True
    alpha = torch.tensor([prompt["cfg_alpha"]], dtype=dtype)
    generator = torch.Generator().manual_seed(1)

    def run() -> tuple[float | None, float]:
        past, step = None, embeds[None]
        for _ in range(frames):
            out = model(inputs_embeds=step, past_key_values=past, use_cache=True)
            past, hidden = out.past_key_values, out.last_hidden_state[:, -1]
            logits = (hidden @ flow[2]["semantic_codebook_output"].T).float().masked_fill(unused, float("-inf"))
            noise = torch.randn(1, len(sizes) - 1, generator=generator).to(dtype)
            values, _ = flow_sample(params, *flow, hidden, noise, alpha, prompt["decoding_steps"])
            codes = torch.cat([logits.argmax(dim=-1, keepdim=True), fsq_codes(values, prompt["levels"])], dim=1)
            step = audio_rows[codes[0] + offsets].sum(dim=0)[None, None]
        return None, frames / args.frame_rate

    return run


RUNNERS = {"qwen3": qwen3_runner, "qwen3-base": qwen3_base_runner, "voxcpm2": voxcpm2_runner, "omnivoice": omnivoice_runner,
           "cosyvoice3": cosyvoice3_runner, "glm-tts": glm_tts_runner, "higgs-audio-v2": higgs_audio_v2_runner,
           "fish-s2-pro": fish_s2_pro_runner, "voxtral": voxtral_runner}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=sorted(RUNNERS), required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--levels", default="1,4")
    parser.add_argument("--frames", type=int, default=24)
    parser.add_argument("--steps", "--omnivoice-steps", dest="steps", type=int, default=32,
                        help="OmniVoice's unmasking passes (num_step)")
    parser.add_argument("--ref-audio", help="a clone's reference clip (.npy, mono float32)")
    parser.add_argument("--ref-rate", type=int, default=24000)
    parser.add_argument("--ref-text", help="the transcript of --ref-audio")
    parser.add_argument("--prompt", help="the prompt ids of the runners without a tokeniser of their own (JSON, written by "
                        "the Vocalis side)")
    parser.add_argument("--flow", action="store_true", help="CosyVoice3, GLM-TTS: the LM, then the published whole-utterance "
                        "flow (the flow goldens' plain reading); the vocoder is never run")
    parser.add_argument("--frame-rate", type=float, default=25.0, help="an LM-only runner's speech tokens per second of audio")
    parser.add_argument("--dtype", default="float32", help="the talker's dtype (higgs-audio v2's and Fish S2 Pro's runners; the others load float32, "
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
            LM_SECONDS.clear()
            for _ in range(clients):
                began = time.perf_counter() - start
                first, audio = run()
                done = time.perf_counter() - start
                requests.append((done if first is None else began + first, done, audio))  # None: the whole waveform at once
            levels.append({"concurrency": clients, "wall_s": time.perf_counter() - start, "requests": requests}
                          | ({"lm_wall_s": sum(LM_SECONDS)} if LM_SECONDS else {}))  # its LM alone, one request after another
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"torch": torch.__version__, "load_s": load_s, "levels": levels, "peak_rss_bytes": peak}))


if __name__ == "__main__":
    main()
