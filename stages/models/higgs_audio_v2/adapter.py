"""Request fields to stage-0 input, with the peer's rules for higgs-audio v2 (vLLM-Omni's adapter).

- Plain text, or voice cloning with `ref_audio` and `ref_text` together (an uploaded voice brings both; a clip
  without its transcript, or a transcript without a clip, is refused).
- Sampling as the peer deploys it: temperature 1.0, top_p 0.95, top_k 50 (greedy collapses the codebooks), RAS
  window 7 with at most 2 repeats; `max_new_tokens` is a frame budget (the peer's cap: 1024 frames, ~41 s), counted
  as the reference counts it, with the opening all-BOS frame.
- Refused as the peer refuses them: `instructions`, `task_type` and a `language` other than auto (the model reads
  the language from the text). `speed` is the server's time-stretch; fields the model has no use for at all
  (`x_vector_only_mode`, `speaker_embedding`) are refused by the server's field policy.
"""

from __future__ import annotations

from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.max_new_tokens import MAX_INT32, checked_max_new_tokens
from vocalis.stages.api.model import Capabilities
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.models.higgs_audio_v2.runtime import HiggsInput
from vocalis.stages.runtime.request import RequestParams
from vocalis.stages.runtime.sampling import SamplingParams

VOICE = "default"
MAX_FRAMES = 1024
"""The peer's frame budget (max_tokens in its deploy file): about 41 s at 25 frames/s."""
EXTRA_PARAMS = ExtraParams("higgs-audio v2", [
    ExtraParam("temperature", float, "sampling temperature (default 1.0; 0: greedy)", minimum=0),
    ExtraParam("top_k", int, "keep the k most likely codes per codebook (default 50; 0 keeps all)", minimum=0),
    ExtraParam("top_p", float, "nucleus sampling (default 0.95)", minimum=0, maximum=1, exclusive_minimum=True),
    ExtraParam("ras_win_len", int, "repetition-aware sampling window in frames (default 7; 0: off)", minimum=0, maximum=64),
    ExtraParam("ras_win_max_num_repeat", int, "repeats of a code in the window before it is drawn again (default 2)",
               minimum=1, maximum=64),
])
DEFAULTS = {"temperature": 1.0, "top_k": 50, "top_p": 0.95, "ras_win_len": 7, "ras_win_max_num_repeat": 2}

REFERENCE = ReferencePolicy("higgs-audio v2", audio=False)
"""Cloning needs ref_audio and ref_text together (the clip is checked when encoded)."""


class HiggsAudioV2Adapter:
    def __init__(self, sample_rate: int, positions: int | None = None) -> None:
        self.positions = positions
        """The talker's KV cache length, which ends generation before a larger max_new_tokens does."""
        self.capabilities = Capabilities(
            sample_rate=sample_rate,
            voices=(VOICE,),
            default_voice=VOICE,
            accepted_fields=frozenset({
                "seed", "max_new_tokens", "extra_params", "ref_audio", "ref_text", "initial_codec_chunk_frames",
                "instructions", "task_type", "language",
            }),
            extra_params=tuple(EXTRA_PARAMS),
            streaming=True,
            voice_cloning=True,
        )

    def resolve_voice(self, voice: str) -> str:
        if voice.strip().lower() in ("", VOICE):
            return VOICE
        raise UnknownVoice(voice, [VOICE + " (higgs-audio v2 has no built-in speakers: upload a voice, or give ref_audio + ref_text)"])

    def stage_input(self, params: RequestParams) -> HiggsInput:
        fields = params.fields
        if str(fields.get("instructions") or "").strip():
            raise InvalidField("instructions", "FIELD_NOT_SUPPORTED",
                               "higgs-audio v2 does not take instructions (voice style control); give plain text")
        if fields.get("task_type") not in (None, "", "task_type_unspecified"):
            raise InvalidField("task_type", "FIELD_NOT_SUPPORTED", "higgs-audio v2 has one task (text to speech): leave task_type out")
        if str(fields.get("language") or "").strip():
            raise InvalidField("language", "FIELD_NOT_SUPPORTED",
                               "higgs-audio v2 reads the language from the text: leave language out (or 'auto')")
        reference = REFERENCE.check(params)
        settings = DEFAULTS | EXTRA_PARAMS.parse(fields.get("extra_params"))
        # The peer bounds it below only; 1 (the opening frame alone) still samples one frame, as the engine must.
        budget = checked_max_new_tokens(params, self.positions, upper=MAX_INT32) if "max_new_tokens" in fields else MAX_FRAMES
        sampling = SamplingParams(
            temperature=settings["temperature"], top_k=settings["top_k"], top_p=settings["top_p"],
            seed=fields.get("seed"), max_new_tokens=max(budget - 1, 1),
        )
        return HiggsInput(
            sampling=sampling,
            reference=reference,
            ras_window=settings["ras_win_len"],
            ras_max_repeat=settings["ras_win_max_num_repeat"],
            initial_codec_chunk_frames=fields.get("initial_codec_chunk_frames"),
        )
