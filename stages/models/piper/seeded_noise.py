"""Reproducible (seeded) noise for Piper / VITS voices.

Why this exists: a Piper voice is a VITS model exported to ONNX, and its graph
draws noise with ``RandomNormalLike`` nodes (one in the stochastic duration
predictor, shaped ``[batch, 2, phonemes]``, scaled by ``noise_w``; one for the
prior sample ``z_p``, shaped ``[batch, 192, frames]``, scaled by
``noise_scale``).  onnxruntime cannot seed those nodes per run
(``onnxruntime.set_seed`` does not make repeated runs equal), so a request's
``seed`` could not give reproducible audio.

The fix is a graph rewrite done in memory with the ``onnx`` package: every
random node is replaced by ops that take their values from a new graph input
``noise_<i>``, a 1-D float32 "noise bank" of standard normals supplied by the
caller::

    Size(x) -> Reshape([1]) -> Slice(bank, [0], n) -> Reshape(Shape(x))
            [-> Mul(scale)] [-> Add(mean)] [-> Cast(dtype)]

The graph decides at run time how many values it takes (the frame count depends
on the predicted durations), so :class:`SeededNoiseSession` passes banks sized
from a safe upper bound (phoneme count x length_scale x a generous frames-per-id
cap) and, should a run still find a bank too short (its ``Reshape`` fails),
retries with that bank twice as long.  Each bank comes from its own numpy
``Generator`` seeded from ``(seed, sentence_index, site)`` and drawing
``standard_normal``; a longer bank has the same prefix as a shorter one, so a
retry never changes the audio.  Same seed, sentence index and phoneme ids give
bit-identical audio (on the same onnxruntime build and execution provider);
the noise scales in the ``scales`` input apply exactly as in the stock graph.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnxruntime as ort

if TYPE_CHECKING:
    import onnx

__all__ = ["DEFAULT_FRAMES_PER_ID", "SeededGraph", "SeededNoiseSession", "patch_for_seeded_noise", "seeded_graph"]

#: Upper bound on output frames per phoneme id at ``length_scale`` 1, used to
#: size the noise banks.  Piper ids interleave a pad id between phonemes, and at
#: the default noise scales a voice needs about 2-3 frames per id (plus at most
#: one per id from the ``Ceil`` on durations); 10 leaves a wide margin, and an
#: exceptional run (e.g. a very large ``noise_w``) is handled by the retry.
DEFAULT_FRAMES_PER_ID = 10.0

_NOISE_INPUT_PREFIX = "noise_"
_NODE_PREFIX = "seeded_noise"
_SUPPORTED_RANDOM_OPS = frozenset({"RandomNormal", "RandomNormalLike"})
_UNSUPPORTED_RANDOM_OPS = frozenset({"RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli"})
_RANDOM_OPS = _SUPPORTED_RANDOM_OPS | _UNSUPPORTED_RANDOM_OPS
# Values per step of the dynamic axis assumed for a site whose static shape is
# unknown (shape inference failed); the retry corrects any underestimate.
_FALLBACK_VALUES_PER_STEP = 256
_MIN_BANK_LEN = 64
_MAX_RETRIES = 32
_UINT64_MASK = (1 << 64) - 1


def _default_opset(model: onnx.ModelProto) -> int:
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            return int(opset.version)
    raise ValueError("model has no default-domain opset import")


def _random_nodes(graph: onnx.GraphProto) -> list[int]:
    """Positions of the random nodes in the main graph; ValueError for any the rewrite cannot handle."""
    import onnx

    def subgraph_random_ops(g: onnx.GraphProto) -> list[str]:
        found = []
        for node in g.node:
            if node.domain in ("", "ai.onnx") and node.op_type in _RANDOM_OPS:
                found.append(node.op_type)
            for attr in node.attribute:
                subgraphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
                for sub in subgraphs:
                    found.extend(subgraph_random_ops(sub))
        return found

    positions = []
    for position, node in enumerate(graph.node):
        if node.domain in ("", "ai.onnx") and node.op_type in _UNSUPPORTED_RANDOM_OPS:
            raise ValueError(f"random op {node.op_type} ({node.name!r}) is not supported by the seeded-noise rewrite")
        if node.domain in ("", "ai.onnx") and node.op_type in _SUPPORTED_RANDOM_OPS:
            positions.append(position)
        for attr in node.attribute:
            subgraphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for sub in subgraphs:
                if subgraph_random_ops(sub):
                    raise ValueError(
                        f"random ops inside the subgraph of {node.op_type} ({node.name!r}) are not supported"
                    )
    return positions


def patch_for_seeded_noise(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """Replace every random node of ``model`` by a read from a caller-supplied noise bank.

    Each ``RandomNormal``/``RandomNormalLike`` node (site ``i``, in graph order)
    becomes ops that take the first ``n`` values of a new graph input
    ``noise_<i>`` (1-D float32, standard normals; ``n`` is the number of values
    the node would have drawn), reshape them to the node's output shape, apply
    the node's ``scale`` and ``mean`` and cast to its output dtype.  The node's
    output tensor keeps its name, so the rest of the graph is untouched.  If a
    bank is shorter than ``n``, the run fails in the node
    ``seeded_noise_<i>/Reshape``.

    The input model is not modified.

    Returns:
        The patched copy and the noise input names, ``["noise_0", ...]``.

    Raises:
        ValueError: the graph has no random ops, has random ops this rewrite
            cannot handle (uniform, multinomial, Bernoulli, or inside a
            subgraph), or uses an opset older than 10.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    sites = _random_nodes(model.graph)
    if not sites:
        raise ValueError("the model has no random ops to replace")
    opset = _default_opset(model)
    if opset < 10:
        raise ValueError(f"opset {opset} is too old for the seeded-noise rewrite (needs >= 10)")

    patched = onnx.ModelProto()
    patched.CopyFrom(model)
    graph = patched.graph
    taken = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    taken |= {name for node in graph.node for name in (*node.input, *node.output)}

    input_types: dict[str, int] = {}
    for value in (*graph.input, *graph.value_info, *graph.output):
        if value.type.HasField("tensor_type"):
            input_types[value.name] = value.type.tensor_type.elem_type
    for init in graph.initializer:
        input_types[init.name] = init.data_type

    site_of = {position: i for i, position in enumerate(sites)}
    noise_names: list[str] = []
    new_nodes: list[onnx.NodeProto] = []
    for position, node in enumerate(graph.node):
        i = site_of.get(position)
        if i is None:
            new_nodes.append(node)
            continue
        bank = f"{_NOISE_INPUT_PREFIX}{i}"
        if bank in taken:
            raise ValueError(f"the model already has a tensor named {bank!r}")
        noise_names.append(bank)
        pre = f"{_NODE_PREFIX}_{i}"
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        mean = float(attrs.get("mean", 0.0))
        scale = float(attrs.get("scale", 1.0))

        def const(name: str, value: np.ndarray, pre: str = pre) -> str:
            graph.initializer.append(numpy_helper.from_array(value, f"{pre}/{name}"))
            return f"{pre}/{name}"

        if node.op_type == "RandomNormalLike":
            x = node.input[0]
            dtype = attrs.get("dtype")
            new_nodes.append(helper.make_node("Shape", [x], [f"{pre}/shape"], name=f"{pre}/Shape"))
            new_nodes.append(helper.make_node("Size", [x], [f"{pre}/size"], name=f"{pre}/Size"))
            new_nodes.append(
                helper.make_node(
                    "Reshape", [f"{pre}/size", const("one", np.array([1], np.int64))], [f"{pre}/count"],
                    name=f"{pre}/Count",
                )
            )
            shape, count = f"{pre}/shape", f"{pre}/count"
        else:  # RandomNormal: static shape
            x = None
            dtype = attrs.get("dtype", TensorProto.FLOAT)
            dims = [int(d) for d in attrs["shape"]]
            shape = const("shape", np.array(dims, np.int64))
            count = const("count", np.array([math.prod(dims)], np.int64))
        new_nodes.append(
            helper.make_node(
                "Slice", [bank, const("start", np.array([0], np.int64)), count], [f"{pre}/slice"], name=f"{pre}/Slice"
            )
        )
        reshape_kwargs = {"allowzero": 1} if opset >= 14 else {}
        steps: list[tuple[str, list[str], dict[str, Any]]] = [("Reshape", [shape], reshape_kwargs)]
        if scale != 1.0:
            steps.append(("Mul", [const("scale", np.array(scale, np.float32))], {}))
        if mean != 0.0:
            steps.append(("Add", [const("mean", np.array(mean, np.float32))], {}))
        if dtype is None:  # RandomNormalLike without dtype: same type as its input
            dtype = input_types.get(x) if x is not None else None
        if dtype is None:
            if opset < 15:
                raise ValueError(
                    f"cannot tell the output dtype of {node.name!r} (no dtype attribute, input type unknown)"
                )
            steps.append(("CastLike", [x], {}))
        elif dtype != TensorProto.FLOAT:
            steps.append(("Cast", [], {"to": int(dtype)}))
        current = f"{pre}/slice"
        for k, (op, extra, kwargs) in enumerate(steps):
            out = node.output[0] if k == len(steps) - 1 else f"{pre}/{op.lower()}_out"
            new_nodes.append(helper.make_node(op, [current, *extra], [out], name=f"{pre}/{op}", **kwargs))
            current = out
        graph.input.append(helper.make_tensor_value_info(bank, TensorProto.FLOAT, [f"{bank}_len"]))

    del graph.node[:]
    graph.node.extend(new_nodes)
    return patched, noise_names


def _values_per_step(model: onnx.ModelProto, sites: Sequence[int]) -> list[tuple[int, bool]]:
    """Per site: (product of the static non-batch dims, whether it has a dynamic non-batch axis)."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
        values = {v.name: v for v in (*inferred.graph.value_info, *inferred.graph.output)}
    except Exception:  # shape inference is best effort: fall back to a generous guess
        values = {}
    result = []
    for position in sites:
        node = model.graph.node[position]
        if node.op_type == "RandomNormal":
            dims = [int(d) for a in node.attribute if a.name == "shape" for d in a.ints]
            result.append((math.prod(dims), False))
            continue
        info = values.get(node.output[0])
        if info is None or not info.type.tensor_type.HasField("shape"):
            result.append((_FALLBACK_VALUES_PER_STEP, True))
            continue
        dims = list(info.type.tensor_type.shape.dim)[1:]  # axis 0 is the batch
        static = math.prod(d.dim_value for d in dims if d.HasField("dim_value"))
        result.append((static, any(not d.HasField("dim_value") for d in dims)))
    return result


def _generator(seed: int, sentence_index: int, site: int) -> np.random.Generator:
    """The generator of one noise site: seeded from (seed mod 2**64, sentence index, site index)."""
    sequence = np.random.SeedSequence(seed & _UINT64_MASK, spawn_key=(sentence_index, site))
    return np.random.Generator(np.random.PCG64(sequence))


class _Bank:
    """A growable noise bank: one generator per site, so a longer bank extends a shorter one."""

    def __init__(self, generator: np.random.Generator, length: int) -> None:
        self._generator = generator
        self.values = generator.standard_normal(length, dtype=np.float32)

    def grow(self, length: int) -> None:
        extra = self._generator.standard_normal(length - len(self.values), dtype=np.float32)
        self.values = np.concatenate([self.values, extra])


@dataclass(frozen=True)
class SeededGraph:
    """A Piper graph patched for seeded noise, with what a session on it needs to size the noise banks."""

    model: bytes | str
    """The patched graph: serialized, or the path of a file that holds it."""
    noise_names: tuple[str, ...]
    """The noise inputs, ``noise_0`` .. ``noise_<n-1>``, in site order."""
    values_per_step: tuple[tuple[int, bool], ...]
    """Per site: the values drawn per step of its dynamic axis, and whether it has one (else that many in all)."""


def seeded_graph(model: onnx.ModelProto) -> SeededGraph:
    """``model`` (an unpatched Piper graph, left unmodified) patched for seeded noise."""
    sites = _random_nodes(model.graph)
    patched, names = patch_for_seeded_noise(model)
    return SeededGraph(patched.SerializeToString(), tuple(names), tuple(_values_per_step(model, sites)))


class SeededNoiseSession:
    """An onnxruntime session for a Piper voice whose noise comes from a seed.

    Takes the stock graph's inputs (``input``, ``input_lengths``, ``scales`` and
    ``sid`` for multi-speaker voices) plus a seed and the sentence index, and
    returns what the stock graph's ``output`` gives (float32, shape
    ``[batch, 1, 1, samples]`` for Piper voices).  The noise of sentence ``k`` is
    derived from ``(seed, k)``, so each sentence of a request is reproducible on
    its own and sentence order matters.  Thread-safe like the underlying
    ``InferenceSession`` (``run`` keeps no per-call state beyond
    :attr:`last_bank_lengths`, which is informational).
    """

    def __init__(
        self,
        graph: SeededGraph,
        sess_options: ort.SessionOptions | None = None,
        providers: Sequence[str | tuple[str, dict[str, Any]]] | None = None,
        *,
        frames_per_id: float = DEFAULT_FRAMES_PER_ID,
    ) -> None:
        """Open a session on ``graph`` (seeded_graph's patch of a Piper graph).

        ``providers`` defaults to ``["CPUExecutionProvider"]``; ``frames_per_id``
        is the frames-per-phoneme-id cap (at ``length_scale`` 1) used to size the banks.
        """
        self._noise_names = list(graph.noise_names)
        self._per_step = list(graph.values_per_step)
        self._frames_per_id = float(frames_per_id)
        self._session = ort.InferenceSession(
            graph.model,
            sess_options=sess_options,
            providers=list(providers) if providers is not None else ["CPUExecutionProvider"],
        )
        self._input_names = {i.name for i in self._session.get_inputs()}
        self._output_names = [o.name for o in self._session.get_outputs()]
        self.last_bank_lengths: tuple[int, ...] = ()
        # A too-short bank is an expected, handled failure: keep onnxruntime from
        # logging it as an error (the exception still carries the message).
        self._run_options = ort.RunOptions()
        self._run_options.log_severity_level = 4

    @classmethod
    def load(
        cls,
        model_path: Path,
        sess_options: ort.SessionOptions | None = None,
        providers: Sequence[str | tuple[str, dict[str, Any]]] | None = None,
        *,
        frames_per_id: float = DEFAULT_FRAMES_PER_ID,
    ) -> SeededNoiseSession:
        """Load the Piper ``.onnx`` at ``model_path``, patch it in memory and open a session."""
        import onnx

        return cls(seeded_graph(onnx.load(str(model_path))), sess_options, providers, frames_per_id=frames_per_id)

    @property
    def session(self) -> ort.InferenceSession:
        """The underlying session on the patched graph."""
        return self._session

    @property
    def noise_input_names(self) -> list[str]:
        """Names of the noise-bank inputs, ``noise_0`` .. ``noise_<n-1>``, in site order."""
        return list(self._noise_names)

    def bank_lengths(self, num_ids: int, length_scale: float, batch: int = 1) -> list[int]:
        """Initial bank length per site for ``num_ids`` phoneme ids: an upper bound, not the exact need."""
        steps = batch * (math.ceil(num_ids * (self._frames_per_id * max(float(length_scale), 0.0) + 1.0)) + 16)
        return [max(_MIN_BANK_LEN, per_step * (steps if dynamic else batch)) for per_step, dynamic in self._per_step]

    def run(
        self,
        phoneme_ids: np.ndarray,
        scales: np.ndarray,
        seed: int,
        sentence_index: int,
        speaker_id: int | None = None,
        *,
        initial_bank_len: int | None = None,
    ) -> np.ndarray:
        """Synthesize one sentence; returns the graph's ``output`` (float32, ``[batch, 1, 1, samples]``).

        Args:
            phoneme_ids: int64 ids, shape ``(batch, T)`` (normally ``(1, T)``).
            scales: float32 ``[noise_scale, length_scale, noise_w]``.
            seed: the request seed (any int; taken modulo 2**64).
            sentence_index: index (>= 0) of this sentence within the request.
            speaker_id: the ``sid`` input for multi-speaker voices (``None`` means 0);
                must be ``None`` or 0 for single-speaker voices.
            initial_bank_len: first bank length for every site instead of the
                computed bound (for tests; a too-short one just causes retries).
        """
        return self.run_all(
            phoneme_ids, scales, seed, sentence_index, speaker_id, initial_bank_len=initial_bank_len
        )["output" if "output" in self._output_names else self._output_names[0]]

    def run_all(
        self,
        phoneme_ids: np.ndarray,
        scales: np.ndarray,
        seed: int,
        sentence_index: int,
        speaker_id: int | None = None,
        *,
        initial_bank_len: int | None = None,
    ) -> dict[str, np.ndarray]:
        """Like :meth:`run`, but return every graph output by name (e.g. an alignment output)."""
        if sentence_index < 0:
            raise ValueError(f"sentence_index must be >= 0, got {sentence_index}")
        ids = np.asarray(phoneme_ids, dtype=np.int64)
        if ids.ndim != 2:
            raise ValueError(f"phoneme_ids must have shape (batch, T), got {ids.shape}")
        scales_arr = np.asarray(scales, dtype=np.float32)
        if scales_arr.shape != (3,):
            raise ValueError(f"scales must have shape (3,), got {scales_arr.shape}")
        feeds: dict[str, np.ndarray] = {
            "input": ids,
            "input_lengths": np.full((ids.shape[0],), ids.shape[1], dtype=np.int64),
            "scales": scales_arr,
        }
        if "sid" in self._input_names:
            feeds["sid"] = np.full((ids.shape[0],), 0 if speaker_id is None else speaker_id, dtype=np.int64)
        elif speaker_id not in (None, 0):
            raise ValueError(f"this voice has a single speaker; got speaker_id={speaker_id}")

        if initial_bank_len is not None:
            lengths = [max(1, int(initial_bank_len))] * len(self._noise_names)
        else:
            lengths = self.bank_lengths(ids.shape[1], float(scales_arr[1]), ids.shape[0])
        banks = [_Bank(_generator(seed, sentence_index, i), n) for i, n in enumerate(lengths)]
        for _ in range(_MAX_RETRIES + 1):
            for name, bank in zip(self._noise_names, banks, strict=True):
                feeds[name] = bank.values
            try:
                outputs = self._session.run(None, feeds, self._run_options)
            except (ort.capi.onnxruntime_pybind11_state.Fail,
                    ort.capi.onnxruntime_pybind11_state.RuntimeException,
                    ort.capi.onnxruntime_pybind11_state.InvalidArgument) as error:
                short = _short_bank(str(error), len(banks))
                if short is None:
                    raise
                site, needed = short
                banks[site].grow(max(2 * len(banks[site].values), needed))
                continue
            self.last_bank_lengths = tuple(len(b.values) for b in banks)
            return dict(zip(self._output_names, outputs, strict=True))
        raise RuntimeError(f"noise banks still too short after {_MAX_RETRIES} doublings")


_REQUESTED_SHAPE = re.compile(r"requested shape:\s*\{([0-9,\s]*)\}")


def _short_bank(message: str, count: int) -> tuple[int, int] | None:
    """(site, values needed or 0 if not stated) for a bank an onnxruntime error says was too short."""
    for site in range(count):
        if f"'{_NODE_PREFIX}_{site}/Reshape'" in message:
            match = _REQUESTED_SHAPE.search(message)
            dims = [int(d) for d in match.group(1).split(",") if d.strip()] if match else []
            return site, math.prod(dims) if dims else 0
    return None

