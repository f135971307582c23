/*
 * compare.c - comparisons (eq, ne, lt, le, gt, ge), logical and/or/xor/not,
 * and where: the ops that make and use bool tensors. Operands broadcast by
 * NumPy's rules and may be of any dtype: they are compared as numbers (int64
 * exactly, as doubles, below 2^53). Only where is differentiable, in its two
 * value operands; its backward sits under it.
 *
 * One walk serves them all (broadcast_walk): it steps through the output in
 * row-major order keeping each operand's offset, so nothing is materialised.
 * These ops test masks and count predictions, not hot training loops.
 *
 * Not here: arithmetic (elementwise.c), sums of bool and int64 (reduce.c).
 */
#include "internal.h"

#include <string.h>

/* The output shape of up to three broadcast operands, and their strides in it. */
typedef struct {
    int64_t shape[AC_MAX_DIMS];
    int ndim;
    int64_t strides[3][AC_MAX_DIMS];
} Broadcast;

static int broadcast_plan(const char *op, const AcTensor *const *in, int n, Broadcast *b)
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

/* Step the row-major index of the output by one, moving each operand's offset. */
static void broadcast_next(const Broadcast *b, int n, int64_t *index, int64_t *at)
{
    int d, k;
    for (d = b->ndim - 1; d >= 0; d--) {
        for (k = 0; k < n; k++) at[k] += b->strides[k][d];
        if (++index[d] < b->shape[d]) return;
        for (k = 0; k < n; k++) at[k] -= b->strides[k][d] * b->shape[d];
        index[d] = 0;
    }
}

static int test(int op, double u, double v)
{
    switch (op) {
    case AC_EQ: return u == v;
    case AC_NE: return u != v;
    case AC_LT: return u < v;
    case AC_LE: return u <= v;
    case AC_GT: return u > v;
    default: return u >= v;
    }
}

/* out (bool) = test(a, b) elementwise; b may be NULL for the scalar s. */
static AcTensor *compare_run(const char *op, const AcTensor *a, const AcTensor *b, double s,
                             int kind, int logical)
{
    const AcTensor *in[2];
    int64_t index[AC_MAX_DIMS] = {0}, at[2] = {0, 0}, i;
    Broadcast plan;
    AcTensor *out;
    uint8_t *o;
    in[0] = a;
    in[1] = b;
    if (broadcast_plan(op, in, b ? 2 : 1, &plan)) return NULL;
    out = tensor_create(op, plan.shape, plan.ndim, AC_BOOL, NULL, 0, 0);
    if (!out) return NULL;
    o = data_u8(out);
    for (i = 0; i < out->size; i++) {
        double u = elem_get(a, at[0]), v = b ? elem_get(b, at[1]) : s;
        if (!logical)
            o[i] = (uint8_t)test(kind, u, v);
        else if (kind == AC_AND)
            o[i] = u != 0.0 && v != 0.0;
        else if (kind == AC_OR)
            o[i] = u != 0.0 || v != 0.0;
        else
            o[i] = (u != 0.0) != (v != 0.0);
        broadcast_next(&plan, b ? 2 : 1, index, at);
    }
    return out;
}

static const char *compare_name(int op)
{
    static const char *names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    return op >= AC_EQ && op <= AC_GE ? names[op] : "compare";
}

AcTensor *ac_compare(const AcTensor *a, const AcTensor *b, int op)
{
    const char *name = compare_name(op);
    if (tensor_check_any(name, a, "a") || tensor_check_any(name, b, "b")) return NULL;
    if (op < AC_EQ || op > AC_GE) return error_null(AC_ERR_ARG, "compare: unknown comparison %d", op);
    return compare_run(name, a, b, 0.0, op, 0);
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
    const AcTensor *in[2];
    int64_t index[AC_MAX_DIMS] = {0}, at[2] = {0, 0}, i;
    Broadcast plan;
    AcTensor *g;
    in[0] = gout;
    in[1] = cond;
    if (broadcast_plan("where", in, 2, &plan)) return NULL;
    g = tensor_alloc("where", gout->shape, gout->ndim);
    if (!g) return NULL;
    for (i = 0; i < g->size; i++) {
        g->data[i] = (data_u8(cond)[at[1]] != 0) == picked_when ? gout->data[i] : 0.0f;
        broadcast_next(&plan, 2, index, at);
    }
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

AcTensor *ac_where(const AcTensor *cond, const AcTensor *a, const AcTensor *b)
{
    const AcTensor *in[3];
    int64_t index[AC_MAX_DIMS] = {0}, at[3] = {0, 0, 0}, i;
    Broadcast plan;
    AcTensor *out;
    if (tensor_check_any("where", cond, "cond") || tensor_check("where", a, "a") ||
        tensor_check("where", b, "b"))
        return NULL;
    if (cond->dtype != AC_BOOL)
        return error_null(AC_ERR_DTYPE, "where: cond is %s; it must be bool", ac_dtype_name(cond->dtype));
    in[0] = a;
    in[1] = b;
    in[2] = cond;
    if (broadcast_plan("where", in, 3, &plan)) return NULL;
    out = op_output_as("where", AC_FLOAT32, plan.shape, plan.ndim, in, 3, where_backward, 0);
    if (!out) return NULL;
    for (i = 0; i < out->size; i++) {
        out->data[i] = data_u8(cond)[at[2]] ? a->data[at[0]] : b->data[at[1]];
        broadcast_next(&plan, 3, index, at);
    }
    return out;
}
