"""_mlir_text.py - the text of the mlir backend's functions (aicraft/_mlir.py).

_Func is one native segment: a wrapper with AcNativeFn's signature that turns
data pointers into memrefs, and a body taking them; _Nest is one affine loop
nest in it (loads with broadcasting, arith and math, stores, sums carried
through the loops). Not here: what each op emits (_mlir_ops.py).
"""
import re
import struct

FAST = "fastmath<contract>"   # fused multiply-adds; reductions add reassoc so they vectorise


def _size(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _f32(x):
    """x as an exact MLIR f32 literal (its bits)."""
    return "0x%08X" % struct.unpack("<I", struct.pack("<f", x))[0]


def _as_f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


class _Array:
    """A flat memref read as `shape` (views of one buffer share the memref, of flat elements)."""
    __slots__ = ("ref", "shape", "size", "flat")

    def __init__(self, ref, shape, flat):
        self.ref, self.shape, self.size, self.flat = ref, tuple(shape), _size(shape), flat

    def view(self, shape):
        return _Array(self.ref, shape, self.flat)


class _Func:
    """One native segment: a wrapper with AcNativeFn's signature that turns its data
    pointers into memrefs, and the body that takes them, each marked noalias (distinct
    tensors, distinct scratch), so that LLVM vectorises the loops."""

    def __init__(self, name, first):
        self.name, self.first = name, first
        self.wrapper, self.prologue, self.body = [], [], []
        self.args = []                 # the body's memref arguments: (name, type)
        self.fails = []                # the blocks that return a bad index's node
        self.entries, self.entry_arrays = [], {}
        self.scratch = 0
        self.consts = {}
        self.n = 0

    def tmp(self, prefix="v"):
        self.n += 1
        return "%%%s%d" % (prefix, self.n)

    def const(self, value, kind="f32", lines=None):
        """A constant in the body (or in the wrapper's lines)."""
        key = (value, kind, lines is None)
        if key not in self.consts:
            name = self.tmp("c")
            if kind == "f32":
                text = "arith.constant %s : f32" % _f32(value)
            elif kind == "f64":
                text = "arith.constant %r : f64" % float(value)
            else:
                text = "llvm.mlir.constant(%d : %s) : %s" % (value, kind, kind)
            (self.prologue if lines is None else lines).append("%s = %s" % (name, text))
            self.consts[key] = name
        return self.consts[key]

    def _memref(self, ptr, size, elem="f32"):
        """A body argument: the memref of size elements at ptr, built in the wrapper."""
        desc = "!llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>"
        w = self.wrapper
        d = self.tmp("d")
        w.append("%s = llvm.mlir.undef : %s" % (d, desc))
        for pos, value in (("0", ptr), ("1", ptr), ("2", self.const(0, "i64", w)),
                           ("3, 0", self.const(size, "i64", w)), ("4, 0", self.const(1, "i64", w))):
            nd = self.tmp("d")
            w.append("%s = llvm.insertvalue %s, %s[%s] : %s" % (nd, value, d, pos, desc))
            d = nd
        ref = self.tmp("m")
        w.append("%s = builtin.unrealized_conversion_cast %s : %s to memref<%dx%s>" % (ref, d, desc, size, elem))
        self.args.append((ref, "memref<%dx%s>" % (size, elem)))
        return ref

    def entry(self, entry, shape, elem="f32"):
        """The array of segment buffer `entry` (a buffer id, or -2 - id for its grad)."""
        if entry not in self.entry_arrays:
            k = len(self.entries)
            self.entries.append(entry)
            slot, ptr = self.tmp("p"), self.tmp("p")
            self.wrapper.append("%s = llvm.getelementptr %%data[%d] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr"
                                % (slot, k))
            self.wrapper.append("%s = llvm.load %s : !llvm.ptr -> !llvm.ptr" % (ptr, slot))
            self.entry_arrays[entry] = _Array(self._memref(ptr, _size(shape), elem), shape, _size(shape))
        return self.entry_arrays[entry].view(shape)

    def scratch_array(self, shape):
        size = _size(shape)
        offset = self.scratch
        self.scratch += (size + 15) // 16 * 16   # 64-byte aligned
        ptr = self.tmp("p")
        self.wrapper.append("%s = llvm.getelementptr %%scratch[%d] : (!llvm.ptr) -> !llvm.ptr, f32" % (ptr, offset))
        return _Array(self._memref(ptr, size), shape, size)

    def attr(self, node_index, attr):
        """Scalar argument `attr` of node node_index, as replay holds it now (f64)."""
        slot, ptr, at, value = self.tmp("a"), self.tmp("a"), self.tmp("a"), self.tmp("a")
        self.body.append("%s = llvm.getelementptr %%attrs[%d] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr"
                         % (slot, node_index - self.first))
        self.body.append("%s = llvm.load %s : !llvm.ptr -> !llvm.ptr" % (ptr, slot))
        self.body.append("%s = llvm.getelementptr %s[%d] : (!llvm.ptr) -> !llvm.ptr, f64" % (at, ptr, attr))
        self.body.append("%s = llvm.load %s : !llvm.ptr -> f64" % (value, at))
        return value

    def op(self, text, body=None):
        """Emit `%new = text` into body (default: the function's); returns %new."""
        name = self.tmp()
        (self.body if body is None else body).append("%s = %s" % (name, text))
        return name

    def pointer(self, array):
        index = self.op("memref.extract_aligned_pointer_as_index %s : memref<%dxf32> -> index"
                        % (array.ref, array.flat))
        return self.op("llvm.inttoptr %s : i64 to !llvm.ptr" % self.op("arith.index_cast %s : index to i64" % index))

    def uniform(self, array):
        slot = self.op("llvm.getelementptr %kernels[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr")
        fp = self.op("llvm.load %s : !llvm.ptr -> !llvm.ptr" % slot)
        self.body.append("llvm.call %s(%s, %s) : !llvm.ptr, (!llvm.ptr, i64) -> ()"
                         % (fp, self.pointer(array), self.const(array.size, "i64")))

    def gemm(self, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc):
        fp = self.op("llvm.load %kernels : !llvm.ptr -> !llvm.ptr")
        i32, i64 = (lambda v: self.const(v, "i32")), (lambda v: self.const(v, "i64"))
        self.body.append(
            "llvm.call %s(%s) : !llvm.ptr, (i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, "
            "f32, !llvm.ptr, i64) -> ()" % (fp, ", ".join([
                i32(ta), i32(tb), i64(m), i64(n), i64(k), self.const(1.0), self.pointer(a), i64(lda),
                self.pointer(b), i64(ldb), self.const(float(beta)), self.pointer(c), i64(ldc)])))

    def check(self, bad, node_index):
        """Return node_index + 1 from the segment now when i1 value bad is set (a bad
        class index): replay reports that node's error before anything is updated."""
        self.n += 1
        k = self.n
        self.body.append("cf.cond_br %s, ^bad%d, ^ok%d" % (bad, k, k))
        self.fails += ["^bad%d:" % k, "  %%f%d = arith.constant %d : i32" % (k, node_index + 1),
                       "  return %%f%d : i32" % k]
        self.body.append("^ok%d:" % k)

    def text(self):
        params = ", ".join("%s: %s {llvm.noalias}" % arg for arg in self.args)
        types = ", ".join(kind for _, kind in self.args)
        sep = ", " if self.args else ""
        lines = ["  func.func private @%s_body(%s%s%%attrs: !llvm.ptr, %%kernels: !llvm.ptr) -> i32 {"
                 % (self.name, params, sep)]
        lines += ["    " + line for line in self.prologue + self.body]
        lines += ["    %ok = arith.constant 0 : i32", "    return %ok : i32"]
        lines += ["  " + line for line in self.fails]
        lines += ["  }",
                  "  func.func @%s(%%data: !llvm.ptr, %%attrs: !llvm.ptr, %%kernels: !llvm.ptr) -> i32 {" % self.name,
                  "    %%scratch_slot = llvm.getelementptr %%data[%d] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr"
                  % len(self.entries),
                  "    %scratch = llvm.load %scratch_slot : !llvm.ptr -> !llvm.ptr"]
        lines += ["    " + line for line in self.wrapper]
        lines += ["    %%status = call @%s_body(%s%s%%attrs, %%kernels) : (%s%s!llvm.ptr, !llvm.ptr) -> i32"
                  % (self.name, ", ".join(ref for ref, _ in self.args), sep, types, sep),
                  "    return %status : i32", "  }"]
        return "\n".join(lines)


class _Nest:
    """A loop nest over `shape`: loads, math, stores; a full sum rides as a loop-carried value.
    Dims of size 1 get no loop; one-element arrays are read once, before the loops; adjacent
    dims that every array reads alike (all of them, or broadcast) are one loop, so that a
    nest over (16, 28, 28) is one loop of 12544 that vectorises."""

    def __init__(self, func, shape, exact=False):
        self.func = func
        self.flags = "" if exact else " " + FAST   # exact: no fused multiply-adds
        self.shape = tuple(shape) or (1,)
        self.pre, self.body = [], []
        self.values = {}      # key (a buffer, ('grad', buffer)) -> SSA value in this nest
        self.pending = set()  # keys whose arrays this nest reduces into: no reading them here
        self.sums = []        # (array, scale, value)
        self.loops = [d for d, n in enumerate(self.shape) if n != 1]
        self.used = {}        # the shapes read or written (aligned to the nest) -> their number

    def index(self, shape):
        """A placeholder for the index of an array of shape, resolved when the loops are known."""
        shape, rank = tuple(shape), len(self.shape)
        shape = shape[len(shape) - rank:] if len(shape) > rank else (1,) * (rank - len(shape)) + shape
        return "@%d@" % self.used.setdefault(shape, len(self.used))

    def _loops(self):
        """The merged loops, as lists of nest dims, and the index text of each used shape."""
        groups = []
        for d in self.loops:
            if groups and all((s[groups[-1][-1]] == 1) == (s[d] == 1) for s in self.used):
                groups[-1].append(d)
            else:
                groups.append([d])
        ivs = [self.func.tmp("i") for _ in groups]
        texts = {}
        for shape, k in self.used.items():
            terms = []
            for iv, group in zip(ivs, groups):
                if shape[group[0]] != 1:
                    stride = _size(shape[group[-1] + 1:])
                    terms.append("%s * %d" % (iv, stride) if stride != 1 else iv)
            texts["@%d@" % k] = " + ".join(terms) or "0"
        return groups, ivs, texts

    def load(self, array):
        text = "affine.load %s[%s] : memref<%dxf32>" % (array.ref, self.index(array.shape), array.size)
        if array.size == 1 and self.loops:   # invariant: the nest writes no one-element array
            return self.func.op(text, self.pre)
        return self.func.op(text, self.body)

    def store(self, array, value):
        self.body.append("affine.store %s, %s[%s] : memref<%dxf32>" % (value, array.ref, self.index(array.shape),
                                                                       array.size))

    def accumulate(self, array, value, key, scale=None):
        """array[broadcast index] += value (times scale); a sum into one element is carried."""
        if array.size == 1 and self.loops:
            self.sums.append((array, scale, value))
            self.pending.add(key)
            return
        if scale is not None:
            value = self.calc("mulf", value, self.func.const(scale))
        if array.size != _size(self.shape):
            self.pending.add(key)
        old = self.func.op("affine.load %s[%s] : memref<%dxf32>" % (array.ref, self.index(array.shape),
                                                                   array.size), self.body)
        self.store(array, self.calc("addf", old, value))

    def calc(self, op, *args):
        return self.func.op("arith.%s %s%s : f32" % (op, ", ".join(args), self.flags), self.body)

    def math(self, op, arg):
        return self.func.op("math.%s %s : f32" % (op, arg), self.body)

    def select(self, cond, a, b):
        return self.func.op("arith.select %s, %s, %s : f32" % (cond, a, b), self.body)

    def cmp(self, pred, a, b):
        return self.func.op("arith.cmpf %s, %s, %s : f32" % (pred, a, b), self.body)

    def close(self):
        """Emit the nest into its function."""
        func, n = self.func, len(self.sums)
        groups, ivs, texts = self._loops()
        resolve = lambda lines: [re.sub(r"@\d+@", lambda m: texts[m.group(0)], line) for line in lines]  # noqa: E731
        func.body.extend(resolve(self.pre))
        if not groups:
            func.body.extend(resolve(self.body))
            return
        zero = func.const(0.0)
        accs = [[func.tmp("s") for _ in range(n)] for _ in groups]
        inner = accs[-1]
        for k, (_, _, value) in enumerate(self.sums):
            self.body.append("%s = arith.addf %s, %s fastmath<reassoc, contract> : f32"
                             % ("%%n%s" % inner[k][1:], inner[k], value))
        text, results = resolve(self.body), None
        for level in range(len(groups) - 1, -1, -1):
            iv, size = ivs[level], _size(self.shape[d] for d in groups[level])
            if n:
                inits = [zero] * n if level == 0 else accs[level - 1]
                carried = ", ".join("%s = %s" % (a, i) for a, i in zip(accs[level], inits))
                types = ", ".join(["f32"] * n)
                if results is None:
                    yields = ["%%n%s" % a[1:] for a in accs[level]]
                else:
                    yields = ["%s#%d" % (results, k) for k in range(n)]
                results = func.tmp("r")
                head = "%s:%d = affine.for %s = 0 to %d iter_args(%s) -> (%s) {" % (results, n, iv, size, carried, types)
                tail = ["  affine.yield %s : %s" % (", ".join(yields), types), "}"]
            else:
                head = "affine.for %s = 0 to %d {" % (iv, size)
                tail = ["}"]
            text = [head] + ["  " + line for line in text] + tail
        func.body.extend(text)
        for k, (array, scale, _) in enumerate(self.sums):
            total = "%s#%d" % (results, k)
            if scale is not None:
                total = func.op("arith.mulf %s, %s : f32" % (total, func.const(scale)))
            old = func.op("affine.load %s[0] : memref<%dxf32>" % (array.ref, array.size))
            func.body.append("affine.store %s, %s[0] : memref<%dxf32>"
                             % (func.op("arith.addf %s, %s : f32" % (old, total)), array.ref, array.size))


def _fill(func, array, value):
    """array[:] = value."""
    nest = _Nest(func, array.shape)
    nest.store(array, func.const(value))
    nest.close()


def _rows_loop(f, rows, carried, body):
    """An affine.for over rows carrying values from their (init, type) in carried;
    body(r, names) returns (lines, the next values). Returns the results' names."""
    r, res = f.tmp("i"), f.tmp("r")
    names = [f.tmp("s") for _ in carried]
    lines, yields = body(r, names)
    if carried:
        types = ", ".join(t for _, t in carried)
        f.body.append("%s:%d = affine.for %s = 0 to %d iter_args(%s) -> (%s) {" % (
            res, len(carried), r, rows, ", ".join("%s = %s" % (n, init) for n, (init, _) in zip(names, carried)),
            types))
        lines = lines + ["affine.yield %s : %s" % (", ".join(yields), types)]
    else:
        f.body.append("affine.for %s = 0 to %d {" % (r, rows))
    f.body.extend("  " + line for line in lines)
    f.body.append("}")
    return ["%s#%d" % (res, k) for k in range(len(carried))]


def _class_loop(f, lines, classes, init, step):
    """Lines of an inner loop over classes carrying one f32 from init; step(c, acc, body)
    returns the next value. Returns the result's name."""
    c, acc, res = f.tmp("i"), f.tmp("s"), f.tmp("r")
    body = []
    nxt = step(c, acc, body)
    lines.append("%s = affine.for %s = 0 to %d iter_args(%s = %s) -> (f32) {" % (res, c, classes, acc, init))
    lines.extend("  " + line for line in body)
    lines.append("  affine.yield %s : f32" % nxt)
    lines.append("}")
    return res
