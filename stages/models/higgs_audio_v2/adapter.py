"""Request fields to stage-0 input, with the peer's rules for higgs-audio v2 (vLLM-Omni's adapter).

- Plain text, or voice cloning with `ref_audio` and `ref_text` together (an uploaded voice brings both; a clip
  without its transcript, or a transcript without a clip, is refused).
- Sampling as the peer deploys it: temperature 1.0, top_p 0.95, top_k 50 (greedy collapses the codebooks), RAS
  window 7 with at most 2 repeats; `max_new_tokens` is a frame budget from 1 to 4096 (the API's range; default the
  peer's cap, 1024 frames, ~41 s), counted as the reference counts it, with the opening all-BOS frame.
- `instructions`, `task_type` and `language` are not taken (the model reads the language from the text): the server's
  field policy accepts them with a warning, as for every family that has no use for them. `speed` is the server's
  time-stretch; fields the model cannot honour at all (`x_vector_only_mode`, `speaker_embedding`) are refused there.
"""

from __future__ import annotations

from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.api.standard_adapter import SamplingTable, StandardAdapter, Voices, sampling_params
from vocalis.stages.models.higgs_audio_v2.runtime import HiggsInput
from vocalis.stages.runtime.request import RequestParams

MAX_FRAMES = 1024
"""The peer's frame budget (max_tokens in its deploy file): about 41 s at 25 frames/s."""
DEFAULTS = {"temperature": 1.0, "top_k": 50, "top_p": 0.95}
RAS_DEFAULTS = {"ras_win_len": 7, "ras_win_max_num_repeat": 2}
SAMPLING = SamplingTable.same_names("temperature", "top_k", "top_p")


class HiggsAudioV2Adapter(StandardAdapter[HiggsInput]):
    MODEL = "higgs-audio v2"
    EXTRA_PARAMS = ExtraParams(MODEL, [
        *sampling_params(DEFAULTS, {"top_k": "per codebook"}),
        ExtraParam("ras_win_len", int, "repetition-aware sampling window in frames (default 7; 0: off)", minimum=0, maximum=64),
        ExtraParam("ras_win_max_num_repeat", int, "repeats of a code in the window before it is drawn again (default 2)",
                   minimum=1, maximum=64),
    ])
    REFERENCE = ReferencePolicy(MODEL, audio=False)
    """Cloning needs ref_audio and ref_text together (the clip is checked when encoded)."""

    def __init__(self, sample_rate: int) -> None:
        super().__init__(sample_rate=sample_rate, voices=Voices.single(),
                         fields={"seed", "max_new_tokens", "initial_codec_chunk_frames"})

    def stage_input(self, params: RequestParams) -> HiggsInput:
        request = self.prologue(params)
        ras = RAS_DEFAULTS | request.extra
        # 1 (the opening frame alone) still samples one frame, as the engine must.
        budget = request.max_new_tokens or MAX_FRAMES
        return HiggsInput(
            sampling=SAMPLING.params(request.extra, DEFAULTS, seed=request.seed, max_new_tokens=max(budget - 1, 1)),
            reference=request.reference,
            ras_window=ras["ras_win_len"],
            ras_max_repeat=ras["ras_win_max_num_repeat"],
            initial_codec_chunk_frames=request.initial_codec_chunk_frames,
        )
