"""An idle stage worker lets its OpenMP team go, and so does the thread that built the pipeline: a team thread left
behind would make every other stage's parallel ops sleep and wake (stages/runtime/openmp_teams.py). Counted as OS
threads of a fresh process, where nothing else starts or ends threads."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import json, os, time
    import torch
    from tests.stages.chunk_feed import NullOutput
    from vocalis.stages.runtime.openmp_teams import release_team
    from vocalis.stages.runtime.pipeline import Pipeline
    from vocalis.stages.runtime.request import SynthesisRequest
    from vocalis.stages.runtime.request_table import RequestTable
    from vocalis.stages.runtime.stage import StageItem

    def threads():
        return len(os.listdir("/proc/self/task"))

    def settled(expected):  # a released team thread exits on its own schedule
        deadline = time.monotonic() + 5
        while threads() != expected and time.monotonic() < deadline:
            time.sleep(0.01)
        return threads()

    def parallel_op():
        return torch.randn(512, 512) @ torch.randn(512, 512)

    class Multiply(RequestTable):
        name = "multiply"
        def __init__(self):
            super().__init__()
            self.new = []
        def add(self, item):
            self.new.append(item.request)
        def has_work(self):
            return bool(self.new)
        def step(self):
            parallel_op()
            out = [StageItem(r, payload=None, finished=True) for r in self.new]
            self.new.clear()
            return out

    out = {"runtime": release_team(), "torch_threads": torch.get_num_threads()}
    base = threads()
    parallel_op()  # the main thread's team, as a load leaves it
    out["main_team"] = threads() - base
    pipeline = Pipeline([Multiply()])  # one worker thread more; the main thread's team let go
    out["after_start"] = settled(base + 1) - base
    request = SynthesisRequest(text="x", stage_input=None, output=NullOutput())
    pipeline.submit(request)
    deadline = time.monotonic() + 5
    while request.finished_at is None and time.monotonic() < deadline:
        time.sleep(0.01)
    out["request_finished"] = request.finished_at is not None and request.error is None
    out["after_idle"] = settled(base + 1) - base  # the worker stepped (a team), then went idle (let it go)
    pipeline.close()
    print(json.dumps(out))
""")


def _child() -> dict:
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.unit
def test_idle_workers_and_the_building_thread_let_their_openmp_teams_go():
    pytest.importorskip("torch")
    out = _child()
    if not out["runtime"] or out["torch_threads"] < 2:
        pytest.skip(f"no GNU OpenMP team here (runtime {out['runtime']}, torch threads {out['torch_threads']})")
    assert out["main_team"] == out["torch_threads"] - 1  # the parallel op did start a team on the main thread
    assert out["request_finished"]
    assert out["after_start"] == 1, "the main thread's team outlived the pipeline's start"
    assert out["after_idle"] == 1, "the idle worker kept its team"


@pytest.mark.unit
def test_a_runtime_looked_for_before_torch_is_found_once_torch_is_loaded():
    pytest.importorskip("torch")
    code = ("import sys; from vocalis.stages.runtime.openmp_teams import release_team; before = release_team(); "
            "assert 'torch' not in sys.modules; import torch; print(before, release_team())")
    before, after = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                                   check=True).stdout.split()
    assert before == "False"  # a Piper-only server: nothing to release
    assert after == str(_child()["runtime"])  # the runtime torch brings, as the other test found it
