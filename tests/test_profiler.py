"""ac.profiler: the table and trace of a known program (op names, call counts,
nesting, scopes, FLOPs), Chrome trace JSON that parses and follows the trace-event
format, AC_PROFILE for a whole Python and C run, and bad arguments."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import aicraft as ac
from aicraft import nn
from conftest import c_link_libs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
STEPS = 3


def run_known_program(record_shapes=False):
    """STEPS training steps of Linear(5, 6) -> ReLU -> Linear(6, 3), each in a "step" range."""
    ac.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 3))
    opt = ac.optim.SGD(model.parameters(), lr=0.1)
    x, y = ac.randn(8, 5), ac.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    with ac.profiler.profile(record_shapes=record_shapes) as prof:
        for _ in range(STEPS):
            with ac.checkpoint(), ac.profiler.record_function("step"):
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
    return prof


def test_events_name_count_and_nest_the_ops():
    prof = run_known_program()
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["step"].count == STEPS
    assert rows["linear"].count == 2 * STEPS
    assert rows["relu"].count == STEPS and rows["cross_entropy"].count == STEPS
    assert rows["backward"].count == STEPS
    assert rows["linear_backward"].count == 2 * STEPS
    assert rows["relu_backward"].count == STEPS
    assert rows["sgd_step"].count == 4 * STEPS     # two weights, two biases
    main = [e for e in prof.events() if e.thread == 0]
    by_kind = {e.name: e for e in main}
    assert by_kind["step"].kind == "range" and by_kind["step"].depth == 0
    assert by_kind["linear"].kind == "op" and by_kind["linear"].depth == 1
    assert by_kind["linear"].scope == "step"
    assert by_kind["linear_backward"].kind == "backward" and by_kind["linear_backward"].depth == 2
    # self time is the time not in nested events; a step holds all its ops
    for e in main:
        assert 0 <= e.self_us <= e.duration_us
    steps = [e for e in main if e.name == "step"]
    for op in (e for e in main if e.depth == 1):
        assert any(s.start_us <= op.start_us and op.start_us + op.duration_us
                   <= s.start_us + s.duration_us + 1e-3 for s in steps)
    assert rows["backward"].self_cpu_time_total < rows["backward"].cpu_time_total


def test_flops_bytes_and_shapes():
    prof = run_known_program(record_shapes=True)
    rows = {(r.key, r.input_shapes): r for r in prof.key_averages(group_by_input_shape=True)}
    first = rows[("linear", "[[8, 5], [6, 5], [6]]")]
    assert first.count == STEPS
    assert first.flops == STEPS * 2 * 8 * 6 * 5
    assert first.cpu_memory_usage >= STEPS * 8 * 6 * 4      # its output, at least
    second = rows[("linear", "[[8, 6], [3, 6], [3]]")]
    assert second.flops == STEPS * 2 * 8 * 3 * 6
    # backward: the weight's product, and (past the first layer) the input's
    backward = sum(r.flops for (key, _), r in rows.items() if key == "linear_backward")
    assert backward == STEPS * (2 * 8 * 6 * 5 + 2 * (2 * 8 * 3 * 6))
    assert rows[("relu", "[[8, 6]]")].flops == 0


def test_scopes_group_events():
    prof = run_known_program()
    rows = {(r.key, r.scope): r for r in prof.key_averages(group_by_scope=True)}
    assert rows[("linear", "step")].count == 2 * STEPS
    assert rows[("step", "")].count == STEPS


def test_table_sorts_and_limits():
    prof = run_known_program()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=3)
    lines = table.splitlines()
    assert lines[1].split()[:3] == ["Name", "Self", "CPU"]
    assert len(lines) == 3 + 3 + 1 + 1            # rules and header, 3 rows, rule, total
    assert lines[-1].startswith("Self CPU time total: ")
    ordered = sorted(prof.key_averages(), key=lambda r: r.self_cpu_time_total, reverse=True)
    assert [line.split()[0] for line in lines[3:6]] == [r.key for r in ordered[:3]]
    by_count = prof.key_averages().table(sort_by="count", row_limit=1)
    assert by_count.splitlines()[3].split()[0] in ("linear", "linear_backward", "sgd_step")


def check_trace(trace, ops):
    """trace follows the trace-event format: complete events nest per thread."""
    assert isinstance(trace["traceEvents"], list)
    complete = []
    for e in trace["traceEvents"]:
        assert isinstance(e["name"], str) and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert e["ph"] in ("X", "M")
        if e["ph"] == "M":
            assert e["name"] == "thread_name" and isinstance(e["args"]["name"], str)
            continue
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0
        assert e["cat"] in ("op", "backward", "task", "range")
        complete.append(e)
    names = [e["name"] for e in complete]
    for op, count in ops.items():
        assert names.count(op) == count, op
    for tid in {e["tid"] for e in complete}:
        stack = []
        for e in sorted((e for e in complete if e["tid"] == tid), key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            assert not stack or e["ts"] + e["dur"] <= stack[-1] + 2e-3   # inside, or after
            stack.append(e["ts"] + e["dur"])


def test_chrome_trace_parses_and_follows_the_format(tmp_path):
    prof = run_known_program()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    check_trace(trace, {"step": STEPS, "linear": 2 * STEPS, "linear_backward": 2 * STEPS,
                        "backward": STEPS})
    linear = next(e for e in trace["traceEvents"] if e["name"] == "linear")
    assert linear["args"]["flops"] in (2 * 8 * 6 * 5, 2 * 8 * 3 * 6)
    assert linear["args"]["scope"] == "step"


def test_ac_profile_traces_a_whole_python_run(tmp_path):
    path = tmp_path / "run.json"
    script = ("import aicraft as ac\n"
              "x = ac.randn(4, 3, requires_grad=True)\n"
              "(x @ x.T).relu().sum().backward()\n")
    env = dict(os.environ, AC_PROFILE=str(path), PYTHONPATH=ROOT)
    subprocess.run([sys.executable, "-c", script], env=env, check=True)
    check_trace(json.loads(path.read_text()), {"matmul": 1, "relu": 1, "sum": 1, "backward": 1,
                                                "matmul_backward": 1})


def test_ac_profile_traces_a_whole_c_run(tmp_path):
    if CC is None or shutil.which("make") is None:
        pytest.skip("needs a C compiler and make")
    subprocess.run(["make", "-s", "lib"], cwd=ROOT, check=True, capture_output=True)
    exe = str(tmp_path / "mlp_forward")
    subprocess.run([CC, "-std=c99", "-O2", "-I", os.path.join(ROOT, "libac", "include"),
                    os.path.join(ROOT, "tests", "interop", "mlp_forward.c"),
                    os.path.join(ROOT, "build", "libac.a"), *c_link_libs(), "-o", exe],
                   check=True)
    model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 5))
    ac.save(model.state_dict(), str(tmp_path / "mlp.safetensors"))
    np.zeros((7, 20), np.float32).tofile(tmp_path / "x.f32")
    env = dict(os.environ, AC_PROFILE=str(tmp_path / "c.json"))
    subprocess.run([exe, str(tmp_path / "mlp.safetensors"), str(tmp_path / "x.f32"), "7", "20",
                    str(tmp_path / "y.f32")], env=env, check=True)
    check_trace(json.loads((tmp_path / "c.json").read_text()), {"linear": 2, "relu": 1})


def test_compiled_steps_are_profiled_as_their_ops():
    model = nn.Linear(4, 2)
    step = ac.compile(lambda x: model(x).relu())
    x = ac.randn(3, 4)
    step(x)                                           # traced
    with ac.profiler.profile() as prof:
        step(x)                                       # replayed
    rows = {r.key: r.count for r in prof.key_averages()}
    assert rows.get("linear") == 1 and rows.get("relu") == 1


def test_record_function_outside_a_profile_does_nothing():
    @ac.profiler.record_function("helper")
    def helper():
        return ac.ones(2).exp()
    helper()
    with ac.profiler.profile() as prof:
        helper()
    assert [(e.name, e.depth) for e in prof.events()] == [("helper", 0), ("exp", 1)]


def test_an_exception_stops_the_profile():
    with pytest.raises(ac.ShapeError):
        with ac.profiler.profile() as prof:
            ac.ones(2, 3) @ ac.ones(2, 3)
    assert [e.name for e in prof.events()] == ["matmul"]
    with ac.profiler.profile():                       # a new one starts
        pass


def test_bad_arguments():
    with pytest.raises(TypeError, match="record_shapes"):
        ac.profiler.profile(record_shapes="yes")
    with pytest.raises(TypeError, match="record_function"):
        ac.profiler.record_function(3)
    with pytest.raises(RuntimeError, match="no results"):
        ac.profiler.profile().events()
    with ac.profiler.profile() as prof:
        with pytest.raises(RuntimeError, match="already running"):
            ac.profiler.profile().start()
    with pytest.raises(ValueError, match="record_shapes=True"):
        prof.key_averages(group_by_input_shape=True)
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="self_cuda_time_total")
    with pytest.raises(RuntimeError, match="not running"):
        ac.profiler.profile().stop()
    assert (ac.ones(2) + 1).tolist() == [2.0, 2.0]    # still usable


def test_pytorch_style_arguments_are_accepted():
    from aicraft.profiler import ProfilerActivity
    x = ac.randn(4, 4)
    with ac.profiler.profile(activities=[ProfilerActivity.CPU], profile_memory=True, with_flops=True) as prof:
        (x @ x).sum()
    assert "matmul" in prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)
    with pytest.raises(ac.DeviceError):
        ac.profiler.profile(activities=[ProfilerActivity.CUDA])
    with pytest.raises(TypeError):
        ac.profiler.profile(activities=["cpu"])
    with pytest.raises(TypeError):
        ac.profiler.profile(profile_memory=1)
