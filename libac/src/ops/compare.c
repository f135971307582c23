/*
 * compare.c - comparisons (eq, ne, lt, le, gt, ge), logical and/or/xor/not,
 * and where: the ops that make and use bool tensors. Operands broadcast by
 * NumPy's rules and may be of any dtype: they are compared as numbers (int64
 * exactly, as doubles, below 2^53). Only where is differentiable, in its two
 * value operands; its backward sits under it.
 *
 * Here are the shapes and the broadcast plan (AcBroadcast); the walks are in
 * the device's kernel table (kernels/cpu/compare.c for the CPU).
 *
 * Not here: arithmetic (elementwise.c), sums of bool and int64 (reduce.c).
 */
#include "kernels/kernels.h"

#include <string.h>

/* The output shape of up to three broadcast operands, and their strides in it. */
static int broadcast_plan(const char *op, const AcTensor *const *in, int n, AcBroadcast *b)
{
    AcTensor shape_only;
    int i;
    memset(&shape_only, 0, sizeof shape_only);
    shape_only.ndim = in[0]->ndim;
    memcpy(shape_only.shape, in[0]->shape, sizeof shape_only.shape);
    for (i = 1; i < n; i++) {
        if (broadcast_shapes(op, &shape_only, in[i], b->shape, &b->ndim)) return -1;
        shape_only.ndim = b->ndim;
        memcpy(shape_only.shape, b->shape, sizeof shape_only.shape);
    }
    if (n == 1) {
        b->ndim = in[0]->ndim;
        memcpy(b->shape, in[0]->shape, sizeof b->shape);
    }
    for (i = 0; i < n; i++) broadcast_strides(in[i], b->shape, b->ndim, b->strides[i]);
    return AC_OK;
}

/* A bool tensor of plan's shape on the operands' device. */
static AcTensor *bool_output(const char *op, const AcTensor *const *in, int n,
                             const AcBroadcast *plan)
{
    const AcTensor *on = common_device(op, in, n);
    if (!on) return NULL;
    return tensor_create_on(op, plan->shape, plan->ndim, AC_BOOL, NULL, 0, 0, on->device,
                            on->device_index);
}

/* out (bool) = a <kind> b (or s when b is NULL), logical ops when logical. */
static AcTensor *compare_run(const char *op, const AcTensor *a, const AcTensor *b, double s,
                             int kind, int logical)
{
    const AcKernels *k;
    const AcTensor *in[2];
    AcBroadcast plan;
    AcTensor *out;
    int status;
    in[0] = a;
    in[1] = b;
    if (broadcast_plan(op, in, b ? 2 : 1, &plan)) return NULL;
    if (!(out = bool_output(op, in, 2, &plan))) return NULL;
    k = kernels_for(out);
    if (logical)
        status = k->logical ? k->logical(out, a, b, kind, &plan) : kernel_missing(op, out);
    else
        status = k->compare ? k->compare(out, a, b, s, kind, &plan) : kernel_missing(op, out);
    if (status) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

static const char *compare_name(int op)
{
    static const char *names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    return op >= AC_EQ && op <= AC_GE ? names[op] : "compare";
}

/* t converted to dtype into *copy when its dtype differs (and the kernel could
   not read it as dtype exactly: every integer reads exactly as int64); t itself
   otherwise. NULL on an error. */
static const AcTensor *in_dtype(const AcTensor *t, int dtype, AcTensor **copy)
{
    *copy = NULL;
    if (t->dtype == dtype || (dtype == AC_INT64 && t->dtype != AC_FLOAT32)) return t;
    return *copy = ac_to_dtype(t, dtype);
}

/* The promoted dtype of a and b (flags: AC_SCALAR_A / AC_SCALAR_B), or < 0 with
   the error set, naming op. */
static int promoted(const char *op, const AcTensor *a, const AcTensor *b, int flags)
{
    int dtype = ac_result_type(a->dtype, (flags & AC_SCALAR_A) ? AC_KIND_SCALAR : a->ndim ? AC_KIND_TENSOR : AC_KIND_ZERO_DIM,
                               b->dtype, (flags & AC_SCALAR_B) ? AC_KIND_SCALAR : b->ndim ? AC_KIND_TENSOR : AC_KIND_ZERO_DIM);
    if (dtype < 0)
        error_set(AC_ERR_DTYPE, "%s: operands of dtypes %s and %s have no common dtype in aicraft", op,
                  ac_dtype_name(a->dtype), ac_dtype_name(b->dtype));
    return dtype;
}

AcTensor *ac_compare_typed(const AcTensor *a, const AcTensor *b, int op, int flags)
{
    const char *name = compare_name(op);
    AcTensor *ca = NULL, *cb = NULL, *out = NULL;
    const AcTensor *x, *y;
    int dtype;
    if (tensor_check_any(name, a, "a") || tensor_check_any(name, b, "b")) return NULL;
    if (op < AC_EQ || op > AC_GE) return error_null(AC_ERR_ARG, "compare: unknown comparison %d", op);
    if ((dtype = promoted(name, a, b, flags)) < 0) return NULL;
    if ((x = in_dtype(a, dtype, &ca)) && (y = in_dtype(b, dtype, &cb))) out = compare_run(name, x, y, 0.0, op, 0);
    ac_tensor_free(ca);
    ac_tensor_free(cb);
    return out;
}

AcTensor *ac_compare(const AcTensor *a, const AcTensor *b, int op)
{
    return ac_compare_typed(a, b, op, 0);
}

AcTensor *ac_compare_scalar(const AcTensor *a, double s, int op)
{
    const char *name = compare_name(op);
    if (tensor_check_any(name, a, "a")) return NULL;
    if (op < AC_EQ || op > AC_GE) return error_null(AC_ERR_ARG, "compare: unknown comparison %d", op);
    return compare_run(name, a, NULL, s, op, 0);
}

AcTensor *ac_logical(const AcTensor *a, const AcTensor *b, int op)
{
    static const char *names[] = {"logical_and", "logical_or", "logical_xor"};
    const char *name = op >= AC_AND && op <= AC_XOR ? names[op] : "logical";
    if (tensor_check_any(name, a, "a") || tensor_check_any(name, b, "b")) return NULL;
    if (op < AC_AND || op > AC_XOR) return error_null(AC_ERR_ARG, "logical: unknown op %d", op);
    return compare_run(name, a, b, 0.0, op, 1);
}

AcTensor *ac_logical_not(const AcTensor *a)
{
    if (tensor_check_any("logical_not", a, "a")) return NULL;
    return compare_run("logical_not", a, NULL, 0.0, AC_EQ, 0);   /* not a == a == 0 */
}

/* ---- where ------------------------------------------------------------------ */

/* Node inputs: a, b, cond. Each value operand's gradient is the output
   gradient where it was picked and 0 elsewhere, summed to its own shape. */
static AcTensor *where_grad(const AcTensor *gout, const AcTensor *cond, int picked_when,
                            const AcTensor *like)
{
    const AcKernels *k = kernels_for(gout);
    const AcTensor *in[2];
    AcBroadcast plan;
    AcTensor *g;
    in[0] = gout;
    in[1] = cond;
    if (!k->where_backward) {
        kernel_missing("where", gout);
        return NULL;
    }
    if (broadcast_plan("where", in, 2, &plan)) return NULL;
    g = tensor_alloc_like("where", gout);
    if (!g || k->where_backward(g, gout, cond, picked_when, &plan)) return NULL;
    return reduce_to_shape(g, like);
}

static int where_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *cond = node->inputs[2];
    int i;
    for (i = 0; i < 2; i++) {
        if (!input_needs_grad(node, i)) continue;
        gin[i] = where_grad(gout, cond, i == 0, node->inputs[i]);
        if (!gin[i]) return ac_last_error_code();
    }
    return AC_OK;
}

/* where of a and b, both of dtype. */
static AcTensor *where_run(const AcTensor *cond, const AcTensor *a, const AcTensor *b, int dtype)
{
    const AcKernels *k;
    const AcTensor *in[3];
    AcBroadcast plan;
    AcTensor *out;
    int status;
    in[0] = a;
    in[1] = b;
    in[2] = cond;
    if (broadcast_plan("where", in, 3, &plan)) return NULL;
    out = op_output_as("where", dtype, plan.shape, plan.ndim, in, 3, where_backward, 0);
    if (!out) return NULL;
    k = kernels_for(out);
    status = k->where ? k->where(out, cond, a, b, &plan) : kernel_missing("where", out);
    if (status) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

AcTensor *ac_where_typed(const AcTensor *cond, const AcTensor *a, const AcTensor *b, int flags)
{
    AcTensor *ca = NULL, *cb = NULL, *out = NULL;
    const AcTensor *x, *y;
    int dtype;
    if (tensor_check_any("where", cond, "cond") || tensor_check_any("where", a, "a") ||
        tensor_check_any("where", b, "b"))
        return NULL;
    if (cond->dtype != AC_BOOL)
        return error_null(AC_ERR_DTYPE, "where: cond is %s; it must be bool", ac_dtype_name(cond->dtype));
    if ((dtype = promoted("where", a, b, flags)) < 0) return NULL;
    x = a->dtype == dtype ? a : (ca = ac_to_dtype(a, dtype));
    y = b->dtype == dtype ? b : (cb = ac_to_dtype(b, dtype));
    if (x && y) out = where_run(cond, x, y, dtype);
    ac_tensor_free(ca);
    ac_tensor_free(cb);
    return out;
}

AcTensor *ac_where(const AcTensor *cond, const AcTensor *a, const AcTensor *b)
{
    return ac_where_typed(cond, a, b, 0);
}
