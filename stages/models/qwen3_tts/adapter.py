"""Which request fields a Qwen3-TTS checkpoint honours, and how they become its stage input.

The checkpoint's kind decides the task: CustomVoice (a preset speaker, optionally steered by
`instructions`; the 0.6B ones take no instructions), VoiceDesign (the voice described by
`instructions`, required) or Base (a cloned voice: `ref_audio` + `ref_text` for in-context cloning,
or only its x-vector with `x_vector_only_mode`, or a given `speaker_embedding`). A field the kind does
not honour is not in its accepted fields, so the server's field policy answers it (warned or refused by name). A
VoiceDesign checkpoint's task is its instructions': another `task_type` is ignored with a warning
(`Capabilities.instructions_decide_task`); on CustomVoice and Base it is a task the checkpoint does not have (400).
Sampling defaults are the checkpoint's generation_config.json.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.max_new_tokens import PEER_MAX_NEW_TOKENS
from vocalis.stages.api.standard_adapter import Prologue, SamplingTable, StandardAdapter, Voices, sampling_params
from vocalis.stages.models.qwen3_tts.prompt import Conditioning
from vocalis.stages.models.qwen3_tts.runtime import Qwen3TTSInput
from vocalis.stages.models.qwen3_tts.voices import ARTIFACT_CODES, ARTIFACT_XVECTOR, CloneSpec
from vocalis.stages.models.qwen3_tts.weights import Qwen3TTSModules
from vocalis.stages.runtime.request import RequestParams
from vocalis.stages.runtime.sampling import SamplingParams

TASK_NAMES = {"custom_voice": "CustomVoice", "voice_design": "VoiceDesign", "base": "Base"}
MAX_INSTRUCTIONS = 500
TALKER = SamplingTable.same_names("temperature", "top_k", "top_p", "repetition_penalty")
SUBTALKER = SamplingTable({"subtalker_temperature": "temperature", "subtalker_top_k": "top_k", "subtalker_top_p": "top_p"})



class Qwen3TTSAdapter(StandardAdapter[Qwen3TTSInput]):
    """Validates a request against one Qwen3-TTS checkpoint and builds its stage input."""

    MODEL = "Qwen3-TTS"
    EXTRA_PARAMS = ExtraParams(MODEL, [
        *sampling_params(dict.fromkeys(TALKER.fields, "from generation_config.json"), dict.fromkeys(TALKER.fields, "codebook 0")),
        *sampling_params(dict.fromkeys(SUBTALKER.fields.values(), "from generation_config.json"),
                         dict.fromkeys(SUBTALKER.fields.values(), "the code predictor, codebooks 1..15"), prefix="subtalker_"),
        ExtraParam("non_streaming_mode", bool, "true: the whole text in the prompt; false: text fed in as speech is generated. "
                   "Default true for CustomVoice and VoiceDesign, false for Base (as the reference)."),
    ])
    MAX_INITIAL_CODEC_CHUNK_FRAMES = 100

    def __init__(self, modules: Qwen3TTSModules) -> None:
        self.modules = modules
        config = modules.config
        self.kind = config.tts_model_type
        self.takes_instructions = self.kind == "voice_design" or (self.kind == "custom_voice" and config.tts_model_size != "0b6")
        accepted = {"language", "task_type", "seed", "max_new_tokens", "initial_codec_chunk_frames"}
        if self.takes_instructions:
            accepted.add("instructions")
        if self.kind == "base":
            accepted |= {"ref_audio", "ref_text", "x_vector_only_mode", "speaker_embedding"}
        custom = self.kind == "custom_voice"
        super().__init__(
            sample_rate=config.speech_tokenizer.output_sample_rate,
            voices=Voices.preset(config.speakers, config.speakers[0] if config.speakers else "") if custom else Voices.none(),
            fields=accepted, voice_cloning=self.kind == "base",
            required_fields=frozenset({"instructions"}) if self.kind == "voice_design" else frozenset(),
            languages=tuple(name.title() for name in config.languages),
            task=self.kind, instructions_decide_task=self.kind == "voice_design",
        )

    def resolve_voice(self, voice: str) -> str:
        if self.kind == "custom_voice" and not self.voices.presets:
            raise InvalidField("voice", "NO_SPEAKERS", "this checkpoint does not support the CustomVoice task (no speakers configured)")
        return self.voices.resolve(voice)

    def stage_input(self, params: RequestParams) -> Qwen3TTSInput:
        request = self.prologue(params)
        fields = params.fields
        self._check_task(fields.get("task_type"))
        language = self._language(request.language)
        instructions = (fields.get("instructions") or "").strip() or None
        if instructions is not None and len(instructions) > MAX_INSTRUCTIONS:
            raise InvalidField("instructions", "INSTRUCTIONS_TOO_LONG", f"instructions too long (max {MAX_INSTRUCTIONS} characters)")
        if self.kind == "voice_design" and instructions is None:
            raise InvalidField("instructions", "FIELD_REQUIRED", "VoiceDesign task requires 'instructions' to describe the voice")
        if self.kind != "base" and params.reference is not None:
            raise InvalidField("ref_audio", "FIELD_NOT_SUPPORTED", f"voice cloning needs a Base checkpoint; this one is {TASK_NAMES[self.kind]}")
        non_streaming = request.extra.get("non_streaming_mode", self.kind != "base")
        clone, ref_text = self._clone(params) if self.kind == "base" else (None, None)
        speaker = params.voice.lower() if self.kind == "custom_voice" else None
        talker, subtalker = self._sampling(request)
        conditioning = Conditioning(language=language, speaker=speaker, instructions=instructions if self.takes_instructions else None,
                                    ref_text=ref_text, non_streaming=non_streaming)
        return Qwen3TTSInput(conditioning=conditioning, sampling=talker, subtalker=subtalker,
                             initial_codec_chunk_frames=request.initial_codec_chunk_frames, clone=clone)

    def _check_task(self, value: Any) -> None:
        if value is None:
            return
        requested = str(value)
        if requested not in TASK_NAMES:
            raise InvalidField("task_type", "INVALID_VALUE", f"unknown task_type {value!r}; this model knows: {', '.join(TASK_NAMES)}")
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
            raise self.unsupported_language(value, f"it speaks {', '.join(self.capabilities.languages)}")
        return key

    def _sampling(self, request: Prologue) -> tuple[SamplingParams, SamplingParams]:
        """The talker's and the code predictor's sampling: generation_config.json, overridden by extra_params."""
        g = self.modules.config.generation
        talker = TALKER.params(request.extra, {
            "temperature": g.temperature if g.do_sample else 0.0, "top_k": g.top_k, "top_p": g.top_p,
            "repetition_penalty": g.repetition_penalty,
        }, seed=request.seed, max_new_tokens=request.max_new_tokens or min(g.max_new_tokens, PEER_MAX_NEW_TOKENS))
        subtalker = SUBTALKER.params(request.extra, {
            "temperature": g.subtalker_temperature if g.subtalker_dosample else 0.0, "top_k": g.subtalker_top_k,
            "top_p": g.subtalker_top_p,
        }, seed=request.seed)
        return talker, subtalker

    # -- cloning ------------------------------------------------------------------------------

    def _clone(self, params: RequestParams) -> tuple[CloneSpec, str | None]:
        """What to clone and the ICL transcript; encoding the clip is left to a stage thread (voices.py)."""
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
        artifacts = reference.artifacts or {} if reference is not None else {}
        has_audio = reference is not None and np.asarray(reference.samples).size > 0
        icl = not xvector_only and (has_audio or ARTIFACT_CODES in artifacts)
        if icl and not ref_text:
            raise InvalidField("ref_text", "REF_TEXT_REQUIRED",
                               "Base task requires non-empty 'ref_text' (the transcript of ref_audio) for in-context cloning; "
                               "or set x_vector_only_mode to clone from the speaker embedding alone")
        if reference is not None:
            stored = artifacts.get(ARTIFACT_XVECTOR)
            if given is None and stored is None and not has_audio:
                raise InvalidField("ref_audio", "REF_AUDIO_REQUIRED", "the stored voice has neither audio nor a speaker embedding")
            if given is None and stored is not None and np.asarray(stored).size != dim:
                raise InvalidField("voice", "INVALID_VALUE", f"the voice's speaker embedding has {np.asarray(stored).size} dimensions; expected {dim}")
            if icl and ARTIFACT_CODES not in artifacts and self.modules.encoder is None:
                raise InvalidField("ref_audio", "NO_ENCODER", "this checkpoint's speech tokenizer has no encoder for reference codes")
        embedding = torch.tensor(given, dtype=torch.float32) if given is not None else None
        return CloneSpec(reference, embedding, icl), ref_text if icl else None
