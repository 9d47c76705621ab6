"""Fresh random seeds for the fuzzers, printed so that a failure reproduces.

Each run draws a new seed unless VOCALIS_FUZZ_SEED gives one; the seed is in the pytest header and in the
report of every failing fuzz test. VOCALIS_FUZZ_EXAMPLES multiplies each fuzzer's number of examples
(default 1: a bounded run for CI; e.g. 40 for a long run by hand).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import TypeVar

from hypothesis import HealthCheck, seed, settings

SEED_ENV = "VOCALIS_FUZZ_SEED"
EXAMPLES_ENV = "VOCALIS_FUZZ_EXAMPLES"

SEED = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(2**32))
SCALE = float(os.environ.get(EXAMPLES_ENV) or 1)

F = TypeVar("F", bound=Callable)


def fuzzed(max_examples: int) -> Callable[[F], F]:
    """Hypothesis settings for a fuzz test: this run's seed, `max_examples` times the scale, no deadline, no database."""

    def apply(test: F) -> F:
        configured = settings(
            max_examples=max(1, round(max_examples * SCALE)),
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )(test)
        return seed(SEED)(configured)

    return apply


def reproduce_hint() -> str:
    return f"fuzz seed {SEED}: rerun with {SEED_ENV}={SEED} to reproduce"
