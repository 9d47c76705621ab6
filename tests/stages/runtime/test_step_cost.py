"""StepCost: the batch size a stage steps at, read from the step costs it measured (no clock: costs fed in)."""

from __future__ import annotations

import pytest

from vocalis.stages.runtime.step_cost import StepCost, mean_finish


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
    assert policy.best_size(4) == 1 and policy.marginal_ratio() == pytest.approx(1.0)


def test_an_overhead_bound_cost_batches_every_ready_request():
    policy = StepCost()
    sizes = run(policy, 16, lambda b: 0.002 + 0.0001 * b, 10)
    assert sizes[:4] == [1, 1, 2, 2] and sizes[4:] == [16] * 6
    assert policy.best_size(16) == 16 and policy.marginal_ratio() < 0.1


def test_the_batch_size_is_the_one_that_finishes_the_queue_soonest_on_average():
    """r = c / t(1): one more request costs r of its cost alone. At r = 0.8 batching raises throughput (by ~11 % at
    two) yet every queue finishes later on average than served one after another (the old rule batched there)."""
    assert run(StepCost(), 4, lambda b: 0.2 + 0.8 * b, 6)[4:] == [1, 1]  # r = 0.8
    assert run(StepCost(), 4, lambda b: 0.5 + 0.5 * b, 6)[4:] == [2, 2]  # r = 0.5: pairs
    assert run(StepCost(), 4, lambda b: 0.8 + 0.2 * b, 6)[4:] == [4, 4]  # r = 0.2: all together
    assert run(StepCost(), 4, lambda b: 1.2 * b - 0.1, 6)[4:] == [1, 1]  # r > 1: batching costs throughput too


def test_no_chosen_size_finishes_later_on_average_than_one_after_another():
    for ready in range(1, 12):
        for ratio in (0.0, 0.1, 0.33, 0.5, 0.6, 0.8, 1.0, 3.0):
            policy = StepCost()
            for size in (1, 2):
                for _ in range(2):
                    policy.record(size, 1.0 + ratio * (size - 1))
            best = policy.best_size(ready)
            assert mean_finish(ready, best, ratio) <= mean_finish(ready, 1, ratio) == (ready + 1) / 2


def test_mean_finish_counts_groups_first_come_first_served():
    assert mean_finish(4, 1, 0.5) == pytest.approx(2.5)  # 1, 2, 3, 4 lone times
    assert mean_finish(4, 2, 0.5) == pytest.approx(1.5 * 1.5)  # two groups of two, each step 1.5 times a lone one
    assert mean_finish(3, 2, 0.0) == pytest.approx(4 / 3)  # 1, 1, 2


def test_holding_rechecks_two_at_a_time_so_a_hiccup_cannot_lock_it_in():
    policy = StepCost(recheck_every=4)
    hiccup = {"on": True}

    def cost(b: int) -> float:
        return 0.01 + (0.05 if hiccup["on"] and b == 2 else 0.001 * b)  # a slow stretch while measuring two

    sizes = run(policy, 8, cost, 6)
    assert sizes[-1] == 1 and policy.best_size(8) == 1  # fooled: two looked six times one
    hiccup["on"] = False
    sizes = run(policy, 8, cost, 40)
    assert 2 in sizes and sizes[-1] == 8 and policy.best_size(8) == 8


def test_one_ready_request_always_runs_and_none_steps_nothing():
    policy = StepCost()
    run(policy, 4, lambda b: 1.0 * b, 6)
    assert policy.best_size(4) == 1
    assert policy.batch_limit(1) == 1 and policy.batch_limit(0) == 0


def test_a_median_of_recent_steps_ignores_one_outlier():
    policy = StepCost()
    for t in (0.010, 0.011, 0.5, 0.010, 0.012):
        policy.record(1, t)
    for t in (0.011, 0.012, 0.011):
        policy.record(2, t)
    assert policy.measured()[1] == pytest.approx(0.011) and policy.best_size(4) == 4


def test_it_leaves_its_last_choice_only_for_a_clearly_better_one():
    policy = StepCost(recheck_every=1000)
    run(policy, 4, lambda b: 1.0 * b, 6)
    assert policy.best_size(4) == 1
    for _ in range(5):  # a quieter stretch: two now cost 1.55 times one (r = 0.55): pairs only 7 % sooner
        policy.record(2, 1.55)
    assert mean_finish(4, 2, 0.55) < mean_finish(4, 1, 0.55) and policy.best_size(4) == 1
    assert StepCost().best_size(4) is None
    for _ in range(5):
        policy.record(2, 1.2)  # r = 0.2: all four together finish 36 % sooner
    assert policy.best_size(4) == 4 and policy.batch_limit(4) == 4
