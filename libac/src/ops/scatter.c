/*
 * scatter.c - writing values into a copy of a tensor at int64 positions along
 * one dim: PyTorch's scatter (a plain write), scatter_add and scatter_reduce
 * (sum, prod, mean, amax, amin; with or without the input's own values), for
 * every dtype, exact (int64 sums in int64, uint8 wrapping, bool as logic).
 * The forward and its backward sit side by side; index_add, index_copy,
 * index_fill, masked_scatter and one_hot's Python forms are built on it
 * (aicraft/shapes.py).
 *
 * Every op here first resolves index into two arrays of offsets, target[i] (in
 * the output) and source[i] (in src), so the loops per dtype and the backward
 * read the same plan.
 *
 * Not here: reading by index (gather, index_select: index.c).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

typedef struct {
    int dim, reduce, include_self;
} ScatterCtx;

typedef struct {
    int64_t n;          /* index's elements */
    int64_t *target;    /* n offsets into the output (a's shape) */
    int64_t *source;    /* n offsets into src */
} ScatterPlan;

static void plan_free(ScatterPlan *p)
{
    scratch_free(p->target, (size_t)(2 * p->n + 1) * sizeof(int64_t));
}

/* Check a, index and src against each other and resolve the offsets. */
static int scatter_plan(const char *op, const AcTensor *a, int dim, const AcTensor *index,
                        const AcTensor *src, ScatterPlan *p)
{
    int64_t coord[AC_MAX_DIMS] = {0}, a_stride[AC_MAX_DIMS], s_stride[AC_MAX_DIMS], i, n;
    int d;
    if (index->dtype != AC_INT64)
        return error_set(AC_ERR_DTYPE, "%s: index is %s; it must be int64", op, ac_dtype_name(index->dtype));
    if (src->dtype != a->dtype)
        return error_set(AC_ERR_DTYPE, "%s: src is %s and input is %s; they must have the same dtype",
                         op, ac_dtype_name(src->dtype), ac_dtype_name(a->dtype));
    if (index->ndim != a->ndim || (src->ndim != a->ndim && index->size > 0))
        return error_set(AC_ERR_SHAPE, "%s: index %s, src %s and input %s must have the same number of dims",
                         op, tensor_shape_str(index), tensor_shape_str(src), tensor_shape_str(a));
    for (d = 0; d < index->ndim && index->size > 0; d++) {
        if (index->shape[d] > src->shape[d] || (d != dim && index->shape[d] > a->shape[d]))
            return error_set(AC_ERR_SHAPE, "%s: index %s is larger than src %s or input %s at dim %d",
                             op, tensor_shape_str(index), tensor_shape_str(src), tensor_shape_str(a), d);
    }
    a_stride[a->ndim > 0 ? a->ndim - 1 : 0] = 1;
    s_stride[a->ndim > 0 ? a->ndim - 1 : 0] = 1;
    for (d = a->ndim - 2; d >= 0; d--) {
        a_stride[d] = a_stride[d + 1] * a->shape[d + 1];
        s_stride[d] = s_stride[d + 1] * (index->size > 0 ? src->shape[d + 1] : 1);
    }
    n = a->ndim > 0 ? a->shape[dim] : 1;
    p->n = index->size;
    p->target = scratch_alloc((size_t)(2 * p->n + 1) * sizeof(int64_t));
    if (!p->target) return AC_ERR_MEMORY;
    p->source = p->target + p->n;
    for (i = 0; i < p->n; i++) {
        int64_t v = data_i64(index)[i], t = 0, s = 0;
        if (v < 0 || v >= n) {
            plan_free(p);
            return error_set(AC_ERR_INDEX, "%s: index %lld is out of bounds for dim %d with size %lld "
                             "(input %s, index %s)", op, (long long)v, dim, (long long)n,
                             tensor_shape_str(a), tensor_shape_str(index));
        }
        for (d = 0; d < a->ndim; d++) {
            t += (d == dim ? v : coord[d]) * a_stride[d];
            s += coord[d] * s_stride[d];
        }
        p->target[i] = t;
        p->source[i] = s;
        for (d = index->ndim - 1; d >= 0; d--) {
            if (++coord[d] < index->shape[d]) break;
            coord[d] = 0;
        }
    }
    return AC_OK;
}

/* ---- the loops, one per dtype ---------------------------------------------- */

/* Before a reduction without the input's values, each target starts at the
   reduction's identity; count (mean) starts at 1 with them, else 0. */
static void scatter_f32(float *out, const float *src, const ScatterPlan *p, int reduce,
                        int include_self, int64_t *count)
{
    int64_t i;
    if (!include_self)
        for (i = 0; i < p->n; i++)
            out[p->target[i]] = reduce == AC_SCATTER_PROD ? 1.0f : reduce == AC_SCATTER_AMAX ? -INFINITY
                              : reduce == AC_SCATTER_AMIN ? INFINITY : 0.0f;
    for (i = 0; i < p->n; i++) {
        float *o = out + p->target[i], v = src[p->source[i]];
        switch (reduce) {
        case AC_SCATTER_SUM: *o += v; break;
        case AC_SCATTER_PROD: *o *= v; break;
        case AC_SCATTER_MEAN: *o += v; count[p->target[i]]++; break;
        case AC_SCATTER_AMAX: if (v > *o || v != v) *o = v; break;
        case AC_SCATTER_AMIN: if (v < *o || v != v) *o = v; break;
        default: *o = v; break;
        }
    }
    if (reduce == AC_SCATTER_MEAN)
        for (i = 0; i < p->n; i++)
            if (count[p->target[i]] > 0) {
                out[p->target[i]] /= (float)count[p->target[i]];
                count[p->target[i]] = -count[p->target[i]];   /* divided once */
            }
}

/* int64 sums and products wrap, as PyTorch's (in unsigned arithmetic: no UB). */
static void scatter_i64(int64_t *out, const int64_t *src, const ScatterPlan *p, int reduce,
                        int include_self, int64_t *count)
{
    int64_t i;
    if (!include_self)
        for (i = 0; i < p->n; i++)
            out[p->target[i]] = reduce == AC_SCATTER_PROD ? 1 : reduce == AC_SCATTER_AMAX ? INT64_MIN
                              : reduce == AC_SCATTER_AMIN ? INT64_MAX : 0;
    for (i = 0; i < p->n; i++) {
        int64_t *o = out + p->target[i], v = src[p->source[i]];
        switch (reduce) {
        case AC_SCATTER_SUM: *o = (int64_t)((uint64_t)*o + (uint64_t)v); break;
        case AC_SCATTER_PROD: *o = (int64_t)((uint64_t)*o * (uint64_t)v); break;
        case AC_SCATTER_MEAN: *o = (int64_t)((uint64_t)*o + (uint64_t)v); count[p->target[i]]++; break;
        case AC_SCATTER_AMAX: if (v > *o) *o = v; break;
        case AC_SCATTER_AMIN: if (v < *o) *o = v; break;
        default: *o = v; break;
        }
    }
    if (reduce == AC_SCATTER_MEAN)   /* floor division, as PyTorch's integer mean */
        for (i = 0; i < p->n; i++) {
            int64_t c = count[p->target[i]], *o = out + p->target[i], q;
            if (c <= 0) continue;
            q = *o / c;
            if ((*o % c != 0) && (*o < 0)) q--;
            *o = q;
            count[p->target[i]] = -c;
        }
}

/* uint8 wraps; bool is logic: sum and amax are or, prod and amin and. */
static void scatter_u8(uint8_t *out, const uint8_t *src, const ScatterPlan *p, int reduce,
                       int include_self, int64_t *count, int is_bool)
{
    int64_t i;
    if (!include_self)
        for (i = 0; i < p->n; i++)
            out[p->target[i]] = reduce == AC_SCATTER_PROD ? 1 : reduce == AC_SCATTER_AMIN ? (is_bool ? 1 : 255) : 0;
    for (i = 0; i < p->n; i++) {
        uint8_t *o = out + p->target[i], v = src[p->source[i]];
        switch (reduce) {
        case AC_SCATTER_SUM: *o = is_bool ? (*o | v) : (uint8_t)(*o + v); break;
        case AC_SCATTER_PROD: *o = is_bool ? (*o & v) : (uint8_t)(*o * v); break;
        case AC_SCATTER_MEAN: *o = (uint8_t)(*o + v); count[p->target[i]]++; break;
        case AC_SCATTER_AMAX: if (v > *o) *o = v; break;
        case AC_SCATTER_AMIN: if (v < *o) *o = v; break;
        default: *o = v; break;
        }
    }
    if (reduce == AC_SCATTER_MEAN)
        for (i = 0; i < p->n; i++)
            if (count[p->target[i]] > 0) {
                out[p->target[i]] = (uint8_t)(out[p->target[i]] / count[p->target[i]]);
                count[p->target[i]] = -count[p->target[i]];
            }
}

/* out (a copy of a) reduced with src at the plan's offsets; count: a's size,
   used by mean (zeroed or set to 1 here), may be NULL for the others. */
static void scatter_run(const AcTensor *a, const AcTensor *src, const ScatterPlan *p, int reduce,
                        int include_self, void *out, int64_t *count)
{
    int64_t i;
    memcpy(out, a->data, (size_t)a->size * elem_size(a));
    if (count) for (i = 0; i < a->size; i++) count[i] = include_self ? 1 : 0;
    switch (a->dtype) {
    case AC_FLOAT32: scatter_f32(out, src->data, p, reduce, include_self, count); break;
    case AC_INT64: scatter_i64(out, data_i64(src), p, reduce, include_self, count); break;
    default: scatter_u8(out, data_u8(src), p, reduce, include_self, count, a->dtype == AC_BOOL); break;
    }
}

/* ---- backward ------------------------------------------------------------- */

/*
 * Node inputs: a, index, src. Per target t, the forward's result r[t] and, by
 * reduction: none, the input's gradient is zero where src wrote (src gets the
 * output gradient there); sum, both get it; mean, both get it over the count;
 * amax/amin, the values equal to r[t] share it; prod, each gets it times the
 * product of the others.
 */
static int scatter_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const ScatterCtx *ctx = node->context;
    const AcTensor *a = node->inputs[0], *index = node->inputs[1], *src = node->inputs[2];
    const float *g = gout->data, *x = a->data, *s = src->data;
    float *r = NULL, *share = NULL, *ga = NULL, *gs = NULL;
    int64_t *count = NULL, i;
    size_t bytes = (size_t)a->size * (2 * sizeof(float) + sizeof(int64_t)) + 1;
    char *scratch;
    ScatterPlan p;
    int rc = scatter_plan("scatter", a, ctx->dim, index, src, &p), self = ctx->include_self;
    if (rc) return rc;
    scratch = scratch_alloc(bytes);
    if (!scratch) {
        plan_free(&p);
        return AC_ERR_MEMORY;
    }
    count = (int64_t *)(void *)scratch;
    r = (float *)(void *)(scratch + (size_t)a->size * sizeof(int64_t));
    share = r + a->size;
    if (input_needs_grad(node, 0)) {
        gin[0] = tensor_alloc("scatter", a->shape, a->ndim);
        if (!gin[0]) rc = ac_last_error_code();
        else ga = gin[0]->data;
    }
    if (!rc && input_needs_grad(node, 2)) {
        gin[2] = tensor_alloc("scatter", src->shape, src->ndim);
        if (!gin[2]) rc = ac_last_error_code();
        else {
            gs = gin[2]->data;
            memset(gs, 0, (size_t)src->size * sizeof(float));
        }
    }
    if (rc) goto done;
    scatter_run(a, src, &p, ctx->reduce, self, r, count);
    /* share[t]: what one contributor's gradient is per unit (see each case) */
    for (i = 0; i < a->size; i++) share[i] = g[i];
    if (ctx->reduce == AC_SCATTER_MEAN) {
        for (i = 0; i < a->size; i++) share[i] = g[i] / (float)(count[i] < 0 ? -count[i] : count[i] > 0 ? count[i] : 1);
    } else if (ctx->reduce == AC_SCATTER_AMAX || ctx->reduce == AC_SCATTER_AMIN) {
        /* as PyTorch, the input's tie counts even when it was left out (include_self 0) */
        for (i = 0; i < a->size; i++) count[i] = x[i] == r[i];
        for (i = 0; i < p.n; i++) count[p.target[i]] += s[p.source[i]] == r[p.target[i]];
        for (i = 0; i < a->size; i++) share[i] = count[i] > 0 ? g[i] / (float)count[i] : 0.0f;
    } else if (ctx->reduce == AC_SCATTER_PROD) {
        /* count: zeros among the contributors; r: the product of the others */
        for (i = 0; i < a->size; i++) {
            count[i] = self && x[i] == 0.0f;
            r[i] = self && x[i] != 0.0f ? x[i] : 1.0f;
        }
        for (i = 0; i < p.n; i++) {
            float v = s[p.source[i]];
            if (v == 0.0f) count[p.target[i]]++;
            else r[p.target[i]] *= v;
        }
    }
    if (ga) {
        /* untouched targets pass the gradient through; the touched ones get their share */
        memcpy(ga, g, (size_t)a->size * sizeof(float));
        for (i = 0; i < p.n; i++) {
            int64_t t = p.target[i];
            if (ctx->reduce == AC_SCATTER_NONE || !self)
                ga[t] = 0.0f;
            else if (ctx->reduce == AC_SCATTER_PROD)
                ga[t] = x[t] != 0.0f ? (count[t] == 0 ? g[t] * r[t] / x[t] : 0.0f)
                                     : (count[t] == 1 ? g[t] * r[t] : 0.0f);
            else if (ctx->reduce == AC_SCATTER_AMAX || ctx->reduce == AC_SCATTER_AMIN)
                ga[t] = x[t] == r[t] ? share[t] : 0.0f;
            else
                ga[t] = share[t];
        }
    }
    if (gs) {
        for (i = 0; i < p.n; i++) {
            int64_t t = p.target[i];
            float v = s[p.source[i]], grad;
            if (ctx->reduce == AC_SCATTER_PROD)
                grad = v != 0.0f ? (count[t] == 0 ? g[t] * r[t] / v : 0.0f) : (count[t] == 1 ? g[t] * r[t] : 0.0f);
            else if (ctx->reduce == AC_SCATTER_AMAX || ctx->reduce == AC_SCATTER_AMIN)
                grad = v == r[t] ? share[t] : 0.0f;
            else
                grad = share[t];
            gs[p.source[i]] += grad;
        }
    }
done:
    scratch_free(scratch, bytes);
    plan_free(&p);
    return rc;
}

/* ---- forward ---------------------------------------------------------------- */

int scatter_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[3] = ac_scatter(t[0], (int)attr[0], t[1], t[2], (int)attr[1], (int)attr[2]));
}

AcTensor *ac_scatter(const AcTensor *a, int dim, const AcTensor *index, const AcTensor *src,
                     int reduce, int include_self)
{
    if (ops_observed)
        return graph_op("scatter", scatter_replay, 3, (const AcTensor *[]){a, index, src},
                        (double[]){dim, reduce, include_self != 0}, 3);
    const char *op = reduce == AC_SCATTER_NONE ? "scatter" : reduce == AC_SCATTER_SUM ? "scatter_add"
                                                                                       : "scatter_reduce";
    const AcTensor *inputs[3];
    int64_t *count = NULL;
    size_t count_bytes = 0;
    ScatterCtx *ctx;
    ScatterPlan p;
    AcTensor *out;
    if (tensor_check_any(op, a, "input") || tensor_check_any(op, index, "index") ||
        tensor_check_any(op, src, "src") || cpu_only(op, (const AcTensor *[]){a, index, src}, 3))
        return NULL;
    if (reduce < AC_SCATTER_NONE || reduce > AC_SCATTER_AMIN)
        return error_null(AC_ERR_ARG, "%s: reduce %d is not one of AcScatterReduce", op, reduce);
    if (reduce == AC_SCATTER_MEAN && a->dtype == AC_BOOL)
        return error_null(AC_ERR_DTYPE, "%s: mean of bool values is not defined", op);
    dim = dim_normalize(op, dim, a->ndim);
    if (dim < 0 || scatter_plan(op, a, dim, index, src, &p)) return NULL;
    inputs[0] = a;
    inputs[1] = index;
    inputs[2] = src;
    out = op_output_as(op, a->dtype, a->shape, a->ndim, inputs, 3, scatter_backward, sizeof(ScatterCtx));
    if (out && reduce == AC_SCATTER_MEAN) {
        count_bytes = (size_t)a->size * sizeof(int64_t) + 1;
        count = scratch_alloc(count_bytes);
        if (!count) {
            ac_tensor_free(out);
            out = NULL;
        }
    }
    if (out) {
        ctx = op_context(out);
        if (ctx) {
            ctx->dim = dim;
            ctx->reduce = reduce;
            ctx->include_self = include_self != 0;
        }
        scatter_run(a, src, &p, reduce, include_self != 0, out->data, count);
    }
    if (count) scratch_free(count, count_bytes);
    plan_free(&p);
    return out;
}

/* ---- one_hot ------------------------------------------------------------------ */

AcTensor *ac_one_hot(const AcTensor *index, int64_t num_classes)
{
    const char *op = "one_hot";
    int64_t shape[AC_MAX_DIMS], i, max = -1;
    AcTensor *out;
    if (tensor_check_any(op, index, "input") || cpu_only(op, &index, 1)) return NULL;
    if (index->dtype != AC_INT64)
        return error_null(AC_ERR_DTYPE, "%s: input is %s; it must be int64", op, ac_dtype_name(index->dtype));
    if (index->ndim >= AC_MAX_DIMS)
        return error_null(AC_ERR_SHAPE, "%s: input %s already has the most dims (%d)", op,
                          tensor_shape_str(index), AC_MAX_DIMS);
    for (i = 0; i < index->size; i++) {
        int64_t v = data_i64(index)[i];
        if (v < 0)
            return error_null(AC_ERR_INDEX, "%s: class values must be non-negative, got %lld", op, (long long)v);
        if (v > max) max = v;
    }
    if (num_classes == -1) {
        if (index->size == 0)
            return error_null(AC_ERR_ARG, "%s: cannot infer the number of classes from an empty tensor", op);
        num_classes = max + 1;
    } else if (num_classes < 0) {
        return error_null(AC_ERR_ARG, "%s: num_classes must be -1 or non-negative, got %lld", op,
                          (long long)num_classes);
    } else if (max >= num_classes) {
        return error_null(AC_ERR_INDEX, "%s: class values must be smaller than num_classes %lld, got %lld",
                          op, (long long)num_classes, (long long)max);
    }
    memcpy(shape, index->shape, (size_t)index->ndim * sizeof(int64_t));
    shape[index->ndim] = num_classes;
    if (shape_check(op, shape, index->ndim + 1, NULL)) return NULL;
    out = tensor_create(op, shape, index->ndim + 1, AC_INT64, NULL, 0, 0);
    if (!out) return NULL;
    memset(out->data, 0, (size_t)out->size * sizeof(int64_t));
    for (i = 0; i < index->size; i++) data_i64(out)[i * num_classes + data_i64(index)[i]] = 1;
    return out;
}
