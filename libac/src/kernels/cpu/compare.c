/*
 * cpu/compare.c - the CPU's kernels for compare.c: comparisons, logical ops,
 * where and where's backward over an AcBroadcast.
 *
 * One walk serves them all: it steps through the output in row-major order
 * keeping each operand's offset, so nothing is materialised. Operands of any
 * dtype are compared as numbers (elem_get: int64 exactly below 2^53). These
 * ops test masks and count predictions, not hot training loops.
 */
#include "kernels/cpu/cpu_kernels.h"

/* Step the row-major index of the output by one, moving each operand's offset. */
static void broadcast_next(const AcBroadcast *b, int n, int64_t *index, int64_t *at)
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

static int logical(int op, double u, double v)
{
    if (op == AC_AND) return u != 0.0 && v != 0.0;
    if (op == AC_OR) return u != 0.0 || v != 0.0;
    return (u != 0.0) != (v != 0.0);
}

/* Element i of t, an integer or bool tensor, exactly. */
static int64_t elem_int(const AcTensor *t, int64_t i)
{
    switch (t->dtype) {
    case AC_INT64: return data_i64(t)[i];
    case AC_INT8: return (int8_t)data_u8(t)[i];
    default: return data_u8(t)[i];
    }
}

static int test_int(int op, int64_t u, int64_t v)
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

/* out (bool) = a <op> b, or a <op> s when b is NULL; logical ops when is_logical.
   Comparisons of two non-float operands are exact in int64; a float32 operand
   compares as float32 with the other converted, and s as a float32. */
static int compare_walk(AcTensor *out, const AcTensor *a, const AcTensor *b, double s, int op,
                        int is_logical, const AcBroadcast *plan)
{
    int64_t index[AC_MAX_DIMS] = {0}, at[2] = {0, 0}, i;
    uint8_t *o = data_u8(out);
    if (!is_logical && b && a->dtype != AC_FLOAT32 && b->dtype != AC_FLOAT32) {
        for (i = 0; i < out->size; i++) {
            o[i] = (uint8_t)test_int(op, elem_int(a, at[0]), elem_int(b, at[1]));
            broadcast_next(plan, 2, index, at);
        }
        return AC_OK;
    }
    if (!is_logical) {
        for (i = 0; i < out->size; i++) {
            float u = (float)elem_get(a, at[0]), v = (float)(b ? elem_get(b, at[1]) : s);
            o[i] = (uint8_t)test(op, u, v);
            broadcast_next(plan, b ? 2 : 1, index, at);
        }
        return AC_OK;
    }
    for (i = 0; i < out->size; i++) {
        double u = elem_get(a, at[0]), v = b ? elem_get(b, at[1]) : s;
        o[i] = (uint8_t)(is_logical ? logical(op, u, v) : test(op, u, v));
        broadcast_next(plan, b ? 2 : 1, index, at);
    }
    return AC_OK;
}

int cpu_compare(AcTensor *out, const AcTensor *a, const AcTensor *b, double s, int op,
                const AcBroadcast *plan)
{
    return compare_walk(out, a, b, s, op, 0, plan);
}

int cpu_logical(AcTensor *out, const AcTensor *a, const AcTensor *b, int op,
                const AcBroadcast *plan)
{
    return compare_walk(out, a, b, 0.0, op, 1, plan);
}

int cpu_where(AcTensor *out, const AcTensor *cond, const AcTensor *a, const AcTensor *b,
              const AcBroadcast *plan)
{
    int64_t index[AC_MAX_DIMS] = {0}, at[3] = {0, 0, 0}, i;
    const size_t bytes = elem_size(out);   /* a and b have out's dtype */
    char *o = (char *)out->data;
    for (i = 0; i < out->size; i++) {
        if (bytes == 4)
            out->data[i] = data_u8(cond)[at[2]] ? a->data[at[0]] : b->data[at[1]];
        else if (bytes == 8)
            data_i64(out)[i] = data_u8(cond)[at[2]] ? data_i64(a)[at[0]] : data_i64(b)[at[1]];
        else
            o[i] = (char)(data_u8(cond)[at[2]] ? data_u8(a)[at[0]] : data_u8(b)[at[1]]);
        broadcast_next(plan, 3, index, at);
    }
    return AC_OK;
}

int cpu_where_backward(AcTensor *g, const AcTensor *gout, const AcTensor *cond, int picked_when,
                       const AcBroadcast *plan)
{
    int64_t index[AC_MAX_DIMS] = {0}, at[2] = {0, 0}, i;
    for (i = 0; i < g->size; i++) {
        g->data[i] = (data_u8(cond)[at[1]] != 0) == picked_when ? gout->data[i] : 0.0f;
        broadcast_next(plan, 2, index, at);
    }
    return AC_OK;
}
