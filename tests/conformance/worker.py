"""worker.py - one process that runs op_db's OpInfos against aicraft, torch as the oracle.

harness.py starts it as `python worker.py` and feeds it op_db indices on stdin, one a line;
it answers one JSON line each (name, variant, status, reason, passed, samples, seconds).
For each OpInfo it finds aicraft's counterpart, converts the OpInfo's own float32/int64/bool
CPU samples through NumPy, runs both libraries and compares outputs, inputs after the call
and gradients. README.md in this folder says what is compared and what stays out.
"""
import json
import os
import re
import sys
import time
import types
import warnings

DTYPE_NAMES = ("float32", "int64", "bool")
SELFTEST = os.environ.get("AC_CONFORMANCE_SELFTEST") == "1"
# Words in the reason an OpInfo gives for skipping torch's own CPU-vs-device comparison
# that mean its values cannot be compared between two runs (random or uninitialized).
NOT_COMPARABLE = ("non-deterministic", "not comparable")


class Missing(AttributeError):
    """aicraft has no counterpart for something the OpInfo calls."""


class Unconvertible(TypeError):
    """A sample holds something aicraft cannot represent (a dtype, a layout, an object)."""


_MISSING_RE = (re.compile(r"module '(aicraft[\w.]*)' has no attribute '(\w+)'"),
               re.compile(r"'Tensor' object has no attribute '(\w+)'"),
               re.compile(r"type object 'Tensor' has no attribute '(\w+)'"))


def missing_name(exc):
    """'aicraft.x' or 'Tensor.x' when exc says aicraft lacks an attribute, else None."""
    if isinstance(exc, Missing):
        return str(exc)
    if not isinstance(exc, AttributeError):
        return None
    msg = str(exc)
    m = _MISSING_RE[0].search(msg)
    if m:
        return "%s.%s" % m.groups()
    for rx in _MISSING_RE[1:]:
        m = rx.search(msg)
        if m:
            return "Tensor.%s" % m.group(1)
    return None


class _MissingModule:
    """Stands for torch.<sub> where aicraft has no <sub>: any attribute is Missing."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        raise Missing("%s.%s" % (self._name, attr))


class _TopLevel:
    """aicraft as op_db's code sees `torch`: aicraft.<name>, else the Tensor method
    (torch.zero_(x) -> x.zero_()), the same rule as for OpInfo names."""

    def __init__(self, ac, torch):
        self._ac, self._torch = ac, torch

    def __getattr__(self, name):
        try:
            return getattr(self._ac, name)
        except AttributeError:
            if isinstance(getattr(self._torch, name, None), types.ModuleType):
                raise Missing("aicraft.%s" % name) from None
            if not hasattr(self._ac.Tensor, name):
                raise Missing("aicraft.%s or Tensor.%s" % (name, name)) from None
            ac = self._ac

            def method(x, *args, **kwargs):
                if not isinstance(x, ac.Tensor):  # torch.polygamma(n, x): not a method call
                    raise Missing("aicraft.%s" % name)
                return getattr(x, name)(*args, **kwargs)
            return method


def _call(fn, *args, **kwargs):
    return fn(*args, **kwargs)


class Worker:
    def __init__(self):
        warnings.simplefilter("ignore")
        import numpy as np
        import torch
        from torch.testing._internal.common_methods_invocations import op_db
        from torch.testing._internal import common_device_type as cdt
        import aicraft as ac
        torch.set_num_threads(1)
        # torch.manual_seed also seeds every lazily-initialised device, recording a stack
        # trace each time (2.5 ms); op_db's sample iterator seeds before every sample. This
        # run is CPU-only: seed the CPU generator, random and NumPy, as set_rng_seed does.
        from torch.testing._internal import common_utils
        common_utils.set_rng_seed = lambda seed=None: self.seed(common_utils.SEED if seed is None else seed)
        self.np, self.torch, self.ac, self.op_db, self.cdt = np, torch, ac, op_db, cdt
        self.torch_dtypes = [getattr(torch, n) for n in DTYPE_NAMES]
        self._globals = {}
        self.notes = {}  # leniencies used on the current OpInfo: refereed, ties

    def seed(self, seed):
        import random
        self.torch.default_generator.manual_seed(seed)
        random.seed(seed)
        self.np.random.seed(seed)

    # -- resolution -----------------------------------------------------------------

    def ac_module(self, torch_name):
        """aicraft's module for torch's module name ('torch.nn.functional' -> aicraft.nn.functional)."""
        obj = self.ac
        parts = torch_name.split(".")[1:]
        for i, p in enumerate(parts):
            nxt = getattr(obj, p, None)
            if not isinstance(nxt, (types.ModuleType, _MissingModule)):
                return _MissingModule("aicraft." + ".".join(parts[:i + 1]))
            obj = nxt
        return obj

    def rebind(self, fn):
        """fn with every torch module in its globals replaced by aicraft's counterpart.

        op_db writes some OpInfos as lambdas or helpers that reorder arguments or call a
        method (`lambda self, cond, other: torch.where(cond, self, other)`, `lambda x: x.T`);
        running that same code over aicraft keeps the OpInfo's own argument structure.
        """
        key = id(fn.__globals__)
        g = self._globals.get(key)
        if g is None:
            g = dict(fn.__globals__)
            for k, v in fn.__globals__.items():
                if isinstance(v, types.ModuleType) and v.__name__ == "torch":
                    g[k] = _TopLevel(self.ac, self.torch)
                elif isinstance(v, types.ModuleType) and v.__name__.startswith("torch."):
                    g[k] = self.ac_module(v.__name__)
            self._globals[key] = g
        return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)

    @staticmethod
    def unseeded(fn):
        """fn (op_db's own code) with wrapper_set_seed calling straight through, so two
        runs under different seeds show whether its output is random."""
        g = dict(fn.__globals__, wrapper_set_seed=_call)
        return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)

    @staticmethod
    def _is_function(obj):
        return callable(obj) and not isinstance(obj, (type, types.ModuleType)) and not type(obj).__name__ == "dtype"

    def resolve(self, op):
        """(callable over aicraft values, description) or (None, 'no ...') for op."""
        fn = op.op
        if isinstance(fn, types.FunctionType) and (fn.__module__ or "").startswith("torch.testing"):
            return self.rebind(fn), "op_db's own code"
        parts = op.name.split(".")
        if len(parts) > 1:
            mod = self.ac_module("torch." + ".".join(parts[:-1]))
            if isinstance(mod, _MissingModule):
                return None, "no %s" % mod._name
            f = getattr(mod, parts[-1], None)
            if self._is_function(f):
                return f, "aicraft.%s" % op.name
            return None, "no aicraft.%s" % op.name
        name = parts[0]
        if not (name.startswith("__") and name.endswith("__")):
            f = getattr(self.ac, name, None)
            if self._is_function(f):
                return f, "aicraft.%s" % name
        m = getattr(self.ac.Tensor, name, None)
        if m is not None and m is not getattr(object, name, None):
            return (lambda x, *args, **kwargs: getattr(x, name)(*args, **kwargs)), "Tensor.%s" % name
        if name.startswith("__"):
            return None, "no Tensor.%s" % name
        return None, "no aicraft.%s or Tensor.%s" % (name, name)

    def selftest(self, op):
        """A stand-in for aicraft that is torch itself (AC_CONFORMANCE_SELFTEST=1): converts
        aicraft values back to torch, runs the OpInfo, converts the result to aicraft. Every
        forward comparison should then pass; it checks the harness and times a run in
        which every OpInfo has a counterpart. Gradients are not compared."""
        torch, ac = self.torch, self.ac
        pairs = []

        def back(x):
            if isinstance(x, ac.Tensor):
                t = torch.from_numpy(self.np.array(self.ac_numpy(x)))
                pairs.append((t, x))
                return t
            if isinstance(x, (list, tuple)):
                vals = [back(v) for v in x]
                return type(x)(*vals) if hasattr(x, "_fields") else type(x)(vals)
            if isinstance(x, dict):
                return {k: back(v) for k, v in x.items()}
            if isinstance(x, ac.dtype):
                return getattr(torch, str(x).split(".")[-1])
            return x

        def run(*args, **kwargs):
            del pairs[:]
            with torch.no_grad():
                out = op(*back(args), **back(kwargs))
            with ac.no_grad():  # what torch changed in place, change in aicraft's inputs too
                for t, a in pairs:
                    if t.shape == tuple(a.shape):
                        a.copy_(ac.tensor(t.numpy()))
            return self.to_ac(out, {})
        return run, "torch itself"

    def tolerance(self, op):
        """(rtol, atol) for float32: assert_close's defaults, loosened by the loosest
        toleranceOverride/precisionOverride for float32 among the OpInfo's decorators."""
        rtol, atol = 1.3e-6, 1e-5
        f32 = self.torch.float32
        stack = list(op.decorators)
        while stack:
            d = stack.pop()
            if hasattr(d, "decorators"):
                stack.extend(d.decorators)
            elif isinstance(d, self.cdt.toleranceOverride) and f32 in d.d:
                atol, rtol = max(atol, d.d[f32].atol), max(rtol, d.d[f32].rtol)
            elif isinstance(d, self.cdt.precisionOverride) and f32 in d.d:
                atol = max(atol, d.d[f32])
        return rtol, atol

    @staticmethod
    def seeded(op):
        """True when the OpInfo's own code seeds torch's generator (wrapper_set_seed):
        its output may be random (dropout, randn...) or not (item, dropout with p=0)."""
        codes = [getattr(op.op, "__code__", None)]
        while codes:
            c = codes.pop()
            if c is None:
                continue
            if "wrapper_set_seed" in c.co_names:
                return True
            codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        return False

    @staticmethod
    def values_comparable(op):
        """False where the OpInfo skips torch's own CPU comparison because its values are
        random or uninitialized (empty, cauchy_...). Such OpInfos compare dtypes and shapes."""
        for d in op.decorators:
            if getattr(d, "cls_name", None) != "TestCommon" or d.device_type not in (None, "cpu"):
                continue
            for dec in getattr(d, "decorators", ()):
                for cell in getattr(dec, "__closure__", None) or ():
                    v = cell.cell_contents
                    if isinstance(v, str) and any(w in v for w in NOT_COMPARABLE):
                        return False
        return True

    # -- conversion -----------------------------------------------------------------

    def to_ac(self, x, memo):
        """x with torch tensors/dtypes/devices replaced by aicraft's. memo: id(torch tensor)
        -> (torch tensor, aicraft tensor, NumPy copy of its values before any op ran), so
        one torch tensor used twice is one aicraft tensor."""
        torch, ac = self.torch, self.ac
        if isinstance(x, torch.Tensor):
            if id(x) in memo:
                return memo[id(x)][1]
            if x.layout != torch.strided:
                raise Unconvertible("%s tensors are out of scope" % x.layout)
            name = str(x.dtype).split(".")[-1]
            dt = getattr(ac, name, None)
            if dt is None:
                raise Unconvertible("aicraft has no dtype %s" % name)
            arr = x.detach().resolve_conj().resolve_neg().numpy().copy()
            t = ac.tensor(arr, dtype=dt, requires_grad=x.requires_grad)
            got = str(t.dtype).split(".")[-1]
            if got != name:
                raise Unconvertible("aicraft.tensor(dtype=%s) gives %s" % (name, got))
            memo[id(x)] = (x, t, arr)
            return t
        if isinstance(x, torch.dtype):
            name = str(x).split(".")[-1]
            dt = getattr(ac, name, None)
            if dt is None:
                raise Unconvertible("aicraft has no dtype %s" % name)
            return dt
        if isinstance(x, torch.device):
            return str(x)
        if isinstance(x, torch.Size):
            return tuple(int(v) for v in x)
        if isinstance(x, (list, tuple)):
            vals = [self.to_ac(v, memo) for v in x]
            return type(x)(*vals) if hasattr(x, "_fields") else type(x)(vals)
        if isinstance(x, dict):
            return {k: self.to_ac(v, memo) for k, v in x.items()}
        if isinstance(x, slice):
            return slice(self.to_ac(x.start, memo), self.to_ac(x.stop, memo), self.to_ac(x.step, memo))
        if x is None or x is Ellipsis or isinstance(x, (bool, int, float, str, self.np.ndarray, self.np.generic)):
            return x
        if isinstance(x, (torch.memory_format, torch.layout)):
            name = str(x).split(".")[-1]  # torch.preserve_format -> aicraft.preserve_format
            if not hasattr(ac, name):
                raise Unconvertible("aicraft has no %s (torch.%s)" % (name, name))
            return getattr(ac, name)
        if isinstance(x, torch.Generator):
            raise Unconvertible("aicraft has no Generator")
        if callable(x):
            return self.callable_to_ac(x)
        raise Unconvertible("cannot convert %s" % type(x).__name__)

    def callable_to_ac(self, fn):
        """A function a sample passes (a loss's distance_function...): op_db's own code
        rebound to aicraft, torch's functions by name, a torch module refused."""
        if isinstance(fn, self.torch.nn.Module):
            raise Unconvertible("the sample passes a torch.nn.%s module" % type(fn).__name__)
        module = getattr(fn, "__module__", None) or ""
        if isinstance(fn, types.FunctionType) and module.startswith("torch.testing"):
            return self.rebind(fn)
        if module == "torch" or module.startswith("torch."):
            owner = _TopLevel(self.ac, self.torch) if module == "torch" else self.ac_module(module)
            try:
                return getattr(owner, fn.__name__)
            except AttributeError:
                raise Unconvertible("the sample passes %s.%s, aicraft has none" % (module, fn.__name__)) from None
        return fn

    def ac_numpy(self, t):
        if getattr(t, "requires_grad", False):
            t = t.detach()
        return self.np.asarray(t.numpy())

    # -- comparison -----------------------------------------------------------------

    def compare(self, expected, actual, tol, values, where="output", ref=None, sample_input=None,
                field=None):
        """None when actual (aicraft) matches expected (torch), else what differs.

        ref: a zero-argument callable giving torch's float64 result at the same place
        (the referee for float32 values, see refereed()), or None.
        """
        torch, ac = self.torch, self.ac
        if isinstance(expected, torch.Tensor):
            if not isinstance(actual, ac.Tensor):
                return "%s: %s where torch returns a Tensor" % (where, type(actual).__name__)
            tdt, adt = str(expected.dtype).split(".")[-1], str(actual.dtype).split(".")[-1]
            if tdt != adt:
                return "%s: dtype %s, torch %s" % (where, adt, tdt)
            if tuple(actual.shape) != tuple(expected.shape):
                return "%s: shape %s, torch %s" % (where, tuple(actual.shape), tuple(expected.shape))
            if not values or expected.numel() == 0 or expected.layout != torch.strided:
                return None
            got = torch.from_numpy(self.np.array(self.ac_numpy(actual), order="C"))
            exp = expected.detach().resolve_conj().resolve_neg()
            rtol, atol = tol if exp.is_floating_point() else (0.0, 0.0)
            try:
                torch.testing.assert_close(got, exp, rtol=rtol, atol=atol, equal_nan=True,
                                           check_dtype=False, check_device=False, check_stride=False)
                return None
            except AssertionError as e:
                lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
                detail = "; ".join(ln for ln in lines if ln.startswith(("Mismatched", "Greatest")))
            if exp.dtype == torch.float32 and ref is not None and self.refereed(got, exp, ref, tol):
                self.notes["refereed"] = self.notes.get("refereed", 0) + 1
                return None
            if exp.dtype == torch.int64 and self.same_selection(sample_input, exp, got, field):
                self.notes["ties"] = self.notes.get("ties", 0) + 1
                return None
            return "%s: values differ (%s)" % (where, detail or lines[0])
        if isinstance(expected, (list, tuple)):
            if not isinstance(actual, (list, tuple)) or isinstance(actual, ac.Tensor):
                return "%s: %s where torch returns %s" % (where, type(actual).__name__, type(expected).__name__)
            if len(actual) != len(expected):
                return "%s: %d items, torch %d" % (where, len(actual), len(expected))
            # field names: a namedtuple's _fields, a torch.return_types structseq's __match_args__
            fields = getattr(expected, "_fields", None) or getattr(type(expected), "__match_args__", None)
            for i, (e, a) in enumerate(zip(expected, actual)):
                sub = (lambda i=i: ref()[i]) if ref is not None else None
                r = self.compare(e, a, tol, values, "%s[%d]" % (where, i), sub, sample_input,
                                 fields[i] if fields else None)
                if r:
                    return r
            return None
        if isinstance(expected, torch.dtype):
            return None if str(expected).split(".")[-1] == str(actual).split(".")[-1] else \
                "%s: %s, torch %s" % (where, actual, expected)
        if isinstance(expected, (bool, int, float)):
            if type(actual) is not type(expected):
                return "%s: %s where torch returns %s" % (where, type(actual).__name__, type(expected).__name__)
            if values and not (expected == actual or (isinstance(expected, float) and (
                    abs(expected - actual) <= tol[1] + tol[0] * abs(expected) or expected != expected and actual != actual))):
                return "%s: %r, torch %r" % (where, actual, expected)
            return None
        if expected is None:
            return None if actual is None else "%s: %s where torch returns None" % (where, type(actual).__name__)
        return None if expected == actual else "%s: %r, torch %r" % (where, actual, expected)

    def compare_inputs(self, memo, tol, values):
        """None when aicraft left its inputs as torch left them: unchanged where torch's
        stayed unchanged, changed alike where torch changed one in place (F.batch_norm's
        running statistics)."""
        np = self.np
        storages = [t.untyped_storage().data_ptr() for t, _, _ in memo.values()]
        for k, (t, a, before) in enumerate(memo.values()):
            tn, an = t.detach().resolve_conj().resolve_neg().numpy(), self.ac_numpy(a)
            nan = tn.dtype.kind == "f"
            if an.shape == tn.shape and np.array_equal(an, tn, equal_nan=nan):
                continue
            diff = self.compare(t, a, tol, values, "input %d after the call" % k)
            if not diff:
                continue
            torch_changed = not (tn.shape == before.shape and np.array_equal(tn, before, equal_nan=nan))
            ac_changed = not (an.shape == before.shape and np.array_equal(an, before, equal_nan=nan))
            if not torch_changed:
                return "input %d: aicraft changed it in place, torch did not" % k
            if not ac_changed:
                return "input %d: torch changes it in place, aicraft does not" % k
            if storages.count(storages[k]) == 1:  # an input sharing storage may change with another
                return diff
        return None

    def refereed(self, got, exp, ref, tol):
        """True when aicraft's float32 result is, at every element, within the tolerance
        of torch's float64 result plus twice torch's own worst float32 error on it.

        Two float32 implementations that round differently (another summation order, a
        gradient reduced over a broadcast) can differ by more than assert_close's float32
        defaults while both are right; the float64 result decides which is off.
        """
        torch = self.torch
        try:
            t64 = ref()
        except Exception:
            return False
        if not isinstance(t64, torch.Tensor) or t64.shape != exp.shape:
            return False
        t64, e32, a32 = t64.detach().double(), exp.double(), got.double()
        finite = torch.isfinite(t64) & torch.isfinite(e32)
        if not finite.all():  # where float32 overflows or gives NaN, aicraft must do as torch
            torch_na, ac_na = e32[~finite], a32[~finite]
            if not ((torch_na == ac_na) | (torch_na.isnan() & ac_na.isnan())).all():
                return False
        torch_err = (e32 - t64)[finite].abs().max().item() if finite.any() else 0.0
        bound = tol[1] + tol[0] * t64[finite].abs() + 2 * torch_err
        return bool(((a32 - t64)[finite].abs() <= bound).all())

    def same_selection(self, inp, t_idx, a_idx, field):
        """True when aicraft's indices differ from torch's only in how ties are broken:
        they pick the same values out of the input along some dim. Applies to the
        `indices` output of a (values, indices) result and to a full permutation of the
        input (argsort); other int64 results stay exact."""
        torch = self.torch
        if not isinstance(inp, torch.Tensor) or inp.layout != torch.strided or inp.ndim == 0:
            return False
        src = inp.detach()
        for d in range(src.ndim):
            ti, ai = t_idx, a_idx
            if ti.ndim == src.ndim - 1 and field == "indices":
                ti, ai = ti.unsqueeze(d), ai.unsqueeze(d)
            elif ti.ndim != src.ndim:
                return False
            if field != "indices":  # a permutation along d: every slice holds 0..n-1 once
                if ti.shape != src.shape:
                    return False
                ar = torch.arange(src.shape[d]).view([-1 if k == d else 1 for k in range(src.ndim)])
                if not torch.equal(ti.sort(dim=d).values, ar.expand_as(ti)):
                    continue
            if any(ti.shape[k] > src.shape[k] for k in range(src.ndim) if k != d):
                continue
            n = src.shape[d]
            if ti.numel() == 0 or ti.min() < 0 or ti.max() >= n or ai.min() < 0 or ai.max() >= n:
                continue
            tv, av = torch.gather(src, d, ti), torch.gather(src, d, ai)
            if torch.equal(tv, av) or bool(((tv == av) | (tv.isnan() & av.isnan())).all()):
                return True
        return False

    # -- one sample -----------------------------------------------------------------

    @staticmethod
    def flatten(x):
        if isinstance(x, (list, tuple)):
            out = []
            for v in x:
                out.extend(Worker.flatten(v))
            return out
        return [x]

    def out_of_scope(self, x):
        """True when x holds a float64/float16/bfloat16/complex tensor or dtype."""
        torch = self.torch
        if isinstance(x, torch.Tensor):
            x = x.dtype
        if isinstance(x, torch.dtype):
            return x.is_complex or (x.is_floating_point and x != torch.float32)
        if isinstance(x, (list, tuple)):
            return any(self.out_of_scope(v) for v in x)
        if isinstance(x, dict):
            return any(self.out_of_scope(v) for v in x.values())
        return False

    def describe(self, sample, dtype_name):
        def short(x):
            if isinstance(x, self.torch.Tensor):
                return "T%s" % list(x.shape)
            if isinstance(x, (list, tuple)):
                return "[%s]" % ",".join(short(v) for v in x[:4]) + ("..." if len(x) > 4 else "")
            return repr(x)[:20]
        parts = [short(sample.input)] + [short(a) for a in sample.args]
        parts += ["%s=%s" % (k, short(v)) for k, v in sample.kwargs.items()]
        return "%s(%s)" % (dtype_name, ", ".join(parts))

    def float64_copy(self, sample, converted):
        """(input, args, kwargs, memo) with float32 tensors copied to float64 leaves, from
        the values they had before torch's op ran (converted: to_ac's memo)."""
        torch, memo = self.torch, {}

        def up(x):
            if isinstance(x, torch.Tensor):
                if id(x) not in memo:
                    y = torch.from_numpy(converted[id(x)][2].copy())
                    y = y.double() if y.dtype == torch.float32 else y
                    memo[id(x)] = y.requires_grad_(x.requires_grad and y.is_floating_point())
                return memo[id(x)]
            if isinstance(x, (list, tuple)):
                vals = [up(v) for v in x]
                return type(x)(*vals) if hasattr(x, "_fields") else type(x)(vals)
            if isinstance(x, dict):
                return {k: up(v) for k, v in x.items()}
            return x
        return up(sample.input), up(tuple(sample.args)), up(dict(sample.kwargs)), memo

    def same(self, a, b):
        """a and b (two torch results) are identical, NaNs included."""
        torch = self.torch
        if isinstance(a, torch.Tensor):
            return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and bool(
                ((a == b) | (a != a) & (b != b)).all())
        if isinstance(a, (list, tuple)):
            return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(self.same, a, b))
        return a == b or (a != a and b != b)

    def run_sample(self, op, fn, sample, tol, values, seed, seeded=None):
        """('pass'|'error'|'wrong'|'skip'|'out', detail).

        seeded: op's code with its generator seeding taken out (see unseeded()), for an
        OpInfo that seeds: run twice under two seeds, its values count where they agree."""
        torch = self.torch
        op = seeded or op
        if self.out_of_scope([sample.input, list(sample.args), dict(sample.kwargs)]):
            return "out", None
        memo, unconvertible = {}, None
        try:  # before torch runs: an in-place op would change the inputs
            a_in = self.to_ac(sample.input, memo)
            a_args = self.to_ac(tuple(sample.args), memo)
            a_kwargs = self.to_ac(dict(sample.kwargs), memo)
        except Exception as e:  # aicraft cannot hold this sample
            unconvertible = e
        cache = {}

        def reference():  # torch's result in float64, computed when first needed
            if "out" not in cache:
                cache["copy"] = copy64 = self.float64_copy(sample, memo)
                i64, a64, k64, _ = copy64
                self.seed(seed)
                cache["out"] = op(i64, *a64, **k64)
            return cache["out"]
        try:
            self.seed(seed)
            expected = op(sample.input, *sample.args, **sample.kwargs)
            if seeded is not None and values:
                self.seed(seed + 100003)
                values = self.same(expected, op(sample.input, *sample.args, **sample.kwargs))
        except Exception:
            return "skip", None
        if self.out_of_scope(self.flatten(expected)):
            return "out", None
        if unconvertible is not None:
            return "error", unconvertible
        ref = reference if values else None
        try:
            self.ac.manual_seed(seed)
            actual = fn(a_in, *a_args, **a_kwargs)
        except Exception as e:
            return "error", e
        diff = self.compare(expected, actual, tol, values, ref=ref, sample_input=sample.input)
        if diff:
            return "wrong", diff
        diff = self.compare_inputs(memo, tol, values)
        if diff:
            return "wrong", diff
        # backward: a fixed random grad_output for each differentiable torch output
        pairs = [(t, a) for t, a, _ in memo.values() if t.requires_grad]
        if not pairs or SELFTEST:
            return "pass", None
        try:
            t_outs = self.flatten(sample.output_process_fn_grad(expected))
        except Exception:
            return "pass", None
        idx = [i for i, o in enumerate(t_outs) if isinstance(o, torch.Tensor) and o.requires_grad]
        if not idx:
            return "pass", None
        gen = torch.Generator().manual_seed(seed)
        grads_out = [torch.randn(t_outs[i].shape, generator=gen, dtype=t_outs[i].dtype) for i in idx]
        try:
            t_grads = torch.autograd.grad([t_outs[i] for i in idx], [t for t, _ in pairs], grads_out,
                                          allow_unused=True)
        except Exception:
            return "pass", None  # torch has no backward here

        def grads_reference():
            if "grads" not in cache:
                outs = self.flatten(sample.output_process_fn_grad(reference()))
                leaves = [cache["copy"][3][id(t)] for t, _ in pairs]
                cache["grads"] = torch.autograd.grad([outs[i] for i in idx], leaves,
                                                     [g.double() for g in grads_out], allow_unused=True)
            return cache["grads"]
        try:
            a_outs = self.flatten(self.rebind(sample.output_process_fn_grad)(actual))
            if len(a_outs) != len(t_outs):
                return "wrong", "grad: output_process_fn_grad gives %d outputs, torch %d" % (len(a_outs), len(t_outs))
            diffable = [(a_outs[i], self.ac.tensor(g.numpy())) for i, g in zip(idx, grads_out)]
            if not any(getattr(o, "requires_grad", False) for o, _ in diffable):
                if any(g is not None for g in t_grads):
                    return "wrong", "grad: output does not require grad, torch's does"
                return "pass", None
            if len(diffable) == 1:
                diffable[0][0].backward(diffable[0][1])
            else:
                total = None
                for o, g in diffable:
                    if getattr(o, "requires_grad", False):
                        term = (o * g).sum()
                        total = term if total is None else total + term
                total.backward()
        except Exception as e:
            return "error", e
        for k, ((t, a), tg) in enumerate(zip(pairs, t_grads)):
            ag = a.grad
            where = "grad of input %d" % k
            if tg is None:
                if ag is not None and self.np.any(self.ac_numpy(ag) != 0):
                    return "wrong", "%s: aicraft has one, torch has none" % where
                continue
            if ag is None:
                if tg.numel() == 0:  # an empty gradient holds nothing to get wrong
                    continue
                return "wrong", "%s: missing (torch has one)" % where
            sub = (lambda k=k: grads_reference()[k]) if ref is not None else None
            diff = self.compare(tg, ag, tol, values, where, ref=sub)
            if diff:
                return "wrong", diff
        return "pass", None

    # -- one OpInfo -----------------------------------------------------------------

    def run_op(self, index):
        op = self.op_db[index]
        res = {"name": op.name, "variant": op.variant_test_name, "passed": 0, "samples": 0}
        t0 = time.perf_counter()

        self.notes = {}

        def done(status, reason):
            res.update(status=status, reason=reason, seconds=round(time.perf_counter() - t0, 3),
                       notes=self.notes)
            return res

        if any(p.startswith("_") and not p.endswith("__") for p in op.name.split(".")):
            return done("out", "private op")
        if op.name.startswith("sparse.") or "sparse" in op.name.split(".")[-1]:
            return done("out", "sparse op")
        supported = op.supported_dtypes("cpu")
        dtypes = [d for d in self.torch_dtypes if d in supported]
        if not dtypes:
            return done("out", "no float32/int64/bool samples on CPU")
        fn, how = self.selftest(op) if SELFTEST else self.resolve(op)
        if fn is None:
            return done("missing", how)
        tol, values = self.tolerance(op), self.values_comparable(op)
        seeded = self.unseeded(op.op) if self.seeded(op) else None
        first_error, first_wrong, missing, n, n_out = None, None, [], 0, 0
        for dt in dtypes:
            rg = dt == self.torch.float32 and op.supports_autograd
            dname = str(dt).split(".")[-1]
            try:  # seeded per OpInfo and dtype: the same samples whatever ran before
                self.seed(index * 8 + self.torch_dtypes.index(dt))
                samples = list(op.sample_inputs("cpu", dt, requires_grad=rg))
            except Exception:
                continue
            for sample in samples:
                n += 1
                outcome, info = self.run_sample(op, fn, sample, tol, values, seed=n, seeded=seeded)
                if outcome == "skip":
                    continue
                if outcome == "out":
                    n_out += 1
                    continue
                res["samples"] += 1
                if outcome == "pass":
                    res["passed"] += 1
                elif outcome == "wrong" and first_wrong is None:
                    first_wrong = "%s: %s" % (self.describe(sample, dname), info)
                elif outcome == "error":
                    name = missing_name(info)
                    missing.append(name)
                    if first_error is None:
                        msg = " ".join(str(info).split())
                        first_error = "%s: %s" % (type(info).__name__, msg[:160])
        if first_wrong:
            return done("wrong", first_wrong)
        if res["samples"] == 0:
            return done("out", "only float64/float16/complex samples" if n_out else
                        "torch raises on every sample")
        if res["passed"] == res["samples"]:
            return done("pass", "")
        if res["passed"] == 0 and any(missing):
            return done("missing", "no " + missing[0])
        return done("partial" if res["passed"] else "xfail", first_error)

    def serve(self, inp, out):
        """Worker loop: read an op_db index a line, answer a JSON line."""
        for line in inp:
            line = line.strip()
            if not line:
                continue
            if line == "list":
                ops = [[o.name, o.variant_test_name] for o in self.op_db]
                print(json.dumps({"torch": self.torch.__version__.split("+")[0], "ops": ops}), file=out, flush=True)
                continue
            i = int(line)
            try:
                res = self.run_op(i)
            except Exception as e:  # a bug in the harness itself: say so, keep going
                op = self.op_db[i]
                res = {"name": op.name, "variant": op.variant_test_name, "status": "xfail",
                       "reason": "harness error: %s: %s" % (type(e).__name__, e), "passed": 0, "samples": 0}
            res["index"] = i
            print(json.dumps(res), file=out, flush=True)


def worker_main():
    # Results go to the original stdout; anything aicraft or torch print goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    Worker().serve(sys.stdin, out)


if __name__ == "__main__":
    worker_main()
