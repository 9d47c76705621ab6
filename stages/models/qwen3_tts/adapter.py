"""Which request fields a Qwen3-TTS checkpoint honours, and how they become its stage input.

The checkpoint's kind decides the task: CustomVoice (a preset speaker, optionally steered by
`instructions`; the 0.6B ones take no instructions), VoiceDesign (the voice described by
`instructions`, required) or Base (a cloned voice: `ref_audio` + `ref_text` for in-context cloning,
or only its x-vector with `x_vector_only_mode`, or a given `speaker_embedding`). A field the kind does
not honour is not in its accepted fields, so the server refuses it by name.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

import numpy as np
import torch

from vocalis.stages.errors import InvalidField, UnknownVoice
from vocalis.stages.model import Capabilities
from vocalis.stages.models.qwen3_tts.prompt import Conditioning
from vocalis.stages.models.qwen3_tts.speaker import log_mel
from vocalis.stages.models.qwen3_tts.stages import Qwen3TTSInput
from vocalis.stages.models.qwen3_tts.weights import Qwen3TTSModules
from vocalis.stages.request import ReferenceAudio, RequestParams
from vocalis.stages.sampling import SamplingParams

TASK_TYPES = {1: "custom_voice", 2: "voice_design", 3: "base"}
"""Proto TaskType values."""
TASK_NAMES = {"custom_voice": "CustomVoice", "voice_design": "VoiceDesign", "base": "Base"}
MAX_INSTRUCTIONS = 500
MAX_NEW_TOKENS = 4096

EXTRA_PARAMS = {
    "temperature": "Codebook-0 sampling temperature; 0 is greedy (the reference's do_sample=False). Default from generation_config.json.",
    "top_k": "Codebook-0 top-k (0 keeps all).",
    "top_p": "Codebook-0 nucleus sampling, in (0, 1].",
    "repetition_penalty": "Penalty on codebook-0 codes already generated (1 is none). Default 1.05.",
    "subtalker_temperature": "Temperature of the code predictor (codebooks 1..15); 0 is greedy (subtalker_dosample=False).",
    "subtalker_top_k": "Top-k of the code predictor.",
    "subtalker_top_p": "Top-p of the code predictor.",
    "non_streaming_mode": "true: the whole text in the prompt; false: text fed in as speech is generated. "
                          "Default true for CustomVoice and VoiceDesign, false for Base (as the reference).",
}
_ARTIFACT_XVECTOR = "speaker_embedding"
_ARTIFACT_CODES = "ref_codes"


class Qwen3TTSAdapter:
    """Validates a request against one Qwen3-TTS checkpoint and builds its stage input."""

    def __init__(self, modules: Qwen3TTSModules) -> None:
        self.modules = modules
        config = modules.config
        self.kind = config.tts_model_type
        self.speakers = {name.lower(): name for name in config.speakers}
        self.takes_instructions = self.kind == "voice_design" or (self.kind == "custom_voice" and config.tts_model_size != "0b6")
        accepted = {"language", "task_type", "seed", "max_new_tokens", "initial_codec_chunk_frames", "extra_params"}
        if self.takes_instructions:
            accepted.add("instructions")
        if self.kind == "base":
            accepted |= {"ref_audio", "ref_text", "x_vector_only_mode", "speaker_embedding"}
        self.capabilities = Capabilities(
            sample_rate=config.speech_tokenizer.output_sample_rate,
            voices=tuple(config.speakers),
            default_voice=config.speakers[0] if config.speakers and self.kind == "custom_voice" else "",
            accepted_fields=frozenset(accepted),
            required_fields=frozenset({"instructions"}) if self.kind == "voice_design" else frozenset(),
            extra_params=dict(EXTRA_PARAMS),
            streaming=True,
            voice_cloning=self.kind == "base",
            languages=tuple(name.title() for name in config.languages),
        )
        self._references: OrderedDict[str, tuple[torch.Tensor | None, torch.Tensor | None]] = OrderedDict()

    # -- voices ---------------------------------------------------------------------------------

    def resolve_voice(self, voice: str) -> str:
        key = voice.strip().lower()
        if self.kind != "custom_voice":
            if key in ("", "default"):
                return ""
            raise UnknownVoice(voice, ["default"])
        if not self.speakers:
            raise InvalidField("voice", "NO_SPEAKERS", "this checkpoint does not support the CustomVoice task (no speakers configured)")
        if key in ("", "default"):
            return self.capabilities.default_voice
        if key not in self.speakers:
            raise UnknownVoice(voice, sorted(self.speakers.values()))
        return self.speakers[key]

    # -- the stage input ------------------------------------------------------------------------

    def stage_input(self, params: RequestParams) -> Qwen3TTSInput:
        fields = params.fields
        self._check_task(fields.get("task_type"))
        language = self._language(fields.get("language"))
        instructions = (fields.get("instructions") or "").strip() or None
        if instructions is not None and len(instructions) > MAX_INSTRUCTIONS:
            raise InvalidField("instructions", "INSTRUCTIONS_TOO_LONG", f"instructions too long (max {MAX_INSTRUCTIONS} characters)")
        if self.kind == "voice_design" and instructions is None:
            raise InvalidField("instructions", "FIELD_REQUIRED", "VoiceDesign task requires 'instructions' to describe the voice")
        if self.kind != "base" and params.reference is not None:
            raise InvalidField("ref_audio", "FIELD_NOT_SUPPORTED", f"voice cloning needs a Base checkpoint; this one is {TASK_NAMES[self.kind]}")
        extra = dict(fields.get("extra_params") or {})
        unknown = sorted(set(extra) - set(EXTRA_PARAMS))
        if unknown:
            raise InvalidField("extra_params", "FIELD_NOT_SUPPORTED",
                               f"extra_params {', '.join(unknown)} not supported by Qwen3-TTS; it accepts: {', '.join(EXTRA_PARAMS)}")
        non_streaming = _flag(extra, "non_streaming_mode", self.kind != "base")
        xvector, ref_codes, ref_text = (None, None, None)
        if self.kind == "base":
            xvector, ref_codes, ref_text = self._clone(params)
        speaker = params.voice.lower() if self.kind == "custom_voice" else None
        talker, subtalker, max_set = self._sampling(fields, extra)
        first_chunk = fields.get("initial_codec_chunk_frames")
        if first_chunk is not None and not 1 <= int(first_chunk) <= 100:
            raise InvalidField("initial_codec_chunk_frames", "OUT_OF_RANGE", "initial_codec_chunk_frames must be from 1 to 100")
        conditioning = Conditioning(language=language, speaker=speaker, instructions=instructions if self.takes_instructions else None,
                                    xvector=xvector, ref_text=ref_text, ref_codes=ref_codes, non_streaming=non_streaming)
        return Qwen3TTSInput(conditioning=conditioning, sampling=talker, subtalker=subtalker, max_new_tokens_set=max_set,
                             initial_codec_chunk_frames=int(first_chunk) if first_chunk is not None else None,
                             codec_context_frames=ref_codes)

    def _check_task(self, value: Any) -> None:
        if value is None:
            return
        requested = TASK_TYPES.get(int(value))
        if requested is None:
            raise InvalidField("task_type", "INVALID_VALUE", f"unknown task_type {value}")
        if requested != self.kind:
            have, want = TASK_NAMES[self.kind], TASK_NAMES[requested]
            raise InvalidField("task_type", "TASK_NOT_SUPPORTED",
                               f"Qwen3-TTS {have} checkpoint does not support task_type={want}. "
                               f"Use task_type={have} or load the matching {want} checkpoint.")

    def _language(self, value: str | None) -> str:
        if value is None or not value.strip():
            return "auto"
        key = value.strip().lower()
        if key not in self.modules.config.languages:
            raise InvalidField("language", "UNSUPPORTED_LANGUAGE",
                               f"Invalid language {value!r}. Supported: {', '.join(self.capabilities.languages)}")
        return key

    def _sampling(self, fields: dict[str, Any], extra: dict[str, Any]) -> tuple[SamplingParams, SamplingParams, bool]:
        g = self.modules.config.generation
        max_set = "max_new_tokens" in fields
        max_new = int(fields.get("max_new_tokens", min(g.max_new_tokens, MAX_NEW_TOKENS)))
        if not 1 <= max_new <= MAX_NEW_TOKENS:
            raise InvalidField("max_new_tokens", "OUT_OF_RANGE", f"max_new_tokens must be from 1 to {MAX_NEW_TOKENS}")
        seed = fields.get("seed")
        try:
            talker = SamplingParams(
                temperature=_number(extra, "temperature", g.temperature if g.do_sample else 0.0),
                top_k=int(_number(extra, "top_k", g.top_k)),
                top_p=_number(extra, "top_p", g.top_p),
                repetition_penalty=_number(extra, "repetition_penalty", g.repetition_penalty),
                seed=seed, max_new_tokens=max_new,
            )
            subtalker = SamplingParams(
                temperature=_number(extra, "subtalker_temperature", g.subtalker_temperature if g.subtalker_dosample else 0.0),
                top_k=int(_number(extra, "subtalker_top_k", g.subtalker_top_k)),
                top_p=_number(extra, "subtalker_top_p", g.subtalker_top_p),
                seed=seed,
            )
        except ValueError as error:
            raise InvalidField("extra_params", "INVALID_VALUE", f"extra_params: {error}") from error
        return talker, subtalker, max_set

    # -- cloning --------------------------------------------------------------------------------

    def _clone(self, params: RequestParams) -> tuple[torch.Tensor, torch.Tensor | None, str | None]:
        fields, reference = params.fields, params.reference
        xvector_only = bool(fields.get("x_vector_only_mode", False))
        given = fields.get("speaker_embedding")
        dim = self.modules.config.talker.hidden_size
        if given is not None and len(given) == 0:
            given = None
        if given is not None and len(given) != dim:
            raise InvalidField("speaker_embedding", "INVALID_VALUE",
                               f"speaker_embedding has {len(given)} dimensions; expected {dim} for the loaded Qwen3-TTS model")
        if reference is None and given is None:
            raise InvalidField("ref_audio", "REF_AUDIO_REQUIRED", "Base task requires 'ref_audio' or 'speaker_embedding' for voice cloning")
        ref_text = (reference.text or "").strip() if reference is not None else ""
        has_clip = reference is not None and (np.asarray(reference.samples).size > 0 or _ARTIFACT_CODES in (reference.artifacts or {}))
        icl = not xvector_only and has_clip
        if icl and not ref_text:
            raise InvalidField("ref_text", "REF_TEXT_REQUIRED",
                               "Base task requires non-empty 'ref_text' (the transcript of ref_audio) for in-context cloning; "
                               "or set x_vector_only_mode to clone from the speaker embedding alone")
        stored_xvector, codes = self._reference_artifacts(reference, need_codes=icl) if reference is not None else (None, None)
        xvector = torch.tensor(given, dtype=torch.float32) if given is not None else stored_xvector
        if xvector is None:
            raise InvalidField("ref_audio", "REF_AUDIO_REQUIRED", "the stored voice has neither audio nor a speaker embedding")
        if xvector.numel() != dim:
            raise InvalidField("voice", "INVALID_VALUE", f"the voice's speaker embedding has {xvector.numel()} dimensions; expected {dim}")
        return xvector.reshape(-1), codes if icl else None, ref_text if icl else None

    def _reference_artifacts(self, reference: ReferenceAudio, need_codes: bool) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The x-vector and reference codes of a clip: its precomputed artifacts, else computed (and kept, LRU)."""
        artifacts = reference.artifacts or {}
        xvector = artifacts.get(_ARTIFACT_XVECTOR)
        codes = artifacts.get(_ARTIFACT_CODES)
        samples = np.asarray(reference.samples, dtype=np.float32)
        if (xvector is None or (need_codes and codes is None)) and samples.size == 0:
            raise InvalidField("ref_audio", "REF_AUDIO_REQUIRED", "the voice has no audio to clone from")
        key = hashlib.sha1(samples.tobytes() + str(reference.sample_rate).encode()).hexdigest()
        cached = self._references.get(key)
        if cached is not None:
            self._references.move_to_end(key)
        if xvector is None:
            xvector = cached[0] if cached and cached[0] is not None else voice_artifacts(self.modules, samples, reference.sample_rate)[0]
        if need_codes and codes is None:
            if self.modules.encoder is None:
                raise InvalidField("ref_audio", "NO_ENCODER", "this checkpoint's speech tokenizer has no encoder for reference codes")
            codes = cached[1] if cached and cached[1] is not None else voice_artifacts(self.modules, samples, reference.sample_rate, xvector=False)[1]
        xvector = torch.as_tensor(np.asarray(xvector), dtype=torch.float32)
        codes = torch.as_tensor(np.asarray(codes), dtype=torch.long) if codes is not None else None
        self._references[key] = (xvector, codes)
        while len(self._references) > 64:
            self._references.popitem(last=False)
        return xvector, codes


def to_24k(samples: np.ndarray, rate: int, target: int) -> np.ndarray:
    if rate == target:
        return samples.astype(np.float32)
    import soxr

    return soxr.resample(samples.astype(np.float32), rate, target, quality="HQ").astype(np.float32)


@torch.inference_mode()
def voice_artifacts(modules: Qwen3TTSModules, samples: np.ndarray, rate: int, xvector: bool = True,
                    codes: bool = True) -> tuple[np.ndarray | None, np.ndarray | None]:
    """A clip's x-vector [H] (speaker encoder) and reference codes [T, G] (Mimi encoder), computed once."""
    vector = None
    if xvector and modules.speaker_encoder is not None:
        audio = torch.from_numpy(to_24k(samples, rate, modules.config.speaker_encoder.sample_rate))
        device = next(modules.speaker_encoder.parameters()).device
        vector = modules.speaker_encoder(log_mel(audio.to(device))[None])[0].float().cpu().numpy()
    ref_codes = None
    if codes and modules.encoder is not None:
        audio = torch.from_numpy(to_24k(samples, rate, modules.config.speech_tokenizer.input_sample_rate))
        device = next(modules.encoder.parameters()).device
        ref_codes = modules.encoder(audio.to(device)[None])[0].cpu().numpy()
    return vector, ref_codes


def _number(extra: dict[str, Any], key: str, default: float) -> float:
    if key not in extra:
        return float(default)
    value = extra[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidField(f"extra_params.{key}", "INVALID_VALUE", f"extra_params.{key} must be a number")
    return float(value)


def _flag(extra: dict[str, Any], key: str, default: bool) -> bool:
    if key not in extra:
        return default
    if not isinstance(extra[key], bool):
        raise InvalidField(f"extra_params.{key}", "INVALID_VALUE", f"extra_params.{key} must be true or false")
    return extra[key]
