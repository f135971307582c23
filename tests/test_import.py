"""`import aicraft` stays light: NumPy and the modules that need it (data, utils,
viz) load on first use, and everything still works once they do. Each check runs
in a fresh interpreter, since this one has long imported NumPy."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(code):
    env = dict(os.environ, PYTHONPATH=ROOT)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_import_loads_neither_numpy_nor_the_data_modules():
    loaded = run("import sys, aicraft as ac\n"
                 "print(*sorted(m for m in ('numpy', 'aicraft.data', 'aicraft.utils', 'aicraft.viz')"
                 " if m in sys.modules))")
    assert loaded == []


def test_a_model_runs_without_numpy():
    out = run("import sys, aicraft as ac\n"
              "net = ac.nn.Sequential(ac.nn.Linear(4, 3), ac.nn.ReLU(), ac.nn.Linear(3, 2))\n"
              "opt = ac.optim.SGD(net.parameters(), lr=0.1)\n"
              "with ac.checkpoint():\n"
              "    loss = net(ac.ones(5, 4)).sum()\n"
              "    loss.backward()\n"
              "    opt.step()\n"
              "    print(type(loss.item()).__name__, 'numpy' in sys.modules)")
    assert out == ["float", "False"]


def test_a_dtype_compared_with_its_own_name_needs_no_numpy():
    out = run("import sys, aicraft as ac\n"
              "print(ac.float32 == 'float32', ac.ones(2).dtype == 'float32', 'numpy' in sys.modules)\n"
              "print(ac.float32 == 'int64', ac.float32 == 'f4', ac.float32 == [1])")
    assert out == ["True", "True", "False", "False", "True", "False"]


def test_numpy_and_the_lazy_modules_load_on_first_use():
    out = run("import sys, aicraft as ac\n"
              "t = ac.tensor([[1, 2], [3, 4]])\n"
              "print('numpy' in sys.modules, t.dtype, t.numpy().sum())\n"
              "print(ac.data.DataLoader.__name__, ac.utils.data.Dataset.__name__, ac.viz.to_dot.__name__)\n"
              "print('data' in dir(ac), ac.float32 == 'float32', ac.int64 == sys.modules['numpy'].int64)")
    assert out == ["True", "aicraft.int64", "10", "DataLoader", "Dataset", "to_dot", "True", "True", "True"]


def test_star_import_and_unknown_names():
    out = run("from aicraft import *\n"
              "import aicraft\n"
              "print(data.__name__, viz.__name__, utils.__name__)\n"
              "try:\n"
              "    aicraft.no_such_name\n"
              "except AttributeError as e:\n"
              "    print('AttributeError')")
    assert out == ["aicraft.data", "aicraft.viz", "aicraft.utils", "AttributeError"]
