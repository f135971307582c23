"""ac.export and ac.load_program: a forward pass saved as a program file runs with
the same bits as the eager call (a CNN with batch norm and dropout, several
outputs, int64 inputs, reductions and reshapes); outputs live in the caller's
scope; 1,000 runs leave memory flat; training steps, unrecordable ops, corrupt,
truncated and mismatched files and bad arguments fail clearly."""
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from aicraft import nn
from conftest import c_link_libs

rng = np.random.default_rng(21)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus", "program")
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


def tensor(*shape):
    return ac.tensor(rng.standard_normal(shape).astype(np.float32))


def cnn():
    ac.manual_seed(5)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
        nn.Linear(6 * 2 * 2, 16), nn.GELU(), nn.Dropout(0.5), nn.Linear(16, 3))
    with ac.no_grad():   # running statistics that are not the initial ones
        for x in (tensor(8, 1, 8, 8) for _ in range(3)):
            model(x)
    return model


def eager_eval(model, *inputs):
    model.eval()
    with ac.no_grad():
        out = model(*inputs)
    model.train()
    return out


def test_exported_cnn_runs_with_the_bits_of_the_eager_call(tmp_path):
    model = cnn()
    path = tmp_path / "cnn.acprog"
    ac.export(model, tensor(5, 1, 8, 8), path)
    assert model.training   # recorded in eval mode, its mode restored
    program = ac.load_program(path)
    for _ in range(3):   # other data than the recording call's
        x = tensor(5, 1, 8, 8)
        np.testing.assert_array_equal(program(x).numpy(), eager_eval(model, x).numpy())
    # the file holds the weights of export time: later changes to the model do not reach it
    x = tensor(5, 1, 8, 8)
    before = eager_eval(model, x).numpy()
    with ac.no_grad():
        for p in model.parameters():
            p.mul_(0.5)
    np.testing.assert_array_equal(program(x).numpy(), before)


def test_function_with_several_outputs_and_an_int64_input_round_trips(tmp_path):
    weight = tensor(6, 4)

    def fn(x, target):
        logits = (x @ weight.T).reshape(-1, 6)
        probs = F.softmax(logits, dim=1)
        loss = F.cross_entropy(logits, target, label_smoothing=0.1)
        stats = logits.sum(dim=1, keepdim=True) - logits.mean() * logits.var(dim=0).std()
        return probs.clamp(0.01, 0.9), loss, stats.squeeze(1).exp().permute(0)

    x, target = tensor(2, 5, 4), ac.tensor(rng.integers(0, 6, 10))
    ac.export(fn, (x, target), str(tmp_path / "fn.acprog"))
    program = ac.load_program(str(tmp_path / "fn.acprog"))
    assert (program.n_inputs, program.n_outputs) == (2, 3)
    x, target = tensor(2, 5, 4), ac.tensor(rng.integers(0, 6, 10))
    with ac.no_grad():
        expected = fn(x, target)
    for got, want in zip(program(x, target), expected):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_exported_lstm_returns_the_bits_of_the_eager_call(tmp_path):
    ac.manual_seed(6)
    lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True, batch_first=True, dropout=0.5)
    head = nn.Linear(10, 2)

    def predict(x, h0, c0):   # dropout between the layers is off: export records eval mode
        lstm.eval()
        out, (h_n, c_n) = lstm(x, (h0, c0))
        lstm.train()
        return head(out[:, -1]), (h_n, c_n)
    shapes = ((2, 7, 3), (4, 2, 5), (4, 2, 5))
    ac.export(predict, [tensor(*s) for s in shapes], tmp_path / "lstm.acprog")
    program = ac.load_program(tmp_path / "lstm.acprog")
    assert (program.n_inputs, program.n_outputs) == (3, 3)
    for _ in range(2):
        inputs = [tensor(*s) for s in shapes]
        with ac.no_grad():
            y, (h_n, c_n) = predict(*inputs)
        for got, expected in zip(program(*inputs), (y, h_n, c_n)):
            np.testing.assert_array_equal(got.numpy(), expected.numpy())


def test_outputs_are_new_tensors_in_the_callers_scope(tmp_path):
    ac.export(lambda x: x.relu() * 2, tensor(3, 4), tmp_path / "p.acprog")
    program = ac.load_program(tmp_path / "p.acprog")
    x = tensor(3, 4)
    first = program(x)
    with ac.checkpoint():
        inner = program(x)
        np.testing.assert_array_equal(inner.numpy(), first.numpy())
    with pytest.raises(ac.ScopeError):
        inner.numpy()
    np.testing.assert_array_equal(first.numpy(), np.maximum(x.numpy(), 0) * 2)


def test_thousand_runs_leave_memory_flat(tmp_path):
    model = cnn()
    ac.export(model, tensor(2, 1, 8, 8), tmp_path / "cnn.acprog")
    program = ac.load_program(tmp_path / "cnn.acprog")
    x = tensor(2, 1, 8, 8)
    threads = ac.get_num_threads()
    ac.set_num_threads(1)   # a worker's scratch is cached when it first takes a chunk, which varies
    try:
        for _ in range(20):   # the arena blocks, cached
            with ac.checkpoint():
                program(x)
        before = ac.memory_stats()
        for _ in range(1000):
            with ac.checkpoint():
                program(x)
        after = ac.memory_stats()
    finally:
        ac.set_num_threads(threads)
    for key in ("bytes_in_use", "live_tensors", "live_nodes", "heap_allocations", "arena_reserved"):
        assert after[key] == before[key], key


def test_a_training_step_cannot_be_exported(tmp_path):
    model = nn.Linear(3, 2)

    def step(x):
        with ac.enable_grad():
            loss = model(x).sum()
            loss.backward()
        return loss

    with pytest.raises(ValueError, match=r"node 0 \(set_grad_enabled\): argument 0 is 1, where a program "
                                         r"takes only 0 \(a program runs with grad mode off\)"):
        ac.export(step, tensor(4, 3), tmp_path / "step.acprog")
    assert not (tmp_path / "step.acprog").exists()


def test_a_function_that_turns_grad_off_itself_exports(tmp_path):
    model = nn.Linear(3, 2)

    def predict(x):
        with ac.no_grad():
            return model(x).softmax(1)

    ac.export(predict, tensor(4, 3), tmp_path / "predict.acprog")
    x = tensor(4, 3)
    np.testing.assert_array_equal(ac.load_program(tmp_path / "predict.acprog")(x).numpy(), predict(x).numpy())
    assert ac.is_grad_enabled()


def test_an_op_a_graph_cannot_record_fails_the_export(tmp_path):
    with pytest.raises(RuntimeError, match="rand"):
        ac.export(lambda x: x + ac.rand(2, 2), tensor(2, 2), tmp_path / "r.acprog")


def test_truncated_and_corrupt_files_raise_format_errors(tmp_path):
    path = tmp_path / "cnn.acprog"
    ac.export(cnn(), tensor(1, 1, 8, 8), path)
    data = path.read_bytes()
    bad = tmp_path / "bad.acprog"
    for cut in list(range(0, 120)) + list(range(120, len(data), 331)):
        bad.write_bytes(data[:cut])
        with pytest.raises(ac.FormatError, match="program_load"):
            ac.load_program(bad)
    bad.write_bytes(b"PK\x03\x04" + data[4:])
    with pytest.raises(ac.FormatError, match="not a program file"):
        ac.load_program(bad)
    bad.write_bytes(data + b"\0")
    with pytest.raises(ac.FormatError, match="1 bytes follow the data"):
        ac.load_program(bad)
    with pytest.raises(OSError, match="cannot open"):
        ac.load_program(tmp_path / "missing.acprog")


def test_a_recorded_shape_that_does_not_fit_its_op_is_refused(tmp_path):
    path = tmp_path / "relu.acprog"
    ac.export(lambda x: x.relu(), tensor(2, 3), path)
    data = bytearray(path.read_bytes())
    assert data[72] == 3   # the output buffer's last dim (see libac/src/program.c)
    data[72] = 4
    path.write_bytes(bytes(data))
    with pytest.raises(ac.FormatError, match=r"node 0 \(relu\) gives float32 \(2, 3\) where its buffer "
                                             r"records float32 \(2, 4\)"):
        ac.load_program(path)


def test_a_slice_node_whose_count_misfits_its_arguments_is_refused(tmp_path):
    path = tmp_path / "pick.acprog"
    ac.export(lambda x: x[1], tensor(3, 2), path)
    data = path.read_bytes()
    x = tensor(3, 2)
    np.testing.assert_array_equal(ac.load_program(path)(x).numpy(), x.numpy()[1])
    slices = struct.pack("<5d", 1, 1, 0, 1, 5)   # one slice: start 1, stop 0, step 1, has_start | is_index
    assert data.count(slices) == 1
    path.write_bytes(data.replace(slices, struct.pack("<5d", 2, 1, 0, 1, 5)))
    with pytest.raises(ac.FormatError, match=r"slice.*5 scalar arguments, where the op takes \"s\""):
        ac.load_program(path)


def test_bad_arguments_raise_clear_errors(tmp_path):
    path = tmp_path / "p.acprog"
    with pytest.raises(TypeError, match="fn must be callable"):
        ac.export(3, tensor(2), path)
    with pytest.raises(TypeError, match=r"example_inputs\[1\] is int"):
        ac.export(lambda x, y: x, (tensor(2), 3), path)
    with pytest.raises(TypeError, match="example_inputs must be a tensor or a tuple"):
        ac.export(lambda x: x, np.ones(2), path)
    with pytest.raises(TypeError, match="path must be"):
        ac.export(lambda x: x, tensor(2), 3.5)
    with pytest.raises(TypeError, match="fn returns dict"):
        ac.export(lambda x: {"y": x.relu()}, tensor(2), path)
    with pytest.raises(TypeError, match="fn returns NoneType"):
        ac.export(lambda x: None, tensor(2), path)
    with pytest.raises(TypeError, match="path must be"):
        ac.load_program(None)
    ac.export(lambda x: x.exp(), tensor(2, 3), path)
    program = ac.load_program(path)
    with pytest.raises(TypeError, match="2 inputs given, the program takes 1"):
        program(tensor(2, 3), tensor(2, 3))
    with pytest.raises(TypeError, match="input 0 is ndarray"):
        program(np.ones((2, 3), np.float32))
    with pytest.raises(ac.ShapeError, match=r"input 0 is float32 \(3, 2\)"):
        program(tensor(3, 2))
    with ac.checkpoint():
        dead = tensor(2, 3)
    with pytest.raises(ac.ScopeError):
        program(dead)
    x = tensor(2, 3)
    np.testing.assert_array_equal(program(x).numpy(), x.exp().numpy())   # still usable


def test_the_fuzz_corpus_seed_is_a_program_this_build_loads():
    seeds = sorted(os.listdir(CORPUS))
    assert seeds
    for name in seeds:
        program = ac.load_program(os.path.join(CORPUS, name))
        assert program.n_inputs >= 1


def test_c_run_model_demo_predicts_what_python_predicts(tmp_path):
    """demos/c/run_model.c on the demo CNN, briefly trained on synthetic digits
    (class k: a brighter band at rows 2k to 2k+3) and exported as mnist_cnn.py does:
    the same correct count as the model in Python, on a test set whose last
    batch is short."""
    if CC is None or shutil.which("make") is None:
        pytest.skip("needs a C compiler and make")
    from aicraft.data import transforms
    from aicraft.data.datasets import write_idx
    sys.path.insert(0, os.path.join(ROOT, "demos"))
    try:
        from mnist_cnn import make_model
    finally:
        sys.path.pop(0)
    subprocess.run(["make", "-s", "lib"], cwd=ROOT, check=True, capture_output=True)
    exe = str(tmp_path / "run_model")
    subprocess.run([CC, "-std=c99", "-O2", "-I", os.path.join(ROOT, "libac", "include"),
                    os.path.join(ROOT, "demos", "c", "run_model.c"), os.path.join(ROOT, "build", "libac.a"),
                    *c_link_libs(), "-o", exe], check=True)

    draw = np.random.default_rng(3)   # its own: the count should not depend on the tests before it

    def digits(n):
        labels = draw.integers(0, 10, n).astype(np.uint8)
        images = draw.integers(0, 96, (n, 28, 28)).astype(np.uint8)
        for i, k in enumerate(labels):
            images[i, 2 * k:2 * k + 4] += 40
        to_input = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
        return ac.from_numpy(to_input.batch(images)), images, labels

    ac.manual_seed(8)
    model = make_model()
    opt = ac.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(6):
        x, _, y = digits(32)
        with ac.checkpoint():
            loss = F.cross_entropy(model(x), ac.from_numpy(y).long())
            opt.zero_grad()
            loss.backward()
            opt.step()
    ac.export(model, ac.zeros(100, 1, 28, 28), tmp_path / "cnn.acprog")
    x, images, labels = digits(250)
    write_idx(str(tmp_path / "t10k-images-idx3-ubyte"), images)
    write_idx(str(tmp_path / "t10k-labels-idx1-ubyte"), labels)
    model.eval()
    with ac.no_grad():
        predicted = np.concatenate([model(x[i:i + 100]).argmax(1).numpy() for i in range(0, 250, 100)])
    correct = int((predicted == labels).sum())
    run = subprocess.run([exe, str(tmp_path / "cnn.acprog"), str(tmp_path)], check=True,
                         capture_output=True, text=True)
    assert "test accuracy: %.2f%% (%d/250)" % (100.0 * correct / 250, correct) in run.stdout, run.stdout
    assert 25 < correct < 250   # it learned something, and the count can tell
