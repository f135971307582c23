"""_mlir_ops.py - what each op the mlir backend covers emits (aicraft/_mlir.py):
its forward pass into a segment, its derivative for a derived backward pass,
and the SGD and Adam updates. Values follow libac's ops (the same formulas;
rounding differs where loops are fused or vectorised, except in the updates).
"""
from aicraft._mlir_text import FAST, _as_f32, _class_loop, _fill, _Nest, _rows_loop, _size

BINARY = {"add", "sub", "mul", "div"}
SCALAR = {"add_scalar", "mul_scalar", "rsub_scalar", "div_scalar", "rdiv_scalar", "pow_scalar", "clamp"}
UNARY = {"neg", "exp", "log", "log1p", "sqrt", "abs", "sin", "cos", "relu", "sigmoid", "tanh"}
ELEMENTWISE = BINARY | SCALAR | UNARY
VIEWS = {"reshape", "flatten", "squeeze", "unsqueeze", "detach", "clone"}
FORWARD = ELEMENTWISE | VIEWS | {"sum", "mean", "mse_loss", "linear", "matmul", "cross_entropy", "dropout",
                                 "softmax", "log_softmax"}
STEPS = {"sgd_step", "adam_step"}
F32, I64 = 0, 1   # AcDtype values the emitter reads (float32, int64)
PARAMETER, TEMPORARY = 0, 3   # AcBufferKind values


def _is_view(node):
    """Whether node's output is its input's data under another shape (dropout off included)."""
    return node.op in VIEWS or (node.op == "dropout" and (node.attrs[1] == 0 or node.attrs[0] == 0))


def _covered(g, node):
    """Whether the emitter covers node as a forward op (float32 buffers, supported attrs)."""
    op = node.op
    if op not in FORWARD or any(b < 0 for b in node.outs):
        return False
    if op == "cross_entropy":   # class indices only
        logits, target = node.ins
        return (g.dtypes[logits] == F32 and len(g.shapes[logits]) == 2 and g.dtypes[target] == I64
                and g.shapes[target] == g.shapes[logits][:1])
    bufs = [b for b in node.ins if b >= 0] + node.outs
    if any(g.dtypes[b] != F32 for b in bufs):
        return False
    if op in BINARY:
        return len(node.ins) == 2 and all(b >= 0 for b in node.ins)
    if op in ("sum", "mean"):
        return True
    if op in ("softmax", "log_softmax"):   # over the last dim
        ndim = len(g.shapes[node.ins[0]])
        return ndim >= 1 and int(node.attrs[0]) % ndim == ndim - 1
    if op == "matmul":
        return len(g.shapes[node.ins[0]]) == 2 and len(g.shapes[node.ins[1]]) == 2
    if op == "linear":
        return len(g.shapes[node.ins[0]]) == 2
    return True


def _step_covered(g, node):
    op = node.op
    if op == "sgd_step":   # attrs: step, lr, momentum, dampening, nesterov, weight_decay
        return g.dtypes[node.ins[0]] == F32 and (node.attrs[2] == 0 or node.ins[1] >= 0)
    if op == "adam_step":
        return all(b >= 0 and g.dtypes[b] == F32 for b in node.ins)
    return False


def _dropout_scale(node):
    p = _as_f32(node.attrs[0])
    return 0.0 if p == 1.0 else _as_f32(1.0 / _as_f32(1.0 - p))


# ---- forward ops -------------------------------------------------------------

def _reduced_keepdim(g, node):
    """The output shape of a sum or mean with the reduced dims kept (as ones); its count."""
    shape = g.shapes[node.ins[0]]
    n_dims = int(node.attrs[3])
    dims = range(len(shape)) if n_dims < 0 else [int(d) % max(len(shape), 1) for d in node.attrs[4:4 + n_dims]]
    kept = tuple(1 if d in dims else s for d, s in enumerate(shape))
    return kept, _size(shape) // max(_size(kept), 1)


class _Emitter:
    """Emits one segment: forward nodes, optionally a derived backward, optimizer steps."""

    def __init__(self, g, func, nodes, stored):
        self.g, self.func, self.nodes = g, func, nodes
        self.own = {b for n in nodes for b in n.outs if b >= 0}   # buffers the segment's nodes make
        self.stored = set(stored)   # buffers in memory once their nest ends
        self.arrays = {}          # buffer -> _Array
        self.grads = {}           # buffer -> _Array of its gradient
        self.nest = None
        self.aux = {}             # node index -> scratch it keeps for the backward pass
        self.made = set()         # buffers this segment makes
        self.unstored_reads = set()   # made here, read from memory, but not stored: a bad plan

    # arrays: a buffer lives in a segment buffer when replay can see it, else in scratch
    def array(self, b):
        if b not in self.arrays:
            elem = "i64" if self.g.dtypes[b] == I64 else "f32"
            self.arrays[b] = (self.func.entry(b, self.g.shapes[b], elem) if self.visible(b)
                              else self.func.scratch_array(self.g.shapes[b]))
        return self.arrays[b]

    def visible(self, b):
        g = self.g
        if g.kinds[b] != TEMPORARY or b in g.outputs or b not in self.own:   # not a temporary of its own
            return True
        first, last = self.nodes[0].index, self.nodes[-1].index
        return any(r < first or r > last for r in g.readers.get(b, ()))

    def open(self, shape, reads=()):
        """The nest to put a node over shape into: the open one when it fits."""
        nest = self.nest
        if nest is not None and (nest.shape != (tuple(shape) or (1,)) or any(k in nest.pending for k in reads)):
            self.close()
        if self.nest is None:
            self.nest = _Nest(self.func, shape)
        return self.nest

    def close(self):
        if self.nest is not None:
            self.nest.close()
            self.nest = None

    def value(self, nest, b):
        if b in nest.values:
            return nest.values[b]
        v = nest.values[b] = nest.load(self.read(b))
        return v

    def read(self, b):
        """The array of b, read from memory: b must be stored where it is made."""
        if b in self.made and b not in self.stored:
            self.unstored_reads.add(b)
        return self.array(b)

    def define(self, nest, b, v):
        nest.values[b] = v
        self.made.add(b)
        if b in self.stored:
            nest.store(self.array(b), v)

    def forward(self, node):
        g, op, f = self.g, node.op, self.func
        out = node.outs[0]
        if op in ELEMENTWISE:
            nest = self.open(g.shapes[out], node.ins)
            args = [self.value(nest, b) for b in node.ins]
            self.define(nest, out, _elementwise(nest, op, args, node.attrs))
        elif _is_view(node):
            self.made.add(out)
            self.stored.add(out)
            source = self.read(node.ins[0])
            if self.visible(out):   # replay sees it: a copy of its own
                self.close()
                nest = self.open(g.shapes[out])
                nest.store(self.array(out), nest.load(source.view(g.shapes[out])))
                nest.pending.add(out)
            else:
                self.arrays[out] = source.view(g.shapes[out])
                if self.nest is not None:
                    self.nest.pending.add(out)
        elif op in ("sum", "mean"):
            kept, count = _reduced_keepdim(g, node)
            nest = self.open(g.shapes[node.ins[0]], node.ins)
            target = self.array(out)
            self.made.add(out)
            self.stored.add(out)
            _fill(f, target, 0.0)   # before the open nest: its text comes after
            v = self.value(nest, node.ins[0])
            nest.accumulate(target.view(kept), v, out,
                            1.0 / count if op == "mean" else None)
        elif op == "mse_loss":
            nest = self.open(g.shapes[node.ins[0]], node.ins)
            d = nest.calc("subf", self.value(nest, node.ins[0]), self.value(nest, node.ins[1]))
            sq = nest.calc("mulf", d, d)
            reduction = int(node.attrs[0])
            if reduction == 0:
                self.define(nest, out, sq)
            else:
                target = self.array(out)
                self.made.add(out)
                self.stored.add(out)
                _fill(f, target, 0.0)   # before the open nest: its text comes after
                nest.accumulate(target, sq, out, 1.0 / _size(g.shapes[node.ins[0]]) if reduction == 1 else None)
        elif op == "cross_entropy":
            self.close()
            _cross_entropy(self, node)
        elif op in ("softmax", "log_softmax"):
            self.close()
            _softmax(self, node)
        elif op == "dropout":   # training, p > 0: the op's draws, then one pass
            self.close()
            draws = self.aux[node.index] = f.scratch_array(g.shapes[out])
            f.uniform(draws)
            nest = self.open(g.shapes[out])
            keep = nest.cmp("oge", nest.load(draws), f.const(node.attrs[0]))
            scaled = nest.calc("mulf", self.value(nest, node.ins[0]), f.const(_dropout_scale(node)))
            self.define(nest, out, nest.select(keep, scaled, f.const(0.0)))
        elif op in ("linear", "matmul"):
            self.close()
            x, w = self.read(node.ins[0]), self.read(node.ins[1])
            y = self.array(out)
            self.made.add(out)
            self.stored.add(out)
            m, k = g.shapes[node.ins[0]]
            if op == "linear":
                n = g.shapes[node.ins[1]][0]
                f.gemm(0, 1, m, n, k, x, k, w, k, 0.0, y, n)
                if len(node.ins) > 2 and node.ins[2] >= 0:
                    nest = self.open(g.shapes[out])
                    v = nest.calc("addf", nest.load(y), self.value(nest, node.ins[2]))
                    nest.values[out] = v
                    nest.store(y, v)
            else:
                n = g.shapes[node.ins[1]][1]
                f.gemm(0, 0, m, n, k, x, k, w, n, 0.0, y, n)
        else:
            raise AssertionError(op)

    def step(self, node, grad_of):
        """An optimizer step on a parameter, its gradient the array grad_of gives."""
        self.close()
        g, f = self.g, self.func
        p = node.ins[0]
        param, grad = self.array(p), grad_of(p)
        lr = f.op("arith.truncf %s : f64 to f32" % f.attr(node.index, 1))
        nest = _Nest(f, g.shapes[p], exact=True)   # the optimizers' own rounding
        pv, gv = nest.load(param), nest.load(grad)
        if node.op == "sgd_step":
            _sgd(self, nest, node, lr, param, pv, gv)
        else:
            _adam(self, nest, node, lr, param, pv, gv)
        nest.close()


def _elementwise(nest, op, a, attrs):
    """The value of elementwise op on argument values a."""
    f = nest.func
    if op in BINARY:
        return nest.calc({"add": "addf", "sub": "subf", "mul": "mulf", "div": "divf"}[op], a[0], a[1])
    x = a[0]
    if op in SCALAR and op != "clamp":
        s = f.const(attrs[0])
        if op == "add_scalar":
            return nest.calc("addf", x, s)
        if op == "mul_scalar":
            return nest.calc("mulf", x, s)
        if op == "rsub_scalar":
            return nest.calc("subf", s, x)
        if op == "div_scalar":
            return nest.calc("divf", x, s)
        if op == "rdiv_scalar":
            return nest.calc("divf", s, x)
        if attrs[0] == 2.0:
            return nest.calc("mulf", x, x)
        return f.op("math.powf %s, %s : f32" % (x, s), nest.body)
    if op == "clamp":
        lo = nest.select(nest.cmp("olt", x, f.const(attrs[0])), f.const(attrs[0]), x)
        return nest.select(nest.cmp("ogt", lo, f.const(attrs[1])), f.const(attrs[1]), lo)
    if op == "neg":
        return f.op("arith.negf %s : f32" % x, nest.body)
    if op == "relu":
        return nest.select(nest.cmp("ogt", x, f.const(0.0)), x, f.const(0.0))
    if op == "sigmoid":
        e = nest.math("exp", f.op("arith.negf %s : f32" % x, nest.body))
        return nest.calc("divf", f.const(1.0), nest.calc("addf", f.const(1.0), e))
    if op == "abs":
        return nest.math("absf", x)
    return nest.math(op, x)   # exp, log, log1p, sqrt, sin, cos, tanh


def _sgd(emitter, nest, node, lr, param, pv, gv):
    """torch.optim.SGD's update of one element, as libac/src/optim/sgd.c computes it."""
    f = emitter.func
    _, _, momentum, dampening, nesterov, wd = node.attrs
    if wd != 0:
        gv = nest.calc("addf", gv, nest.calc("mulf", f.const(wd), pv))
    if momentum != 0:   # the buffer starts as the first gradient, undamped
        first = f.op("arith.cmpf oeq, %s, %s : f64" % (f.attr(node.index, 0), f.const(1.0, "f64")))
        buf = emitter.array(node.ins[1])
        later = nest.calc("addf", nest.calc("mulf", f.const(momentum), nest.load(buf)),
                          nest.calc("mulf", f.const(_as_f32(1.0 - _as_f32(dampening))), gv))
        b = nest.select(first, gv, later)
        nest.store(buf, b)
        gv = nest.calc("addf", gv, nest.calc("mulf", f.const(momentum), b)) if nesterov else b
    nest.store(param, nest.calc("subf", pv, nest.calc("mulf", lr, gv)))


def _adam(emitter, nest, node, lr, param, pv, gv):
    """torch.optim.Adam's update of one element, as libac/src/optim/adam.c computes it."""
    f = emitter.func
    _, _, beta1, beta2, eps, wd, decoupled = node.attrs
    step = f.attr(node.index, 0)
    lr64 = f.op("arith.extf %s : f32 to f64" % lr)
    bc1 = f.op("arith.subf %s, %s : f64" % (f.const(1.0, "f64"), f.op("math.powf %s, %s : f64" % (
        f.const(_as_f32(beta1), "f64"), step))))
    bc2 = f.op("arith.subf %s, %s : f64" % (f.const(1.0, "f64"), f.op("math.powf %s, %s : f64" % (
        f.const(_as_f32(beta2), "f64"), step))))
    neg_step = f.op("arith.truncf %s : f64 to f32" % f.op("arith.divf %s, %s : f64" % (
        f.op("arith.negf %s : f64" % lr64), bc1)))
    bc2_sqrt = f.op("arith.truncf %s : f64 to f32" % f.op("math.sqrt %s : f64" % bc2))
    w1 = _as_f32(1.0 - _as_f32(beta1))
    m_arr, v_arr = emitter.array(node.ins[1]), emitter.array(node.ins[2])
    if wd != 0:
        if decoupled:
            decay = f.op("arith.truncf %s : f64 to f32" % f.op("arith.subf %s, %s : f64" % (
                f.const(1.0, "f64"), f.op("arith.mulf %s, %s : f64" % (lr64, f.const(_as_f32(wd), "f64"))))))
            pv = nest.calc("mulf", pv, decay)
        else:
            gv = nest.calc("addf", gv, nest.calc("mulf", f.const(wd), pv))
    m, v = nest.load(m_arr), nest.load(v_arr)
    diff = nest.calc("subf", gv, m)
    if w1 < 0.5:
        mi = nest.calc("addf", m, nest.calc("mulf", f.const(w1), diff))
    else:
        mi = nest.calc("subf", gv, nest.calc("mulf", diff, f.const(_as_f32(1.0 - w1))))
    vi = nest.calc("addf", nest.calc("mulf", v, f.const(beta2)),
                   nest.calc("mulf", nest.calc("mulf", f.const(_as_f32(1.0 - _as_f32(beta2))), gv), gv))
    tiny = f.const(1.1754943508222875e-38)
    mi = nest.select(nest.cmp("olt", nest.math("absf", mi), tiny), f.const(0.0), mi)
    vi = nest.select(nest.cmp("olt", vi, tiny), f.const(0.0), vi)
    nest.store(m_arr, mi)
    nest.store(v_arr, vi)
    denom = nest.calc("addf", nest.calc("divf", nest.math("sqrt", vi), bc2_sqrt), f.const(eps))
    nest.store(param, nest.calc("addf", pv, nest.calc("divf", nest.calc("mulf", neg_step, mi), denom)))


# ---- the backward pass of a whole step -----------------------------------------

def _needs_grad(g, forward, loss):
    """The buffers whose gradient the loss's backward pass computes."""
    depends = {b for b, kind in enumerate(g.kinds) if kind == PARAMETER}
    for node in forward:
        if node.op != "detach" and any(b in depends for b in node.ins if b >= 0):
            depends.update(node.outs)
    leads = {loss}
    for node in reversed(forward):
        if node.outs[0] in leads and node.op != "detach":
            leads.update(b for b in node.ins if b >= 0)
    return depends & leads


def _backward(em, forward, loss, zeroed):
    """Emit the gradients of loss: parameters' .grad (set where zero_grad came first, else added to)."""
    g, f = em.g, em.func
    need = _needs_grad(g, forward, loss)
    em.close()
    for b in sorted(need):
        if g.kinds[b] == PARAMETER:
            em.grads[b] = f.entry(-2 - b, g.shapes[b])
            if b in zeroed:
                _fill(f, em.grads[b], 0.0)
    for node in forward:
        out = node.outs[0]
        if out not in need:
            continue
        if _is_view(node):
            src = em.grads[node.ins[0]]
            em.grads[out] = src.view(g.shapes[out])
        else:
            em.grads[out] = f.scratch_array(g.shapes[out])
            _fill(f, em.grads[out], 0.0)
    _fill(f, em.grads[loss], 1.0)   # the seed (after the fills: the loss may be a view)
    for node in reversed(forward):
        if node.outs[0] in need and not _is_view(node):
            _node_backward(em, node, need)
    em.close()


def _node_backward(em, node, need):
    g, f, op = em.g, em.func, node.op
    out = node.outs[0]
    gout_key = ("grad", out)
    ins = [b for b in node.ins if b >= 0]

    def add(nest, b, value, scale=None):
        if b in need:
            nest.accumulate(em.grads[b], value, ("grad", b), scale)

    if op in ("linear", "matmul"):
        em.close()
        x, w, gy = node.ins[0], node.ins[1], em.grads[out]
        m, k = g.shapes[x]
        if op == "linear":
            n = g.shapes[w][0]
            if x in need:
                f.gemm(0, 0, m, k, n, gy, n, em.array(w), k, 1.0, em.grads[x], k)
            if w in need:
                f.gemm(1, 0, n, k, m, gy, n, em.array(x), k, 1.0, em.grads[w], k)
            if len(ins) > 2 and node.ins[2] in need:
                nest = em.open(g.shapes[out], [gout_key])
                add(nest, node.ins[2], nest.load(gy))
        else:
            n = g.shapes[w][1]
            if x in need:
                f.gemm(0, 1, m, k, n, gy, n, em.array(w), n, 1.0, em.grads[x], k)
            if w in need:
                f.gemm(1, 0, k, n, m, em.array(x), k, gy, n, 1.0, em.grads[w], n)
        return
    if op == "cross_entropy":
        _cross_entropy_backward(em, node, need)
        return
    if op in ("softmax", "log_softmax"):
        _softmax_backward(em, node, need)
        return
    if op == "dropout":
        nest = em.open(g.shapes[out], [gout_key])
        keep = nest.cmp("oge", nest.load(em.aux[node.index]), f.const(node.attrs[0]))
        scaled = nest.calc("mulf", nest.load(em.grads[out]), f.const(_dropout_scale(node)))
        add(nest, node.ins[0], nest.select(keep, scaled, f.const(0.0)))
        return
    if op in ("sum", "mean"):
        kept, count = _reduced_keepdim(g, node)
        nest = em.open(g.shapes[node.ins[0]], [gout_key])
        gy = em.grads[out]
        add(nest, node.ins[0], nest.load(gy.view(kept)), 1.0 / count if op == "mean" else None)
        return
    if op == "mse_loss":
        a, b = node.ins
        nest = em.open(g.shapes[a], [gout_key])
        gy = em.grads[out]
        reduction = int(node.attrs[0])
        scale = {0: 2.0, 1: 2.0 / _size(g.shapes[a]), 2: 2.0}[reduction]
        d = nest.calc("subf", em.value(nest, a), em.value(nest, b))
        v = nest.calc("mulf", nest.calc("mulf", nest.load(gy), f.const(scale)), d)
        add(nest, a, v)
        if b in need:
            add(nest, b, f.op("arith.negf %s : f32" % v, nest.body))
        return
    nest = em.open(g.shapes[out], [gout_key])
    gy = nest.load(em.grads[out])
    for k, b in enumerate(node.ins):
        if b in need:
            add(nest, b, _elementwise_grad(em, nest, node, k, gy))


def _elementwise_grad(em, nest, node, k, gy):
    """The gradient of elementwise node's input k, given gy, its output's."""
    f, op, attrs = em.func, node.op, node.attrs
    val = lambda b: em.value(nest, b)   # noqa: E731
    neg = lambda v: f.op("arith.negf %s : f32" % v, nest.body)   # noqa: E731
    zero = f.const(0.0)
    if op == "add" or op == "add_scalar":
        return gy
    if op == "sub":
        return gy if k == 0 else neg(gy)
    if op == "mul":
        return nest.calc("mulf", gy, val(node.ins[1 - k]))
    if op == "div":
        a, b = val(node.ins[0]), val(node.ins[1])
        if k == 0:
            return nest.calc("divf", gy, b)
        return neg(nest.calc("divf", nest.calc("mulf", gy, a), nest.calc("mulf", b, b)))
    x = val(node.ins[0])
    if op in ("exp", "sigmoid", "tanh", "sqrt"):
        y = val(node.outs[0])
    if op == "mul_scalar":
        return nest.calc("mulf", gy, f.const(attrs[0]))
    if op == "rsub_scalar" or op == "neg":
        return neg(gy)
    if op == "div_scalar":
        return nest.calc("divf", gy, f.const(attrs[0]))
    if op == "rdiv_scalar":
        return neg(nest.calc("divf", nest.calc("mulf", gy, f.const(attrs[0])), nest.calc("mulf", x, x)))
    if op == "pow_scalar":
        p = attrs[0]
        power = x if p == 2.0 else f.op("math.powf %s, %s : f32" % (x, f.const(p - 1.0)), nest.body)
        return nest.calc("mulf", nest.calc("mulf", gy, f.const(p)), power)
    if op == "clamp":
        inside = f.op("arith.andi %s, %s : i1" % (nest.cmp("oge", x, f.const(attrs[0])),
                                                  nest.cmp("ole", x, f.const(attrs[1]))), nest.body)
        return nest.select(inside, gy, zero)
    if op == "relu":
        return nest.select(nest.cmp("ogt", x, zero), gy, zero)
    if op == "exp":
        return nest.calc("mulf", gy, y)
    if op == "log":
        return nest.calc("divf", gy, x)
    if op == "log1p":
        return nest.calc("divf", gy, nest.calc("addf", x, f.const(1.0)))
    if op == "sqrt":
        return nest.calc("divf", gy, nest.calc("mulf", y, f.const(2.0)))
    if op == "abs":
        return nest.select(nest.cmp("ogt", x, zero), gy, nest.select(nest.cmp("olt", x, zero), neg(gy), zero))
    if op == "sin":
        return nest.calc("mulf", gy, nest.math("cos", x))
    if op == "cos":
        return neg(nest.calc("mulf", gy, nest.math("sin", x)))
    if op == "sigmoid":
        return nest.calc("mulf", gy, nest.calc("mulf", y, nest.calc("subf", f.const(1.0), y)))
    if op == "tanh":
        return nest.calc("mulf", gy, nest.calc("subf", f.const(1.0), nest.calc("mulf", y, y)))
    raise AssertionError(op)


# ---- cross-entropy over class indices -------------------------------------------

def _row_access(f, r, classes):
    """(at, load) for element c of row r of a (rows, classes) array: at(c) is its flat
    index, load(array, c, body) appends its affine.load to body and returns the value."""
    def at(c):
        return "%s * %d + %s" % (r, classes, c)

    def load(array, c, body):
        return f.op("affine.load %s[%s] : memref<%dxf32>" % (array.ref, at(c), array.flat), body)
    return at, load


def _cross_entropy(em, node):
    """Per row: loss = (1 - e)(max - x_t + log_sum) + e(log_sum - mean(x - max)), as
    libac's cross_entropy; keeps the softmax rows for the backward pass."""
    g, f = em.g, em.func
    logits, target = node.ins
    rows, classes = g.shapes[logits]
    e = _as_f32(node.attrs[1])
    reduction = int(node.attrs[0])
    x, t = em.read(logits), em.array(target)
    probs = em.aux[node.index] = f.scratch_array((rows, classes))
    out = em.array(node.outs[0])
    em.made.add(node.outs[0])
    em.stored.add(node.outs[0])
    op = lambda text, lines: f.op(text, lines)   # noqa: E731
    fast = lambda name, a, b, lines: op("arith.%s %s, %s %s : f32" % (name, a, b, FAST), lines)  # noqa: E731

    def row(r, names):
        total, bad = names
        lines = []
        at, load = _row_access(f, r, classes)

        def max_step(c, acc, body):
            v = load(x, c, body)
            return op("arith.maximumf %s, %s : f32" % (acc, v), body)
        mx = _class_loop(f, lines, classes, f.const(float("-inf")), max_step)

        def exp_step(c, acc, body):
            v = load(x, c, body)
            ex = op("math.exp %s : f32" % fast("subf", v, mx, body), body)
            body.append("affine.store %s, %s[%s] : memref<%dxf32>" % (ex, probs.ref, at(c), probs.flat))
            return op("arith.addf %s, %s fastmath<reassoc, contract> : f32" % (acc, ex), body)
        total_exp = _class_loop(f, lines, classes, f.const(0.0), exp_step)
        log_sum = op("math.log %s : f32" % total_exp, lines)
        label = op("affine.load %s[%s] : memref<%dxi64>" % (t.ref, r, t.flat), lines)
        ok = op("arith.andi %s, %s : i1" % (op("arith.cmpi sge, %s, %s : i64" % (label, f.const(0, "i64")), lines),
                                           op("arith.cmpi slt, %s, %s : i64" % (label, f.const(classes, "i64")),
                                              lines)), lines)
        safe = op("arith.select %s, %s, %s : i64" % (ok, label, f.const(0, "i64")), lines)
        index = op("arith.addi %s, %s : index" % (op("affine.apply affine_map<(d0) -> (d0 * %d)>(%s)" % (classes, r),
                                                      lines), op("arith.index_cast %s : i64 to index" % safe, lines)),
                   lines)
        xt = op("memref.load %s[%s] : memref<%dxf32>" % (x.ref, index, x.flat), lines)
        loss = fast("addf", fast("subf", mx, xt, lines), log_sum, lines)
        if e > 0:
            def shifted_step(c, acc, body):
                v = load(x, c, body)
                return op("arith.addf %s, %s fastmath<reassoc, contract> : f32" % (acc, fast("subf", v, mx, body)),
                          body)
            shifted = _class_loop(f, lines, classes, f.const(0.0), shifted_step)
            smooth = fast("subf", log_sum, fast("divf", shifted, f.const(float(classes)), lines), lines)
            loss = fast("addf", fast("mulf", f.const(_as_f32(1.0 - e)), loss, lines),
                        fast("mulf", f.const(e), smooth, lines), lines)
        inv = fast("divf", f.const(1.0), total_exp, lines)
        c = f.tmp("i")
        lines.append("affine.for %s = 0 to %d {" % (c, classes))
        p = f.tmp()
        lines.append("  %s = affine.load %s[%s] : memref<%dxf32>" % (p, probs.ref, at(c), probs.flat))
        scaled = f.tmp()
        lines.append("  %s = arith.mulf %s, %s : f32" % (scaled, p, inv))
        lines.append("  affine.store %s, %s[%s] : memref<%dxf32>" % (scaled, probs.ref, at(c), probs.flat))
        lines.append("}")
        if reduction == 0:
            lines.append("affine.store %s, %s[%s] : memref<%dxf32>" % (loss, out.ref, r, out.flat))
        not_ok = op("arith.xori %s, %s : i1" % (ok, f.const(1, "i1")), lines)
        return lines, [op("arith.addf %s, %s : f32" % (total, loss), lines),
                       op("arith.ori %s, %s : i1" % (bad, not_ok), lines)]
    total, bad = _rows_loop(f, rows, [(f.const(0.0), "f32"), (f.const(0, "i1"), "i1")], row)
    f.check(bad, node.index)
    if reduction != 0:
        value = total if reduction == 2 else f.op("arith.divf %s, %s : f32" % (total, f.const(float(rows))))
        f.body.append("affine.store %s, %s[0] : memref<%dxf32>" % (value, out.ref, out.flat))


def _cross_entropy_backward(em, node, need):
    """d logits += (p - e / C - (1 - e) onehot(t)) * g, g the loss's gradient (scaled by 1/N for a mean)."""
    g, f = em.g, em.func
    logits, target = node.ins
    if logits not in need:
        return
    em.close()
    rows, classes = g.shapes[logits]
    e = _as_f32(node.attrs[1])
    reduction = int(node.attrs[0])
    probs, grad, t = em.aux[node.index], em.grads[logits], em.array(target)
    gy = em.grads[node.outs[0]]
    r, c = f.tmp("i"), f.tmp("i")
    body = f.body
    body.append("affine.for %s = 0 to %d {" % (r, rows))
    lines = []
    gv = f.op("affine.load %s[%s] : memref<%dxf32>" % (gy.ref, r if reduction == 0 else "0", gy.flat), lines)
    if reduction == 1:
        gv = f.op("arith.mulf %s, %s : f32" % (gv, f.const(_as_f32(1.0 / rows))), lines)
    at = "%s * %d + %s" % (r, classes, c)
    lines.append("affine.for %s = 0 to %d {" % (c, classes))
    inner = []
    p = f.op("affine.load %s[%s] : memref<%dxf32>" % (probs.ref, at, probs.flat), inner)
    d = f.op("arith.mulf %s, %s %s : f32" % (f.op("arith.subf %s, %s : f32" % (p, f.const(_as_f32(e / classes))),
                                                  inner), gv, FAST), inner)
    old = f.op("affine.load %s[%s] : memref<%dxf32>" % (grad.ref, at, grad.flat), inner)
    inner.append("affine.store %s, %s[%s] : memref<%dxf32>" % (f.op("arith.addf %s, %s : f32" % (old, d), inner),
                                                              grad.ref, at, grad.flat))
    lines.extend("  " + line for line in inner)
    lines.append("}")
    label = f.op("affine.load %s[%s] : memref<%dxi64>" % (t.ref, r, t.flat), lines)
    index = f.op("arith.addi %s, %s : index" % (
        f.op("affine.apply affine_map<(d0) -> (d0 * %d)>(%s)" % (classes, r), lines),
        f.op("arith.index_cast %s : i64 to index" % label, lines)), lines)
    old = f.op("memref.load %s[%s] : memref<%dxf32>" % (grad.ref, index, grad.flat), lines)
    new = f.op("arith.subf %s, %s : f32" % (old, f.op("arith.mulf %s, %s : f32" % (f.const(_as_f32(1.0 - e)), gv),
                                                      lines)), lines)
    lines.append("memref.store %s, %s[%s] : memref<%dxf32>" % (new, grad.ref, index, grad.flat))
    body.extend("  " + line for line in lines)
    body.append("}")


# ---- softmax and log_softmax over the last dim ---------------------------------------

def _softmax_rows(g, node):
    """(rows, classes) of a softmax over node's input's last dim."""
    shape = g.shapes[node.ins[0]]
    classes = shape[-1] if shape else 1
    return _size(shape) // max(classes, 1), classes


def _softmax(em, node):
    """softmax: e^(x - max) / sum; log_softmax: x - max - log(sum), row by row."""
    f = em.func
    rows, classes = _softmax_rows(em.g, node)
    x, y = em.read(node.ins[0]), em.array(node.outs[0])
    em.made.add(node.outs[0])
    em.stored.add(node.outs[0])
    is_log = node.op == "log_softmax"

    def row(r, names):
        lines = []
        at, load = _row_access(f, r, classes)

        def max_step(c, acc, body):
            return f.op("arith.maximumf %s, %s : f32" % (acc, load(x, c, body)), body)
        mx = _class_loop(f, lines, classes, f.const(float("-inf")), max_step)

        def exp_step(c, acc, body):
            ex = f.op("math.exp %s : f32" % f.op("arith.subf %s, %s : f32" % (load(x, c, body), mx), body), body)
            if not is_log:
                body.append("affine.store %s, %s[%s] : memref<%dxf32>" % (ex, y.ref, at(c), y.flat))
            return f.op("arith.addf %s, %s fastmath<reassoc, contract> : f32" % (acc, ex), body)
        total = _class_loop(f, lines, classes, f.const(0.0), exp_step)
        shift = (f.op("arith.addf %s, %s : f32" % (mx, f.op("math.log %s : f32" % total, lines)), lines)
                 if is_log else f.op("arith.divf %s, %s : f32" % (f.const(1.0), total), lines))
        c = f.tmp("i")
        inner = []
        if is_log:
            value = f.op("arith.subf %s, %s : f32" % (load(x, c, inner), shift), inner)
        else:
            value = f.op("arith.mulf %s, %s : f32" % (load(y, c, inner), shift), inner)
        inner.append("affine.store %s, %s[%s] : memref<%dxf32>" % (value, y.ref, at(c), y.flat))
        lines.append("affine.for %s = 0 to %d {" % (c, classes))
        lines.extend("  " + line for line in inner)
        lines.append("}")
        return lines, []
    _rows_loop(f, rows, [], row)


def _softmax_backward(em, node, need):
    """softmax: dx += y (g - sum(g y)); log_softmax: dx += g - e^y sum(g), row by row."""
    f = em.func
    if node.ins[0] not in need:
        return
    em.close()
    rows, classes = _softmax_rows(em.g, node)
    y, gy, gx = em.array(node.outs[0]), em.grads[node.outs[0]], em.grads[node.ins[0]]
    is_log = node.op == "log_softmax"

    def row(r, names):
        lines = []
        at, load = _row_access(f, r, classes)

        def dot_step(c, acc, body):
            term = load(gy, c, body) if is_log else f.op("arith.mulf %s, %s : f32" % (load(gy, c, body),
                                                                                       load(y, c, body)), body)
            return f.op("arith.addf %s, %s fastmath<reassoc, contract> : f32" % (acc, term), body)
        total = _class_loop(f, lines, classes, f.const(0.0), dot_step)
        c = f.tmp("i")
        inner = []
        yv, gv = load(y, c, inner), load(gy, c, inner)
        if is_log:
            d = f.op("arith.subf %s, %s : f32" % (gv, f.op("arith.mulf %s, %s : f32" % (
                f.op("math.exp %s : f32" % yv, inner), total), inner)), inner)
        else:
            d = f.op("arith.mulf %s, %s : f32" % (yv, f.op("arith.subf %s, %s : f32" % (gv, total), inner)), inner)
        new = f.op("arith.addf %s, %s : f32" % (load(gx, c, inner), d), inner)
        inner.append("affine.store %s, %s[%s] : memref<%dxf32>" % (new, gx.ref, at(c), gx.flat))
        lines.append("affine.for %s = 0 to %d {" % (c, classes))
        lines.extend("  " + line for line in inner)
        lines.append("}")
        return lines, []
    _rows_loop(f, rows, [], row)
