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

from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.max_new_tokens import checked_max_new_tokens
from vocalis.stages.api.model import Capabilities
from vocalis.stages.models.drama3.prompt import PromptTextError, check_text
from vocalis.stages.models.drama3.runtime import Drama3Input, ReferenceClip
from vocalis.stages.models.drama3.tag_carry import TagCarry
from vocalis.stages.runtime.request import RequestParams
from vocalis.stages.runtime.sampling import SamplingParams

VOICE = "default"
DEFAULTS = {"temperature": 1.0, "top_k": 0, "top_p": 0.9, "max_new_tokens": 2048}

EXTRA_PARAMS = ExtraParams("Fish Audio Drama 3", [
    ExtraParam("temperature", float, "Sampling temperature of the main token and the codes; 0 is greedy (default 1.0).",
               minimum=0),
    ExtraParam("top_k", int, "Top-k of the main token (default 0, off); the codes use at most 30.", minimum=0),
    ExtraParam("top_p", float, "Nucleus sampling, in (0, 1] (default 0.9).", minimum=0, maximum=1, exclusive_minimum=True),
])


class Drama3Adapter:
    def __init__(self, sample_rate: int, positions: int | None = None) -> None:
        self.positions = positions
        """The talker's KV cache length, which ends generation before a larger max_new_tokens does."""
        self.capabilities = Capabilities(
            sample_rate=sample_rate,
            voices=(VOICE,),
            default_voice=VOICE,
            accepted_fields=frozenset({"seed", "max_new_tokens", "extra_params", "ref_audio", "ref_text", "more_references"}),
            extra_params=tuple(EXTRA_PARAMS),
            streaming=True,
            voice_cloning=True,
        )
        self.text_carry = TagCarry()

    def resolve_voice(self, voice: str) -> str:
        if voice.strip().lower() in ("", VOICE):
            return VOICE
        raise UnknownVoice(voice, [VOICE])

    def stage_input(self, params: RequestParams) -> Drama3Input:
        fields = params.fields
        extra = EXTRA_PARAMS.parse(fields.get("extra_params"))
        max_new = checked_max_new_tokens(params, self.positions) if "max_new_tokens" in fields else DEFAULTS["max_new_tokens"]
        sampling = SamplingParams(temperature=extra.get("temperature", DEFAULTS["temperature"]),
                                  top_k=extra.get("top_k", DEFAULTS["top_k"]), top_p=extra.get("top_p", DEFAULTS["top_p"]),
                                  seed=fields.get("seed"), max_new_tokens=max_new)
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
