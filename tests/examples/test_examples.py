"""Run each example script as a subprocess with small settings, as written (aicraft),
and, where PyTorch is installed, with its aicraft imports turned into torch's: the
scripts differ from PyTorch scripts only in their import lines.

Each script checks its own result (accuracy, loss, perplexity) and exits non-zero on a
miss; here a run must exit 0 within its time limit and leave the files it saves.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent
REPO = EXAMPLES.parents[1]


# (script, arguments, files the run must leave in its folder)
CASES = {
    # 1024 images: with 512, 2 epochs end between 21% and 61% depending on the seed
    "mnist": ("mnist.py", ["--epochs", "2", "--batch-size", "32", "--train-size", "1024",
                           "--test-size", "256", "--save-model"], ["mnist_cnn.pt"]),
    "rnn_classifier_rnn": ("rnn_classifier.py", ["--model", "RNN", "--epochs", "3", "--train-size", "512"],
                           []),
    "rnn_classifier_lstm": ("rnn_classifier.py", ["--model", "LSTM", "--epochs", "3", "--train-size", "512"],
                            []),
    "vae": ("vae.py", ["--epochs", "2", "--train-size", "512", "--results", "results"],
            ["results/sample_2.png", "results/reconstruction_2.png"]),
    "word_language_model_lstm": ("word_language_model.py", ["--model", "LSTM", "--epochs", "2",
                                                            "--sentences", "400", "--save", "model.pt"],
                                 ["model.pt"]),
    "word_language_model_transformer": ("word_language_model.py", ["--model", "Transformer", "--epochs", "2",
                                                                   "--sentences", "400", "--save", "model.pt"],
                                        ["model.pt"]),
    "regression_lbfgs": ("regression_lbfgs.py", ["--steps", "5"], []),
}


def torch_imports(source):
    """source with its aicraft import lines rewritten to torch's (aicraft.viz is torchvision.utils)."""
    def rewrite(match):
        line = match.group(0).replace("aicraft.viz", "torchvision.utils").replace("aicraft", "torch")
        return line.replace("import torch as torch", "import torch")
    return re.sub(r"^(import|from) aicraft\b.*$", rewrite, source, flags=re.MULTILINE)


def run_script(script, args, outputs, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, str(script)] + args, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, "%s %s exited %d:\n%s\n%s" % (
        script.name, " ".join(args), proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    for name in outputs:
        assert (cwd / name).is_file(), "%s did not write %s" % (script.name, name)


@pytest.mark.parametrize("case", list(CASES))
def test_example_runs_on_aicraft(case, tmp_path):
    script, args, outputs = CASES[case]
    run_script(EXAMPLES / script, args, outputs, tmp_path)


@pytest.mark.parametrize("case", list(CASES))
def test_example_runs_on_torch_with_only_the_imports_changed(case, tmp_path):
    pytest.importorskip("torch")
    script, args, outputs = CASES[case]
    source = (EXAMPLES / script).read_text()
    if "aicraft.viz" in source:
        pytest.importorskip("torchvision")
    ported = torch_imports(source)
    assert "aicraft" not in re.sub(r'""".*?"""', "", ported, flags=re.DOTALL), "an aicraft name outside the imports"
    (tmp_path / script).write_text(ported)
    run_script(tmp_path / script, args, outputs, tmp_path)


def test_torch_imports_rewrites_only_import_lines():
    source = ("import aicraft as torch\nimport aicraft.nn as nn\nfrom aicraft.viz import save_image\n"
              "from aicraft.utils.data import DataLoader\nx = 'aicraft'\n")
    assert torch_imports(source) == ("import torch\nimport torch.nn as nn\nfrom torchvision.utils import save_image\n"
                                     "from torch.utils.data import DataLoader\nx = 'aicraft'\n")
