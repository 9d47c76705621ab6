"""StepCost: the batch size a stage steps at, read from the step costs it measured (no clock: costs fed in)."""

from __future__ import annotations

import pytest

from vocalis.stages.runtime.step_cost import StepCost


def run(policy: StepCost, ready: int, cost, steps: int) -> list[int]:
    """`steps` steps with `ready` requests ready, each step costing cost(batch); the batch sizes stepped."""
    sizes = []
    for _ in range(steps):
        size = policy.batch_limit(ready)
        policy.record(size, cost(size))
        sizes.append(size)
    return sizes


def test_a_compute_bound_cost_steps_one_at_a_time_after_measuring_two_sizes():
    policy = StepCost(recheck_every=1000)
    sizes = run(policy, 4, lambda b: 0.3 * b, 12)
    assert sizes[:4] == [1, 1, 2, 2]  # measuring: one request, then two
    assert sizes[4:] == [1] * 8
    assert policy.compute_bound() is True and policy.marginal_ratio() == pytest.approx(1.0)


def test_an_overhead_bound_cost_batches_every_ready_request():
    policy = StepCost()
    sizes = run(policy, 16, lambda b: 0.002 + 0.0001 * b, 10)
    assert sizes[:4] == [1, 1, 2, 2] and sizes[4:] == [16] * 6
    assert policy.compute_bound() is False and policy.marginal_ratio() < 0.1


def test_batching_is_kept_wherever_it_raises_throughput_by_more_than_a_tenth():
    """r = c / t(1): one more request costs r of its cost alone; batching raises throughput by up to 1 / r."""
    assert run(StepCost(), 4, lambda b: 0.2 + 0.8 * b, 6)[4:] == [4, 4]  # r = 0.8: up to 1.25x
    assert run(StepCost(), 4, lambda b: 0.05 + 0.95 * b, 6)[4:] == [1, 1]  # r = 0.95: up to 1.05x
    assert run(StepCost(), 4, lambda b: 1.2 * b - 0.1, 6)[4:] == [1, 1]  # r > 1: batching costs throughput


def test_holding_rechecks_two_at_a_time_so_a_hiccup_cannot_lock_it_in():
    policy = StepCost(recheck_every=4)
    hiccup = {"on": True}

    def cost(b: int) -> float:
        return 0.01 + (0.05 if hiccup["on"] and b == 2 else 0.001 * b)  # a slow stretch while measuring two

    sizes = run(policy, 8, cost, 6)
    assert sizes[-1] == 1 and policy.compute_bound()  # fooled: two looked six times one
    hiccup["on"] = False
    sizes = run(policy, 8, cost, 40)
    assert 2 in sizes and sizes[-1] == 8 and policy.compute_bound() is False


def test_one_ready_request_always_runs_and_none_steps_nothing():
    policy = StepCost()
    run(policy, 4, lambda b: 1.0 * b, 6)
    assert policy.compute_bound()
    assert policy.batch_limit(1) == 1 and policy.batch_limit(0) == 0


def test_a_median_of_recent_steps_ignores_one_outlier():
    policy = StepCost()
    for t in (0.010, 0.011, 0.5, 0.010, 0.012):
        policy.record(1, t)
    for t in (0.011, 0.012, 0.011):
        policy.record(2, t)
    assert policy.measured()[1] == pytest.approx(0.011) and policy.compute_bound() is False


def test_once_holding_it_batches_again_only_well_below_the_threshold():
    policy = StepCost(recheck_every=1000)
    run(policy, 4, lambda b: 1.0 * b, 6)
    assert policy.compute_bound()
    for _ in range(5):  # a quieter stretch: two now cost 1.8 times one (r = 0.8)
        policy.record(2, 1.8)
    assert policy.marginal_ratio() == pytest.approx(0.8) and policy.compute_bound() is True
    assert StepCost().compute_bound() is None
    for _ in range(5):
        policy.record(2, 1.6)  # r = 0.6: batching would add a quarter or more
    assert policy.compute_bound() is False and policy.batch_limit(4) == 4
