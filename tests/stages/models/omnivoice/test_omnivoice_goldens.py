"""Parity with the reference package (omnivoice 0.2.1) on the tiny random checkpoint.

tests/goldens/omnivoice/make_goldens.py recorded, for each case, what the reference did; here
our implementation is run on the same checkpoint and compared step by step:
- the prompt ids, exactly;
- teacher-forced: at every step, from the reference's tokens so far, the predicted tokens
  (exactly) and confidence scores (to float32 rounding), and the tokens committed (exactly, with the
  reference's Gumbel draws replayed);
- free-running through both stages: each unit's codes (exactly), its decoded waveform and the
  final audio (to float32 rounding along the decode, plus float16's: goldens store waveforms as float16);
- cloning: the preprocessed reference clip, its semantic features and its codes;
- long texts: the units the text is cut into, as the reference's chunker cuts it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.tolerance import rounding_bound, traced
from vocalis.stages.models.omnivoice.config import GenerationConfig
from vocalis.stages.models.omnivoice.loader import load_modules
from vocalis.stages.models.omnivoice.masked_decoding import commit, predict, unmask_schedule
from vocalis.stages.models.omnivoice.postprocess import fade, level
from vocalis.stages.models.omnivoice.runtime import OmniVoiceGenerator, OmniVoiceInput, PreparedReference, UnitDecoder
from vocalis.stages.models.omnivoice.text import language_code, normalize_instruction
from vocalis.stages.runtime.iterative import IterativeStage
from vocalis.stages.runtime.request import ReferenceAudio, SynthesisRequest
from vocalis.stages.runtime.stage import StageItem

GOLDENS = Path(__file__).parents[3] / "goldens" / "omnivoice"
META = json.loads((GOLDENS / "goldens.json").read_text())
CASES = sorted(META["cases"])


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


class ReplayNoise:
    """The reference's uniform draws, in the order it made them."""

    def __init__(self, draws: list[np.ndarray]) -> None:
        self.draws = list(draws)

    def uniform(self, shape):
        draw = torch.from_numpy(self.draws.pop(0))
        assert draw.numel() == int(np.prod(shape))
        return draw.reshape(shape)


class NoNoise:
    def uniform(self, shape):
        raise AssertionError("a deterministic case drew noise")


@pytest.fixture(scope="module")
def data():
    return np.load(GOLDENS / "goldens.npz")


@pytest.fixture(scope="module")
def modules():
    return load_modules(GOLDENS / "tiny")


@pytest.fixture(scope="module")
def generator(modules):
    """One generator for the module, so each reference clip is encoded once (its cache is by content)."""
    return OmniVoiceGenerator(*modules)


def generation(case: dict) -> GenerationConfig:
    return GenerationConfig(**case["generation"])


def stage_input(case: dict, data) -> OmniVoiceInput:
    call = case["call"]
    reference = None
    if case["ref"]:
        rate = case["ref"][0]
        reference = ReferenceAudio(data[f"{name_of(case)}/ref_audio"], rate, call["ref_text"])
    return OmniVoiceInput(
        generation=generation(case),
        language=language_code(call["language"]) if call.get("language") else None,
        instruction=call.get("instruct"),
        reference=reference,
    )


def name_of(case: dict) -> str:
    return next(name for name, c in META["cases"].items() if c is case)


def draws(data, name: str, units: int) -> list[np.ndarray]:
    out = []
    for t in range(units):
        key = f"{name}/unit{t}/uniforms"
        if key in data.files:
            out += list(data[key])
    return out


def run_request(generator, data, name: str):
    """Our two stages on the case's text, the reference's draws replayed: (unit payloads, audio pieces)."""
    codec = generator.codec
    case = META["cases"][name]
    request = SynthesisRequest(text=case["call"]["text"], stage_input=stage_input(case, data), output=NullOutput())
    recorded = draws(data, name, len(case["units"]))
    generator.noise_for[request.request_id] = ReplayNoise(recorded) if recorded else NoNoise()
    first, second = IterativeStage("generator", generator), IterativeStage("decoder", UnitDecoder(codec))
    first.add(StageItem(request))
    units, pieces = [], []
    finished = False
    with torch.inference_mode():
        while first.has_work() or second.has_work():
            for item in first.step() if first.has_work() else []:
                if item.payload is not None:
                    units.append(item.payload)
                second.add(item)
            for item in second.step() if second.has_work() else []:
                if item.payload is not None:
                    pieces.append(item.payload)
                finished = finished or item.finished
    assert finished
    return units, pieces


@pytest.mark.parametrize("name", CASES)
def test_prompt_and_teacher_forced_steps(generator, data, name):
    lm = generator.lm
    case = META["cases"][name]
    config = generation(case)
    mask_id = lm.config.audio_mask_id
    noise = ReplayNoise(draws(data, name, len(case["units"]))) if config.position_temperature > 0 else NoNoise()
    request = SynthesisRequest(text=case["call"]["text"], stage_input=stage_input(case, data), output=NullOutput())
    job = generator.start(request)
    assert job.units == [u["text"] for u in case["units"]]
    for t, unit in enumerate(case["units"]):
        key = f"{name}/unit{t}"
        job.index = t
        decoding = generator._unit(job)
        frames = unit["target_len"]
        assert decoding.frames == frames, "target length (the duration estimate)"
        assert torch.equal(decoding.ids, torch.from_numpy(data[f"{key}/input_ids"].astype(np.int64))), "prompt ids"
        assert torch.equal(decoding.audio_mask, torch.from_numpy(data[f"{key}/audio_mask"]))
        schedule = unmask_schedule(frames, lm.config.num_audio_codebook, config.num_step, config.t_shift)
        assert schedule == decoding.schedule and sum(schedule) == frames * lm.config.num_audio_codebook
        preds, scores = data[f"{key}/pred"].astype(np.int64), data[f"{key}/scores"]
        gold_tokens = torch.from_numpy(data[f"{key}/tokens"].astype(np.int64))
        tokens = torch.full_like(gold_tokens, mask_id)
        with torch.inference_mode():
            for step in range(config.num_step):
                ids = decoding.ids.clone()
                ids[:, -frames:] = tokens
                with traced() as path:
                    hidden = generator._hidden([((ids, decoding.audio_mask), (tokens, decoding.audio_mask[-frames:]))])
                    cond = generator._logits(hidden[0, ids.shape[1] - frames : ids.shape[1]])
                    uncond = generator._logits(hidden[0, ids.shape[1] : ids.shape[1] + frames])
                logits = rounding_bound(torch.float32, path.peak, path.steps)
                if step == 0 and f"{key}/c_logits0" in data.files:
                    np.testing.assert_allclose(cond[:, :2].numpy(), data[f"{key}/c_logits0"], atol=logits, rtol=0)
                    np.testing.assert_allclose(uncond[:, :2].numpy(), data[f"{key}/u_logits0"], atol=logits, rtol=0)
                predicted, score = predict(cond, uncond, config, mask_id, noise)
                assert torch.equal(predicted, torch.from_numpy(preds[step])), f"unit {t} step {step}: predicted tokens"
                # a score is the log-softmax of (1 + g) c - g u, c and u the logits' log-softmaxes: a log-softmax at most
                # doubles a perturbation of its input, so the logits' bound times 2 (2 + 4 g)
                np.testing.assert_allclose(score.numpy(), scores[step], atol=2 * (2 + 4 * config.guidance_scale) * logits, rtol=0)
                commit(tokens, predicted, score, schedule[step], config, mask_id, noise)
                # teacher forcing: go on from the reference's tokens, so one flipped near-tie cannot cascade
                tokens = torch.from_numpy(data[f"{key}/step_tokens"][step].astype(np.int64)) if f"{key}/step_tokens" in data.files else tokens
        assert torch.equal(tokens, gold_tokens), f"unit {t}: committed tokens"
        if t == 0 and job.reference is None and len(job.units) > 1:
            job.first_unit = PreparedReference(gold_tokens, unit["text"], None)


@pytest.mark.parametrize("name", CASES)
def test_free_running_codes_and_audio(generator, data, name):
    """Both stages end to end: each unit's codes exactly; each unit's audio is the reference's decoded
    waveform levelled and faded, after its silence; a short text's audio is the reference's output."""
    case = META["cases"][name]
    with traced() as path:  # every unit's generation and decode counted: an overestimate for the decode's rounding
        units, pieces = run_request(generator, data, name)
    assert [u.text for u in units] == [u["text"] for u in case["units"]], "units as the reference cuts the text"
    assert len(pieces) == len(units)
    for t, (unit, piece) in enumerate(zip(units, pieces, strict=True)):
        gold = data[f"{name}/unit{t}/tokens"].astype(np.int64)
        assert torch.equal(unit.codes, torch.from_numpy(gold)), f"unit {t} codes"
        decoded = data[f"{name}/unit{t}/decoded"].astype(np.float32)
        pad = np.zeros(int(0.1 * 24000), dtype=np.float32)
        expected = np.concatenate([pad, fade(level(decoded, unit.ref_rms), 2400)] + ([pad] if unit.last else []))
        assert piece.shape == expected.shape
        # float32 along the path, plus the golden's float16 storage: one rounding, relative, at the levelled magnitude
        tolerance = rounding_bound(torch.float32, path.peak, path.steps) + rounding_bound(np.float16, float(np.abs(expected).max()), 1)
        np.testing.assert_allclose(piece, expected, atol=tolerance, rtol=0)
    if f"{name}/audio" in data.files:
        audio = data[f"{name}/audio"].astype(np.float32)
        tolerance = rounding_bound(torch.float32, path.peak, path.steps) + rounding_bound(np.float16, float(np.abs(audio).max()), 1)
        np.testing.assert_allclose(np.concatenate(pieces), audio, atol=tolerance, rtol=0)


@pytest.mark.parametrize("name", [n for n in CASES if META["cases"][n]["ref"]])
def test_reference_encoding(generator, data, name):
    codec = generator.codec
    case = META["cases"][name]
    rate = case["ref"][0]
    reference = ReferenceAudio(data[f"{name}/ref_audio"], rate, case["call"]["ref_text"])
    prepared = generator._encode_reference(np.asarray(reference.samples), rate, reference.text, True)
    assert prepared.text == case["units"][0]["ref_text"]
    gold_wav = data[f"{name}/ref_wav"]
    with torch.inference_mode(), traced() as path:
        features = codec.semantic_features(torch.from_numpy(gold_wav)[None])[0].numpy()
    np.testing.assert_allclose(features, data[f"{name}/semantic_features"], atol=rounding_bound(torch.float32, path.peak, path.steps), rtol=0)
    assert torch.equal(prepared.codes, torch.from_numpy(data[f"{name}/ref_codes"].astype(np.int64)))


def test_instruction_normalised_like_the_reference():
    assert normalize_instruction("Female, Low Pitch, British Accent", "Good morning") == "female, low pitch, british accent"
    assert normalize_instruction("male, elderly", "你好，世界。") == "男，老年"


def test_a_step_packs_each_requests_two_prompts_into_one_row_and_batches_rows_apart(generator, data):
    """A request's conditional prompt and its unconditional one (the target alone) share one row, each seeing only
    itself, so the shorter is not padded to the longer; requests batched together (of different lengths: padded to
    the longest row) see nothing of each other: each one's logits are its logits alone, to float32 rounding."""
    jobs = []
    for name in ("auto", "clone"):
        case = META["cases"][name]
        request = SynthesisRequest(text=case["call"]["text"], stage_input=stage_input(case, data), output=NullOutput())
        jobs.append(generator.start(request).current)
    with torch.inference_mode():
        with traced() as path:
            together = generator._hidden([unit.rows() for unit in jobs])
        alone = [generator._hidden([unit.rows()]) for unit in jobs]
    bound = rounding_bound(torch.float32, path.peak, path.steps)
    lengths = [unit.ids.shape[1] + unit.frames for unit in jobs]
    assert lengths[0] != lengths[1] and together.shape[1] == max(lengths)
    for b, length in enumerate(lengths):
        assert alone[b].shape[1] == length  # not 2 x the conditional prompt's length
        np.testing.assert_allclose(together[b, :length].numpy(), alone[b][0].numpy(), atol=bound, rtol=0)
