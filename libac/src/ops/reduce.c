/*
 * reduce.c - reductions: sum, mean, max, min, var and std over any set of
 * dims, max/min along one dim with the index of the extreme, and argmax, with
 * their backward.
 *
 * Here are the dims, shapes and groups (AcReduceGroups), the nodes and the
 * backward wiring; the math is in the device's kernel table (kernels/kernels.h;
 * the CPU's in kernels/cpu/reduce.c, whose sums are bit-identical whatever
 * the thread count).
 *
 * Not here: softmax and log_softmax (activation.c), losses (loss.c).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <math.h>

enum { KIND_SUM, KIND_MEAN, KIND_MAX, KIND_MIN, KIND_VAR, KIND_STD };

/* ---- planning: which dims, what shape ------------------------------------ */

/* dims as a bit mask over a's dims; a 0-d tensor accepts dim 0 or -1, as in PyTorch. */
static int reduce_mask(const char *op, const AcTensor *a, const int *dims, int n_dims,
                       unsigned *mask)
{
    int rank = a->ndim > 0 ? a->ndim : 1;
    int i;
    *mask = 0;
    if (n_dims < 0 || n_dims > AC_MAX_DIMS)
        return error_set(AC_ERR_ARG, "%s: %d dims given for a tensor of shape %s", op,
                         n_dims, tensor_shape_str(a));
    if (!dims || n_dims == 0) {
        *mask = (1u << a->ndim) - 1u;
        return AC_OK;
    }
    for (i = 0; i < n_dims; i++) {
        int d = dim_normalize(op, dims[i], rank);
        if (d < 0) return ac_last_error_code();
        if (*mask & (1u << d))
            return error_set(AC_ERR_ARG, "%s: dim %d appears more than once", op, dims[i]);
        *mask |= 1u << d;
    }
    if (a->ndim == 0) *mask = 0;
    return AC_OK;
}

/* The output shape: reduced dims become 1 (keepdim) or go. Returns its ndim. */
static int reduced_shape(const AcTensor *a, unsigned mask, int keepdim, int64_t *shape)
{
    int d, n = 0;
    for (d = 0; d < a->ndim; d++) {
        if (!(mask & (1u << d))) shape[n++] = a->shape[d];
        else if (keepdim) shape[n++] = 1;
    }
    return n;
}

static int64_t reduced_count(const AcTensor *a, unsigned mask)
{
    int64_t count = 1;
    int d;
    for (d = 0; d < a->ndim; d++)
        if (mask & (1u << d)) count *= a->shape[d];
    return count;
}

/* a's dims with size-1 dims dropped and neighbours of the same kind merged
   (AcReduceGroups): a contiguous tensor's adjacent dims always merge, so every
   reduction is an alternation of kept and reduced groups, the last contiguous. */
static void group_dims(const AcTensor *a, unsigned mask, AcReduceGroups *g)
{
    int d, i;
    int64_t stride = 1, out_stride = 1;
    g->n = 0;
    for (d = 0; d < a->ndim; d++) {
        int red = (mask >> d) & 1u;
        if (a->shape[d] == 1) continue;
        if (g->n > 0 && g->reduced[g->n - 1] == red) {
            g->size[g->n - 1] *= a->shape[d];
        } else {
            g->size[g->n] = a->shape[d];
            g->reduced[g->n] = red;
            g->n++;
        }
    }
    for (i = g->n - 1; i >= 0; i--) {
        g->stride[i] = stride;
        stride *= g->size[i];
        g->out_stride[i] = g->reduced[i] ? 0 : out_stride;
        if (!g->reduced[i]) out_stride *= g->size[i];
    }
}


/* ---- sum, mean, max, min, var, std --------------------------------------- */

typedef struct {
    unsigned mask;
    int kind;
    int correction;
} ReduceCtx;

static const char *kind_name(int kind)
{
    static const char *const names[] = {"sum", "mean", "max", "min", "var", "std"};
    return names[kind];
}

/* The output's tensor freed on an error status: returns out, or NULL. */
static AcTensor *reduce_done(AcTensor *out, int status)
{
    if (status) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/*
 * sum and mean spread the gradient evenly over what they reduced. max and min
 * split it evenly among the inputs that tie for the extreme, as PyTorch's
 * amax/amin (and full max/min) do. var: 2 (x - mean) / (N - correction);
 * std: that over 2 std, and 0 where std is 0, as PyTorch does.
 */
static int reduce_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const ReduceCtx *ctx = node->context;
    const AcTensor *a = node->inputs[0];
    const AcTensor *out = node->output;
    const AcKernels *k = kernels_for(gout);
    const char *op = kind_name(ctx->kind);
    int64_t count = reduced_count(a, ctx->mask);
    AcReduceGroups groups;
    AcTensor *work, *means;
    if (!input_needs_grad(node, 0)) return AC_OK;
    group_dims(a, ctx->mask, &groups);
    work = tensor_alloc_like(op, out);   /* scratch in backward's scope */
    if (!work || !(gin[0] = tensor_alloc_like(op, a))) return ac_last_error_code();
    if (ctx->kind == KIND_SUM || ctx->kind == KIND_MEAN) {
        float scale = ctx->kind != KIND_MEAN ? 1.0f : count > 0 ? (float)(1.0 / (double)count) : NAN;
        if (!k->sum_backward) return kernel_missing(op, gout);
        return k->sum_backward(gout, scale, work, gin[0], &groups);
    }
    if (ctx->kind == KIND_MAX || ctx->kind == KIND_MIN) {
        if (!k->extreme_backward) return kernel_missing(op, gout);
        return k->extreme_backward(a, out, gout, work, gin[0], &groups);
    }
    if (!(ctx->kind == KIND_VAR ? k->var_backward : k->std_backward)) return kernel_missing(op, gout);
    if (!(means = tensor_alloc_like(op, out))) return ac_last_error_code();
    return (ctx->kind == KIND_VAR ? k->var_backward : k->std_backward)(a, out, gout, work, means,
                                                                        gin[0], &groups,
                                                                        ctx->correction);
}

/* The sum of an int64 or bool tensor, exact in int64 (no graph). */
static AcTensor *integer_sum(const AcTensor *a, unsigned mask, int keepdim)
{
    int64_t shape[AC_MAX_DIMS];
    int ndim = reduced_shape(a, mask, keepdim, shape);
    const AcKernels *k = kernels_for(a);
    AcTensor *out = tensor_create_on("sum", shape, ndim, AC_INT64, NULL, 0, 0, a->device,
                                     a->device_index);
    if (!out) return NULL;
    return reduce_done(out, k->sum_integer ? k->sum_integer(a, out, mask) : kernel_missing("sum", out));
}

static AcTensor *reduce_op(int kind, const AcTensor *a, const int *dims, int n_dims,
                           int correction, int keepdim);

/* ac_sum's kernel on ac_sum's groups, so the same bits, straight into like's
   shape: backward (grad off) needs neither the sum's node nor a view. */
AcTensor *reduce_to_shape(const AcTensor *g, const AcTensor *like)
{
    const AcKernels *k = kernels_for(g);
    const int lead = g->ndim - like->ndim;
    AcReduceGroups groups;
    unsigned mask = 0;
    AcTensor *out;
    int i;
    if (same_shape(g, like)) return (AcTensor *)g;
    for (i = 0; i < g->ndim; i++)
        if (i < lead || (like->shape[i - lead] == 1 && g->shape[i] != 1)) mask |= 1u << i;
    out = tensor_create_on("sum", like->shape, like->ndim, AC_FLOAT32, NULL, 0, 0, g->device,
                           g->device_index);
    if (!out || out->size == 0) return out;
    if (!k->sum) return reduce_done(out, kernel_missing("sum", out));
    group_dims(g, mask, &groups);
    return reduce_done(out, k->sum(g->data, out->data, &groups));
}

/* attr: kind, correction, keepdim, n_dims (-1 for all), then the dims */
int reduce_replay(AcTensor **t, const double *attr)
{
    int dims[AC_MAX_DIMS], i, n_dims = (int)attr[3];
    for (i = 0; i < n_dims; i++) dims[i] = (int)attr[4 + i];
    return graph_made(t[1] = reduce_op((int)attr[0], t[0], n_dims < 0 ? NULL : dims, n_dims < 0 ? 0 : n_dims,
                                       (int)attr[1], (int)attr[2]));
}

static AcTensor *reduce_record(int kind, const AcTensor *a, const int *dims, int n_dims,
                               int correction, int keepdim)
{
    double attr[4 + AC_MAX_DIMS];
    int i;
    attr[0] = kind;
    attr[1] = correction;
    attr[2] = keepdim;
    attr[3] = dims ? n_dims : -1;
    for (i = 0; dims && i < n_dims; i++) attr[4 + i] = dims[i];
    return graph_op(kind_name(kind), reduce_replay, 1, &a, attr, 4 + (dims ? n_dims : 0));
}

/* out = a reduced over mask by the kernel of kind. */
static int reduce_forward(int kind, const AcTensor *a, unsigned mask, int correction, AcTensor *out)
{
    const AcKernels *k = kernels_for(a);
    int (*fn)(const float *x, float *out, const AcReduceGroups *g) =
        kind == KIND_SUM ? k->sum : kind == KIND_MEAN ? k->mean : kind == KIND_MAX ? k->max : k->min;
    AcReduceGroups groups;
    if (kind == KIND_VAR ? !k->var : kind == KIND_STD ? !k->std : !fn)
        return kernel_missing(kind_name(kind), out);
    if (out->size == 0) return AC_OK;
    group_dims(a, mask, &groups);
    if (kind == KIND_VAR) return k->var(a->data, out->data, &groups, correction);
    if (kind == KIND_STD) return k->std(a->data, out->data, &groups, correction);
    return fn(a->data, out->data, &groups);
}

static AcTensor *int_extreme_dims(const char *op, int want_max, const AcTensor *a, unsigned mask,
                                  int keepdim);

static AcTensor *reduce_op(int kind, const AcTensor *a, const int *dims, int n_dims,
                           int correction, int keepdim)
{
    const char *op = kind_name(kind);
    int64_t shape[AC_MAX_DIMS];
    unsigned mask;
    int ndim;
    AcTensor *out;
    ReduceCtx *ctx;
    if (ops_observed && (!dims || (n_dims >= 0 && n_dims <= AC_MAX_DIMS)))
        return reduce_record(kind, a, dims, n_dims, correction, keepdim);
    if (kind == KIND_SUM && a && a->dtype != AC_FLOAT32)
        return reduce_mask(op, a, dims, n_dims, &mask) ? NULL : integer_sum(a, mask, keepdim);
    if ((kind == KIND_MAX || kind == KIND_MIN) && a && a->dtype != AC_FLOAT32) {
        if (reduce_mask(op, a, dims, n_dims, &mask)) return NULL;
        if (reduced_count(a, mask) == 0 && a->size == 0 && a->ndim > 0)
            return error_null(AC_ERR_SHAPE, "%s: cannot reduce shape %s over a dim of size 0", op,
                              tensor_shape_str(a));
        return int_extreme_dims(op, kind == KIND_MAX, a, mask, keepdim);
    }
    if (tensor_check(op, a, "a")) return NULL;
    if (reduce_mask(op, a, dims, n_dims, &mask)) return NULL;
    if (correction < 0)
        return error_null(AC_ERR_ARG, "%s: correction must be >= 0, got %d", op, correction);
    ndim = reduced_shape(a, mask, keepdim, shape);
    /* max and min of nothing have no value (sum is 0, mean NaN) */
    if ((kind == KIND_MAX || kind == KIND_MIN) && reduced_count(a, mask) == 0 &&
        reduced_count(a, ~mask & ((1u << a->ndim) - 1u)) > 0)
        return error_null(AC_ERR_SHAPE, "%s: cannot reduce shape %s over a dim of size 0", op,
                          tensor_shape_str(a));
    out = op_output(op, shape, ndim, &a, 1, reduce_backward, sizeof(ReduceCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) {
        ctx->mask = mask;
        ctx->kind = kind;
        ctx->correction = correction;
    }
    return reduce_done(out, reduce_forward(kind, a, mask, correction, out));
}

AcTensor *ac_sum(const AcTensor *a, const int *dims, int n_dims, int keepdim)
{
    return reduce_op(KIND_SUM, a, dims, n_dims, 0, keepdim);
}

AcTensor *ac_mean(const AcTensor *a, const int *dims, int n_dims, int keepdim)
{
    return reduce_op(KIND_MEAN, a, dims, n_dims, 0, keepdim);
}

AcTensor *ac_max(const AcTensor *a, const int *dims, int n_dims, int keepdim)
{
    return reduce_op(KIND_MAX, a, dims, n_dims, 0, keepdim);
}

AcTensor *ac_min(const AcTensor *a, const int *dims, int n_dims, int keepdim)
{
    return reduce_op(KIND_MIN, a, dims, n_dims, 0, keepdim);
}

AcTensor *ac_var(const AcTensor *a, const int *dims, int n_dims, int correction, int keepdim)
{
    return reduce_op(KIND_VAR, a, dims, n_dims, correction, keepdim);
}

AcTensor *ac_std(const AcTensor *a, const int *dims, int n_dims, int correction, int keepdim)
{
    return reduce_op(KIND_STD, a, dims, n_dims, correction, keepdim);
}

/* ---- max/min along one dim, with indices --------------------------------- */

/* a seen as (outer, n, inner) around dim. */
static void extreme_layout(const AcTensor *a, int dim, int64_t *outer, int64_t *n, int64_t *inner)
{
    int d;
    *outer = *inner = 1;
    *n = a->ndim > 0 ? a->shape[dim] : 1;
    for (d = 0; d < a->ndim; d++) {
        if (d < dim) *outer *= a->shape[d];
        if (d > dim) *inner *= a->shape[d];
    }
}

typedef struct {
    int dim;
    int want_max;
} ExtremeCtx;

/* The gradient goes to the index forward returned (the first extreme), as
   PyTorch's max(dim) does; the kernel finds the indices again from the input. */
static int extreme_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const ExtremeCtx *ctx = node->context;
    const AcTensor *a = node->inputs[0];
    const AcKernels *k = kernels_for(gout);
    const char *op = ctx->want_max ? "max" : "min";
    int (*fn)(const float *, const float *, float *, int64_t, int64_t, int64_t) =
        ctx->want_max ? k->max_dim_backward : k->min_dim_backward;
    int64_t outer, n, inner;
    if (!input_needs_grad(node, 0)) return AC_OK;
    if (!fn) return kernel_missing(op, gout);
    gin[0] = tensor_alloc_like(op, a);
    if (!gin[0]) return ac_last_error_code();
    extreme_layout(a, ctx->dim, &outer, &n, &inner);
    return fn(a->data, gout->data, gin[0]->data, outer, n, inner);
}

/* Validate a and dim; fill the output shape. Returns the normalised dim or -1. */
static int extreme_plan(const char *op, const AcTensor *a, int dim, int keepdim,
                        int64_t *shape, int *ndim)
{
    unsigned mask;
    if (tensor_check(op, a, "a")) return -1;
    dim = dim_normalize(op, dim, a->ndim > 0 ? a->ndim : 1);
    if (dim < 0) return -1;
    mask = a->ndim > 0 ? 1u << dim : 0;
    if (a->ndim > 0 && a->shape[dim] == 0) {
        error_set(AC_ERR_SHAPE, "%s: cannot reduce dim %d of shape %s: it has size 0", op, dim,
                  tensor_shape_str(a));
        return -1;
    }
    *ndim = reduced_shape(a, mask, keepdim, shape);
    return a->ndim > 0 ? dim : 0;
}

/* The index output of max/min along dim: int64, on a's device. */
static AcTensor *index_output(const char *op, const AcTensor *a, const int64_t *shape, int ndim)
{
    return tensor_create_on(op, shape, ndim, AC_INT64, NULL, 0, 0, a->device, a->device_index);
}

/* values and/or indices (either may be NULL) of the extreme of a along dim. */
static int extreme_run(const char *op, int want_max, const AcTensor *a, int dim, AcTensor *values,
                       AcTensor *indices)
{
    const AcKernels *k = kernels_for(a);
    int (*fn)(const float *, float *, int64_t *, int64_t, int64_t, int64_t) =
        want_max ? k->max_dim : k->min_dim;
    int64_t outer, n, inner;
    if (!fn) return kernel_missing(op, a);
    extreme_layout(a, dim, &outer, &n, &inner);
    return fn(a->data, values ? values->data : NULL, indices ? data_i64(indices) : NULL, outer, n,
              inner);
}

/* max/min (argmax when no values are wanted) of an integer or bool a along dim,
   exact, no graph: values in a's dtype, indices int64 (either may be skipped). */
static AcTensor *int_extreme_dim(const char *op, int want_max, const AcTensor *a, int dim,
                                 int keepdim, AcTensor **indices, int want_values)
{
    int64_t shape[AC_MAX_DIMS], outer, n, inner;
    int ndim;
    AcTensor *values = NULL, *index = NULL;
    const AcKernels *k = kernels_for(a);
    if (indices) *indices = NULL;
    if (a->dtype != AC_INT64 && a->dtype != AC_UINT8 && a->dtype != AC_INT8 && a->dtype != AC_BOOL)
        return error_null(AC_ERR_DTYPE, "%s: a %s tensor is not supported", op, ac_dtype_name(a->dtype));
    dim = dim_normalize(op, dim, a->ndim > 0 ? a->ndim : 1);
    if (dim < 0) return NULL;
    if (a->ndim > 0) dim = dim < a->ndim ? dim : 0;
    if (a->ndim > 0 && a->shape[dim] == 0)
        return error_null(AC_ERR_SHAPE, "%s: cannot reduce dim %d of shape %s: it has size 0", op, dim,
                          tensor_shape_str(a));
    if (!k->int_extreme) return kernel_missing(op, a), NULL;
    ndim = reduced_shape(a, a->ndim > 0 ? 1u << dim : 0, keepdim, shape);
    if (want_values && !(values = op_output_as(op, a->dtype, shape, ndim, &a, 1, NULL, 0))) return NULL;
    if ((indices || !want_values) && !(index = index_output(op, a, shape, ndim))) {
        ac_tensor_free(values);
        return NULL;
    }
    extreme_layout(a, a->ndim > 0 ? dim : 0, &outer, &n, &inner);
    if (a->size > 0) k->int_extreme(a, want_max, values ? (void *)values->data : NULL,
                                    index ? data_i64(index) : NULL, outer, n, inner);
    if (!want_values) return index;
    if (indices) *indices = index;
    else ac_tensor_free(index);
    return values;
}

/* max/min of an integer a over dims (NULL: all), one dim at a time. */
static AcTensor *int_extreme_dims(const char *op, int want_max, const AcTensor *a, unsigned mask,
                                  int keepdim)
{
    int64_t shape[AC_MAX_DIMS];
    int d, ndim = reduced_shape(a, mask, keepdim, shape);
    AcTensor *cur = NULL, *next;
    if (a->ndim == 0) return int_extreme_dim(op, want_max, a, 0, keepdim, NULL, 1);
    for (d = a->ndim - 1; d >= 0; d--) {
        if (!(mask & (1u << d))) continue;
        next = int_extreme_dim(op, want_max, cur ? cur : a, d, 1, NULL, 1);
        ac_tensor_free(cur);
        if (!(cur = next)) return NULL;
    }
    if (!cur) return ac_tensor_clone(a);
    next = ac_reshape(cur, shape, ndim);
    ac_tensor_free(cur);
    return next;
}

static AcTensor *extreme_dim(const char *op, int want_max, const AcTensor *a, int dim,
                             int keepdim, AcTensor **indices)
{
    int64_t shape[AC_MAX_DIMS];
    int ndim;
    AcTensor *values, *index = NULL;
    ExtremeCtx *ctx;
    if (a && a->dtype != AC_FLOAT32) return int_extreme_dim(op, want_max, a, dim, keepdim, indices, 1);
    if (indices) *indices = NULL;
    dim = extreme_plan(op, a, dim, keepdim, shape, &ndim);
    if (dim < 0) return NULL;
    if (indices && !(index = index_output(op, a, shape, ndim))) return NULL;
    values = op_output(op, shape, ndim, &a, 1, extreme_backward, sizeof(ExtremeCtx));
    if (values && (ctx = op_context(values))) {
        ctx->dim = dim;
        ctx->want_max = want_max;
    }
    if (!values || extreme_run(op, want_max, a, dim, values, index)) {
        if (values) ac_tensor_free(values);
        if (index) ac_tensor_free(index);
        return NULL;
    }
    if (indices) *indices = index;
    return values;
}

AcTensor *ac_max_dim(const AcTensor *a, int dim, int keepdim, AcTensor **indices)
{
    return extreme_dim("max", 1, a, dim, keepdim, indices);
}

AcTensor *ac_min_dim(const AcTensor *a, int dim, int keepdim, AcTensor **indices)
{
    return extreme_dim("min", 0, a, dim, keepdim, indices);
}

AcTensor *ac_argmax(const AcTensor *a, int dim, int keepdim)
{
    int64_t shape[AC_MAX_DIMS];
    int ndim;
    AcTensor *index;
    if (a && a->dtype != AC_FLOAT32) return int_extreme_dim("argmax", 1, a, dim, keepdim, NULL, 0);
    dim = extreme_plan("argmax", a, dim, keepdim, shape, &ndim);
    if (dim < 0 || !(index = index_output("argmax", a, shape, ndim))) return NULL;
    return reduce_done(index, extreme_run("argmax", 1, a, dim, NULL, index));
}
