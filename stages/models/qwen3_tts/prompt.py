"""The talker's input for one utterance: the prompt embeddings, and the text still to be fed in while it speaks.

Each prompt position is the sum of a text-side embedding (text tokens through the text projection,
or the tts pad/bos/eos markers) and a codec-side one (control ids, the speaker, reference codes):

    [instructions]  <|im_start|>user\\n{instructions}<|im_end|>\\n            (text only)
    role            <|im_start|>assistant\\n                                 (text only)
    codec prefix    pad... bos  +  think/nothink, think_bos, [language], think_eos, [speaker], pad
    then, non-streaming text:  text tokens + eos (each + codec pad), then pad + codec bos;
                               every generated frame then adds the pad marker;
    or streaming text:         the first text token + codec bos; generated frame i adds text
                               token i+1 (then eos, then pad) -- the text is fed as speech goes;
    or ICL cloning:            reference transcript + text + eos against codec bos + reference codes,
                               aligned position by position (streaming) or one after the other.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vocalis.stages.models.qwen3_tts.config import Qwen3TTSConfig
from vocalis.stages.models.qwen3_tts.talker import Talker
from vocalis.stages.models.qwen3_tts.tokenizer import TextTokenizer, assistant_text, instruct_text, reference_text


@dataclass(frozen=True)
class Conditioning:
    """What, besides the text, steers one utterance."""

    language: str = "auto"
    """Lower-case key of codec_language_id, or "auto"."""
    speaker: str | None = None
    """Preset speaker (CustomVoice), lower case."""
    instructions: str | None = None
    xvector: torch.Tensor | None = None
    """[H] speaker embedding of a cloned voice (Base)."""
    ref_text: str | None = None
    ref_codes: torch.Tensor | None = None
    """[R, G] codes of the cloned voice's clip (Base, ICL)."""
    non_streaming: bool = True
    """All the text in the prompt (True), or fed in step by step while frames are generated."""


@dataclass
class TalkerPrompt:
    embeds: torch.Tensor
    """[P, H] prompt embeddings."""
    trailing: torch.Tensor
    """[S, H]: added to the embeddings of generated frames 0..S-1."""
    pad: torch.Tensor
    """[H]: added to the embeddings of later frames."""
    token_ids: list[list[int]]
    """The tokenized texts: the utterance, then instructions and reference transcript when present."""
    fed_positions: int = 0
    """Rows of `trailing` that are text (0 when it is the pad alone: the whole text is in the prompt): each is fed
    in with a generated frame, so the cache must hold them after the prompt (SequenceStart.fed_positions)."""


def language_id(config: Qwen3TTSConfig, language: str, speaker: str | None) -> int | None:
    talker = config.talker
    chosen = None if language == "auto" else talker.codec_language_id[language]
    dialect = talker.spk_is_dialect.get(speaker) if speaker else None
    if language in ("chinese", "auto") and dialect:
        chosen = talker.codec_language_id[dialect]
    return chosen


def build_prompt(talker: Talker, config: Qwen3TTSConfig, tokenizer: TextTokenizer, text: str, cond: Conditioning) -> TalkerPrompt:
    c = config.talker
    ids = tokenizer.encode(assistant_text(text))
    token_ids = [ids]
    markers = talker.embed_text([config.tts_bos_token_id, config.tts_eos_token_id, config.tts_pad_token_id])
    bos, eos, pad = markers[0:1], markers[1:2], markers[2:3]
    parts = []
    if cond.instructions:
        instruct_ids = tokenizer.encode(instruct_text(cond.instructions))
        token_ids.append(instruct_ids)
        parts.append(talker.embed_text(instruct_ids))
    parts.append(talker.embed_text(ids[:3]))

    lang = language_id(config, cond.language, cond.speaker)
    control = [c.codec_nothink_id, c.codec_think_bos_id, c.codec_think_eos_id] if lang is None else \
        [c.codec_think_id, c.codec_think_bos_id, lang, c.codec_think_eos_id]
    codec = [talker.embed_codec(control)]
    if cond.speaker is not None:
        codec.append(talker.embed_codec([c.speaker_codec_id(cond.speaker)]))
    elif cond.xvector is not None:
        codec.append(cond.xvector.to(bos.dtype).reshape(1, -1))
    codec.append(talker.embed_codec([c.codec_pad_id, c.codec_bos_id]))
    codec_prefix = torch.cat(codec)
    parts.append(torch.cat([pad.expand(len(codec_prefix) - 2, -1), bos]) + codec_prefix[:-1])
    codec_bos = codec_prefix[-1:]
    body = ids[3:-5]

    if cond.ref_codes is not None:
        ref_ids = tokenizer.encode(reference_text(cond.ref_text or ""))
        token_ids.append(ref_ids)
        text_side = torch.cat([talker.embed_text(ref_ids[3:-2] + body), eos])
        codec_side = torch.cat([codec_bos, talker.embed_frames(cond.ref_codes.to(codec_bos.device))])
        if cond.non_streaming:
            pad_codec = talker.embed_codec([c.codec_pad_id]).expand(len(text_side), -1)
            parts += [text_side + pad_codec, codec_side + pad]
            trailing = pad
        elif len(text_side) > len(codec_side):
            parts.append(text_side[: len(codec_side)] + codec_side)
            trailing = text_side[len(codec_side):]
        else:
            padded = torch.cat([text_side, pad.expand(len(codec_side) - len(text_side), -1)])
            parts.append(padded + codec_side)
            trailing = pad
    elif cond.non_streaming:
        text_side = torch.cat([talker.embed_text(body), eos])
        parts.append(text_side + talker.embed_codec([c.codec_pad_id]).expand(len(text_side), -1))
        parts.append(pad + codec_bos)
        trailing = pad
    else:
        parts.append(talker.embed_text(ids[3:4]) + codec_bos)
        trailing = torch.cat([talker.embed_text(ids[4:-5]), eos]) if len(ids) > 9 else eos
    fed = 0 if trailing is pad else len(trailing)
    return TalkerPrompt(embeds=torch.cat(parts), trailing=trailing, pad=pad[0], token_ids=token_ids, fed_positions=fed)
