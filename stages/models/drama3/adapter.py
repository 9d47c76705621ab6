"""Which request fields Drama 3 honours, and how a request becomes its stage-0 input.

No preset speakers: `voice` is "default" (the text-only prompt) or an uploaded voice; `ref_audio` clones a clip and
needs `ref_text`, its transcript; `more_references` (the `references` alias past its first element) add further
voices, each a clip and its transcript, so that a scene's speakers can each be cloned (transcripts may lead with
their speaker tag). Speaker tags `<|speaker:0|>` ...
`<|speaker:15|>`, `[direction]` cues and `<whisper>...</whisper>` ride in `input` and are checked when each
utterance's prompt is built; the last speaker tag and an open whisper carry into the sentences after them
(`text_carry`, tag_carry.py), as in the reference server's one prompt per request. Sampling defaults are the reference server's (temperature 1.0, top-p 0.9, top-k off for
the main token and 30 for the codes, 2048 frames at most unless `max_new_tokens`, 1 to 4096, says otherwise).
"""

from __future__ import annotations

import numpy as np

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.extra_params import ExtraParams
from vocalis.stages.api.standard_adapter import SamplingTable, StandardAdapter, Voices, sampling_params
from vocalis.stages.models.drama3.prompt import PromptTextError, check_text
from vocalis.stages.models.drama3.runtime import Drama3Input, ReferenceClip
from vocalis.stages.models.drama3.tag_carry import TagCarry
from vocalis.stages.runtime.request import RequestParams

DEFAULTS = {"temperature": 1.0, "top_k": 0, "top_p": 0.9, "max_new_tokens": 2048}
SAMPLING = SamplingTable.same_names("temperature", "top_k", "top_p")


class Drama3Adapter(StandardAdapter[Drama3Input]):
    MODEL = "Fish Audio Drama 3"
    EXTRA_PARAMS = ExtraParams(MODEL, sampling_params(DEFAULTS, {"temperature": "the main token and the codes",
                                                                 "top_k": "the main token; the codes keep at most 30"}))

    def __init__(self, sample_rate: int) -> None:
        # Cloning is this adapter's own (several clips, transcripts checked as prompt text), so no ReferencePolicy.
        super().__init__(sample_rate=sample_rate, voices=Voices.single(), voice_cloning=True,
                         fields={"seed", "max_new_tokens", "ref_audio", "ref_text", "more_references"})
        self.text_carry = TagCarry()

    def stage_input(self, params: RequestParams) -> Drama3Input:
        request = self.prologue(params)
        fields = params.fields
        sampling = SAMPLING.params(request.extra, DEFAULTS, seed=request.seed, max_new_tokens=request.max_new_tokens)
        reference = params.reference
        if reference is None:
            if params.more_references:
                raise InvalidField("more_references", "REF_AUDIO_REQUIRED", "more_references follow ref_audio; give it too")
            if (fields.get("ref_text") or "").strip():
                raise InvalidField("ref_text", "REF_AUDIO_REQUIRED", "ref_text is the transcript of ref_audio; give ref_audio too")
            return Drama3Input(sampling)
        field = "voice" if reference.name else "ref_text"
        text = (reference.text or "").strip()
        if not text:
            raise InvalidField(field, "REF_TEXT_REQUIRED", "Voice cloning requires 'ref_text' (transcript of the reference audio)")
        try:
            check_text(text, field)
        except PromptTextError as error:
            raise InvalidField(field, "INVALID_VALUE", str(error)) from None
        samples = np.asarray(reference.samples, dtype=np.float32)
        if samples.size == 0:
            raise InvalidField("voice" if reference.name else "ref_audio", "VOICE_NOT_SUPPORTED", "the voice has no audio to clone")
        more = []
        for index, clip in enumerate(params.more_references):
            where = f"more_references[{index}]"
            transcript = (clip.text or "").strip()
            if not transcript:
                raise InvalidField(where, "REF_TEXT_REQUIRED", f"{where} needs the transcript of its clip")
            try:
                check_text(transcript, where)
            except PromptTextError as error:
                raise InvalidField(where, "INVALID_VALUE", str(error)) from None
            more.append(ReferenceClip(np.asarray(clip.samples, dtype=np.float32), int(clip.sample_rate), transcript))
        return Drama3Input(sampling, samples, int(reference.sample_rate), text, tuple(more))
