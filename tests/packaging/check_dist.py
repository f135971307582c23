"""check_dist.py DIST - install the wheel and the sdist found in DIST, each into a fresh
venv, and run a smoke test with each: import, a training step, zero-copy DLPack with
NumPy, and a C program built against aicraft.get_include() and get_lib() alone.
Run by `make dist-test` (minutes: two venvs, and the sdist compiles libac)."""
import glob
import os
import subprocess
import sys
import tempfile
import venv

SMOKE = r'''
import os, subprocess, sys, tempfile
import numpy as np
import aicraft as ac
from aicraft import nn

assert ac.__file__.startswith(sys.prefix), ac.__file__   # the installed copy
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = ac.optim.SGD(model.parameters(), lr=0.1)
x, y = ac.randn(16, 4), ac.randn(16, 1)
with ac.checkpoint():
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
t = ac.zeros(3)
np.from_dlpack(t)[1] = 5.0
assert t.tolist() == [0.0, 5.0, 0.0]
assert os.path.isfile(os.path.join(ac.get_include(), "ac.h"))
work = tempfile.mkdtemp()
with open(os.path.join(work, "main.c"), "w") as f:
    f.write("#include <ac.h>\n#include <stdio.h>\nint main(void) {\n"
            "    int64_t shape[1] = {3};\n    AcTensor *t = ac_full(shape, 1, 2.0f);\n"
            "    AcTensor *s = ac_sum(t, NULL, 0, 0);\n    printf(\"%g\\n\", s->data[0]);\n"
            "    return 0;\n}\n")
exe = os.path.join(work, "main")
subprocess.run(["cc", "-std=c99", os.path.join(work, "main.c"), "-I", ac.get_include(),
                os.path.join(ac.get_lib(), "libac.a"), "-lm", "-lpthread", "-o", exe], check=True)
assert subprocess.run([exe], capture_output=True, text=True, check=True).stdout == "6\n"
print("smoke test passed:", ac.__version__, ac.__file__)
'''


def check(artifact):
    with tempfile.TemporaryDirectory() as work:
        env_dir = os.path.join(work, "venv")
        venv.create(env_dir, with_pip=True)
        python = os.path.join(env_dir, "bin", "python")
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        artifact], check=True)
        subprocess.run([python, "-c", SMOKE], cwd=work, check=True)


def main(dist):
    wheels = glob.glob(os.path.join(dist, "aicraft-*.whl"))
    sdists = glob.glob(os.path.join(dist, "aicraft-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        sys.exit("check_dist: expected one wheel and one sdist in %s, found %s" % (dist, wheels + sdists))
    for artifact in wheels + sdists:
        print("== %s" % os.path.basename(artifact), flush=True)
        check(os.path.abspath(artifact))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "dist")
