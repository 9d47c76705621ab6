"""Each recent voice's flow stream primed over its prompt (`FlowStream.prime`), kept within a byte budget (the flow
stage's `prompt_cache_bytes`), so that a voice's later utterances start their flow after the prompt's final frames.

Why: every utterance in a voice begins by running the DiT over the voice's prompt mel (a 3-s clip is 150 frames at
CosyVoice3's 50 Hz), at each of the 10 Euler steps, for both guidance rows. The prompt's frames in whole attention
chunks whose token features are final depend on the prompt alone, so their keys and values are the same for every
utterance: computed once, held, and copied into each later utterance's stream, they leave its first chunk only the
prompt's last chunk or so and its own frames. A voice's first utterance primes and continues in two DiT calls instead
of one (the same frames computed); a voice's later ones copy its held frames (3.6 MB a frame at real size in float32,
10 steps x 22 blocks x 2 x 2 x 1024 floats).

Used from the flow stage's thread; `stats()` may be read from another (the metrics'). Keyed by the conditioning
object: `voice_prompt.conditioning` gives one per encoded voice."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from vocalis.stages.components.flow_matching import FlowStream
from vocalis.stages.runtime.stage import CacheStats


class PrimedVoices:
    """Primed flow streams by voice, least recently used first out once their held frames pass `budget_bytes`."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._streams: OrderedDict[object, FlowStream] = OrderedDict()
        self.hits = 0
        """Utterances that started from a kept voice."""
        self.misses = 0
        """Utterances that primed their voice's stream themselves."""
        self.nbytes = 0
        """Bytes the kept streams hold."""

    def stats(self) -> CacheStats:
        return CacheStats(hits=self.hits, misses=self.misses, entries=len(self._streams), nbytes=self.nbytes)

    def __len__(self) -> int:
        return len(self._streams)

    def stream(self, voice: object, make: Callable[[], FlowStream]) -> FlowStream:
        """A stream for one utterance in `voice`: a fork of the voice's primed stream; where none is kept, `make()`
        primed (a fork of it kept when it fits the budget). With no budget, `make()` as it is."""
        if self.budget_bytes <= 0:
            return make()
        primed = self._streams.get(voice)
        if primed is not None:
            self._streams.move_to_end(voice)
            self.hits += 1
            return primed.fork()
        self.misses += 1
        stream = make()
        stream.prime()
        if 0 < stream.nbytes <= self.budget_bytes:
            kept = self._streams[voice] = stream.fork()  # never advanced: its bytes stay as counted
            self.nbytes += kept.nbytes
            while self.nbytes > self.budget_bytes:
                self.nbytes -= self._streams.popitem(last=False)[1].nbytes
        return stream
