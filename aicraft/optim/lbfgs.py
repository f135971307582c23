"""lbfgs.py - aicraft.optim.LBFGS, as torch.optim.LBFGS (after minFunc).

L-BFGS works on all parameters as one flat vector x. Each `step(closure)`
runs up to max_iter iterations: the direction d = -H g from the last
history_size pairs (y, s) of gradient and parameter changes (the two-loop
recursion, in C: libac/src/optim/lbfgs.c), then a move x = x + t d, with t
either fixed (lr; lr * min(1, 1 / sum(abs(g))) on the very first iteration) or
found by a line search satisfying the strong Wolfe conditions.

The iterations here follow PyTorch's step() line by line, with Python floats
for its scalars; every vector operation is a C call or an aicraft tensor op.
What outlives a step (the direction, the last gradient, the history) lives at
root, and the history's vectors are reused once it is full, so steps inside
`with ac.checkpoint():` keep memory flat.
"""
from numbers import Integral

from aicraft._ffi import ffi, lib
from aicraft._wrapping import _live
from aicraft.autograd import enable_grad
from aicraft.creation import tensor as _tensor
from aicraft.creation import zeros
from aicraft.errors import ShapeError, raise_error
from aicraft.optim.optimizer import Optimizer
from aicraft.tensor import Tensor


def _dot(a, b):
    return (a * b).sum().item()


def _abs_max(v):
    return v.abs().max().item()


def _root_flat(n):
    """A vector of n zeros at root, whatever scope is open."""
    return zeros(n).keep()


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), kept
    inside bounds (default: between x1 and x2); their middle if it has none."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square ** 0.5
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(obj_func, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """PyTorch's _strong_wolfe (from torch/optim's lswolfe.lua): bracket a step t
    along d, then zoom in until f(t) <= f + c1 t gtd and |f'(t)| <= -c2 gtd.
    obj_func(t) returns (loss, flat gradient) at x + t d. Returns the loss,
    gradient and t found, and the number of evaluations."""
    d_norm = _abs_max(d)
    f_new, g_new = obj_func(t)
    ls_func_evals = 1
    gtd_new = _dot(g_new, d)

    # bracket an interval containing a point satisfying the Wolfe criteria
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new, gtd_new
        f_new, g_new = obj_func(t)
        ls_func_evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1

    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # zoom: refine the bracket until a point in it satisfies the conditions
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        # A t too close to an end of the bracket, twice running or on it, is
        # moved 0.1 of the bracket's length inside.
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False

        f_new, g_new = obj_func(t)
        ls_func_evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1

        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            # Armijo condition not satisfied or not lower than the lowest point
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new, gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                # the old high becomes the new low
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos], bracket_gtd[high_pos] = bracket_g[low_pos], bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new, gtd_new

    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


def _positive_int(group, key):
    value = group[key]
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError("Invalid %s value: %r (must be an int >= 1)" % (key, value))


class LBFGS(Optimizer):
    """LBFGS(params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
    tolerance_change=1e-9, history_size=100, line_search_fn=None).

    step(closure) is required: closure re-evaluates the model, calls backward and
    returns the loss. max_eval defaults to max_iter * 5 // 4; line_search_fn is
    None or "strong_wolfe" (anything else raises ValueError here, where PyTorch
    raises RuntimeError at the first step). One parameter group only.

    State (kept under the first parameter, as PyTorch does): "func_evals",
    "n_iter", and after a step "d", "t", "old_dirs", "old_stps", "ro",
    "H_diag", "prev_flat_grad", "prev_loss".
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size,
                        line_search_fn=line_search_fn)
        self._check_group(defaults)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")

    def _check_group(self, group):
        if not 0.0 <= group["lr"]:
            raise ValueError("Invalid learning rate: %s" % group["lr"])
        for key in ("max_iter", "max_eval", "history_size"):
            _positive_int(group, key)
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise ValueError("only 'strong_wolfe' is supported as line_search_fn, not %r"
                             % (group["line_search_fn"],))

    # ---- the parameters as one flat vector ----------------------------------

    def _param_array(self):
        params = self.param_groups[0]["params"]
        return ffi.new("AcTensor *[]", [_live(p) for p in params]), len(params)

    def _numel(self):
        return sum(p.numel() for p in self.param_groups[0]["params"])

    def _gather_flat_grad(self):
        """The gradients, zeros for a parameter without one, as a new flat vector."""
        array, count = self._param_array()
        flat = zeros(self._numel())
        if lib.ac_grads_to_flat(array, count, flat._ptr) < 0:
            raise_error(flat)
        return flat

    def _add_grad(self, step_size, direction):
        array, count = self._param_array()
        if lib.ac_params_add_flat(array, count, step_size, direction._ptr) < 0:
            raise_error(direction)

    def _directional_evaluate(self, closure, x, t, d):
        """Loss and flat gradient at x + t d; the parameters are put back to x."""
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        array, count = self._param_array()
        if lib.ac_params_from_flat(array, count, x._ptr) < 0:
            raise_error(x)
        return loss, flat_grad

    def _direction(self, flat_grad, old_dirs, old_stps, ro, h_diag, d):
        """d = -H flat_grad over the history, in place (-h_diag flat_grad when it is empty)."""
        count = len(old_dirs)
        dirs = ffi.new("AcTensor *[]", [t._ptr for t in old_dirs])
        stps = ffi.new("AcTensor *[]", [t._ptr for t in old_stps])
        if lib.ac_lbfgs_direction(flat_grad._ptr, dirs, stps, ffi.new("float[]", ro), count, h_diag,
                                  ffi.new("float[]", count), d._ptr) < 0:
            raise_error(d)

    # ---- one step ----------------------------------------------------------

    def step(self, closure):
        """Up to max_iter L-BFGS iterations; returns the loss closure gave first."""
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        if not callable(closure):
            raise TypeError("LBFGS.step needs a closure that re-evaluates the loss, not %s"
                            % type(closure).__name__)

        def evaluate():
            with enable_grad():
                return closure()

        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        state = self.state[group["params"][0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = evaluate()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1

        flat_grad = self._gather_flat_grad()
        if _abs_max(flat_grad) <= tolerance_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        if d is None:
            d = _root_flat(flat_grad.numel())

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # the descent direction
            if state["n_iter"] == 1:
                old_dirs, old_stps, ro = [], [], []
                h_diag = 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = _dot(y, s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        # the oldest pair's vectors take the new one (no allocation)
                        y_slot, s_slot = old_dirs.pop(0), old_stps.pop(0)
                        ro.pop(0)
                        y_slot.copy_(y)
                        s_slot.copy_(s)
                    else:
                        y_slot, s_slot = y.keep(), s.keep()
                    old_dirs.append(y_slot)
                    old_stps.append(s_slot)
                    ro.append(1.0 / ys)
                    h_diag = ys / _dot(y, y)
            self._direction(flat_grad, old_dirs, old_stps, ro, h_diag, d)

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.keep()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # the step length
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / flat_grad.abs().sum().item()) * lr
            else:
                t = lr
            gtd = _dot(flat_grad, d)
            if gtd > -tolerance_change:
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = zeros(flat_grad.numel())
                array, count = self._param_array()
                if lib.ac_params_to_flat(array, count, x_init._ptr) < 0:
                    raise_error(x_init)
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    lambda step_t: self._directional_evaluate(evaluate, x_init, step_t, d),
                    t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = _abs_max(flat_grad) <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    # no use re-evaluating after the last iteration
                    loss = float(evaluate())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = _abs_max(flat_grad) <= tolerance_grad
                    ls_func_evals = 1

            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if _abs_max(d * t) <= tolerance_change:       # lack of progress
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    # ---- saving and loading ------------------------------------------------

    def state_dict(self):
        """As Optimizer.state_dict, the history's vectors copied too."""
        saved = super().state_dict()
        for entries in saved["state"].values():
            for name in ("old_dirs", "old_stps"):
                if entries.get(name) is not None:
                    entries[name] = [v.keep() for v in entries[name]]
            if entries.get("ro") is not None:
                entries["ro"] = list(entries["ro"])
        return saved

    def _load_entry(self, param, index, name, value):
        if value is None:
            return None
        if name in ("d", "prev_flat_grad"):
            return self._load_flat(index, name, value)
        if name in ("old_dirs", "old_stps"):
            return [self._load_flat(index, name, v) for v in value]
        if name == "ro":
            import numpy as np
            return [float(np.asarray(v, dtype=np.float64).reshape(())) for v in value]
        return super()._load_entry(param, index, name, value)

    def _load_flat(self, index, name, value):
        import numpy as np
        t = value if isinstance(value, Tensor) else _tensor(np.asarray(value, dtype=np.float32))
        if t.shape != (self._numel(),):
            raise ShapeError("load_state_dict: state %r of parameter %s has shape %s, but the "
                             "parameters have %d elements" % (name, index, t.shape, self._numel()))
        return t.keep()
