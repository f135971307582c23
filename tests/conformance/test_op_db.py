"""test_op_db.py - one test per OpInfo of PyTorch's op_db, torch as the oracle.

pass: every float32/int64/bool sample matches torch, forward and backward.
wrong (aicraft returns without an error but differs from torch): FAILS, always.
Listed in expected.txt (partial, xfail, missing): xfail with its reason, not strict, so a
fix shows as XPASS; anything else that does not pass (a regression) FAILS, and so does a
listed OpInfo where fewer samples pass than the list says.
Out of scope (private, sparse, no float32/int64/bool sample): skipped.
Regenerate expected.txt with `python tests/conformance/run.py --write`.
"""
import importlib.util
import os
import sys

import pytest

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("expecttest") is None:
    pytest.skip("the conformance run needs torch and expecttest (tests/requirements.txt)",
                allow_module_level=True)


def _load_harness():
    """harness.py as one module object shared by conftest.py and test_op_db.py."""
    name = "aicraft_conformance_harness"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


harness = _load_harness()

_OPS = [tuple(o) for o in harness.list_ops()["ops"]]
_EXPECTED = harness.read_expected()


class NotConformant(AssertionError):
    """The OpInfo raises in aicraft for some or all samples (or has no counterpart)."""


def _param(name, variant):
    marks = []
    if (name, variant) in _EXPECTED:
        status, _passed, _compared, reason = _EXPECTED[(name, variant)]
        # raises=: only "not conformant" is expected; a wrong result still fails.
        marks.append(pytest.mark.xfail(reason="%s: %s" % (status, reason), strict=False, raises=NotConformant))
    return pytest.param(name, variant, marks=marks, id=name + ("." + variant if variant else ""))


@pytest.mark.parametrize("name,variant", [_param(n, v) for n, v in _OPS])
def test_op_db(name, variant):
    r = harness.session_results()[(name, variant)]
    if r["status"] == "wrong":
        pytest.fail("silently wrong: %s" % r["reason"], pytrace=False)
    if r["status"] == "out":
        pytest.skip("out of scope: %s" % r["reason"])
    listed = _EXPECTED.get((name, variant))
    if listed and r["status"] != "pass" and r["samples"] == listed[2] and r["passed"] < listed[1]:
        pytest.fail("regression: %d/%d samples pass, expected.txt says %d/%d: %s" % (
            r["passed"], r["samples"], listed[1], listed[2], r["reason"]), pytrace=False)
    if r["status"] != "pass":
        raise NotConformant("%s (%d/%d samples pass): %s" % (r["status"], r["passed"], r["samples"], r["reason"]))
