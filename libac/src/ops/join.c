/*
 * join.c - cat and stack: tensors laid side by side along a dim, forward and
 * backward, and their recording (graph.h).
 *
 * Not here: slicing, views and transposes (shape.c).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <string.h>

/* ---- cat and stack ----------------------------------------------------------- */

/*
 * Both lay their inputs side by side along dim of the output: for each index
 * of the dims before dim ("outer"), input i contributes its rows along dim
 * (one row for stack), each row `inner` elements long.
 */
typedef struct {
    int dim;
    int stacking;
} JoinCtx;

typedef struct {
    AcTensor *const *tensors;
    char *out;
    size_t esize;
    int n, dim, stacking;
    int64_t total_rows, inner;
} JoinJob;

static void join_task(void *ctx, int64_t begin, int64_t end)
{
    const JoinJob *job = ctx;
    int64_t o, row;
    int i;
    for (o = begin; o < end; o++) {
        char *dst = job->out + o * job->total_rows * job->inner * job->esize;
        for (i = 0, row = 0; i < job->n; i++) {
            int64_t rows = job->stacking ? 1 : job->tensors[i]->shape[job->dim];
            memcpy(dst + row * job->inner * job->esize,
                   (char *)job->tensors[i]->data + o * rows * job->inner * job->esize,
                   (size_t)(rows * job->inner) * job->esize);
            row += rows;
        }
    }
}

/* Sizes of the dims before and after dim. */
static void outer_inner(const int64_t *shape, int ndim, int dim, int64_t *outer, int64_t *inner)
{
    int d;
    *outer = *inner = 1;
    for (d = 0; d < ndim; d++) {
        if (d < dim) *outer *= shape[d];
        if (d > dim) *inner *= shape[d];
    }
}

typedef struct {
    const float *gout;
    float *gin;
    int64_t rows, offset, total_rows, inner;
} SplitJob;

static void split_task(void *ctx, int64_t begin, int64_t end)
{
    const SplitJob *job = ctx;
    int64_t o, len = job->rows * job->inner;
    for (o = begin; o < end; o++)
        memcpy(job->gin + o * len, job->gout + (o * job->total_rows + job->offset) * job->inner,
               (size_t)len * sizeof(float));
}

/* Each input's gradient is its own band of the output gradient. */
static int join_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const JoinCtx *ctx = node->context;
    SplitJob job;
    int64_t outer, offset = 0;
    int i;
    outer_inner(gout->shape, gout->ndim, ctx->dim, &outer, &job.inner);
    job.gout = gout->data;
    job.total_rows = gout->shape[ctx->dim];
    for (i = 0; i < node->n_inputs; i++) {
        const AcTensor *in = node->inputs[i];
        job.rows = ctx->stacking ? 1 : in->shape[ctx->dim];
        job.offset = offset;
        offset += job.rows;
        if (!input_needs_grad(node, i)) continue;
        gin[i] = tensor_alloc(ctx->stacking ? "stack" : "cat", in->shape, in->ndim);
        if (!gin[i]) return ac_last_error_code();
        job.gin = gin[i]->data;
        if (in->size > 0) parallel_for(outer, rows_grain(job.rows * job.inner), split_task, &job);
    }
    return AC_OK;
}

/* One node over the inputs, or none when no graph is recorded. */
static AcTensor *join(const char *op, AcTensor *const *tensors, int n, int dim, int stacking,
                      const int64_t *shape, int ndim)
{
    JoinJob job;
    JoinCtx *ctx;
    AcTensor *out;
    int64_t outer;
    if (n <= AC_MAX_INPUTS)
        out = op_output_as(op, tensors[0]->dtype, shape, ndim, (const AcTensor *const *)tensors, n,
                           join_backward, sizeof(JoinCtx));
    else
        out = tensor_create(op, shape, ndim, tensors[0]->dtype, NULL, 0, 0);
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) {
        ctx->dim = dim;
        ctx->stacking = stacking;
    }
    if (out->size == 0) return out;
    outer_inner(shape, ndim, dim, &outer, &job.inner);
    job.tensors = tensors;
    job.out = (char *)out->data;
    job.esize = elem_size(out);
    job.n = n;
    job.dim = dim;
    job.stacking = stacking;
    job.total_rows = shape[dim];
    parallel_for(outer, rows_grain(job.total_rows * job.inner), join_task, &job);
    return out;
}

/* A node holds at most AC_MAX_INPUTS inputs: with a graph and more tensors
   than that, join them in up to AC_MAX_INPUTS groups, then cat the groups. */
static AcTensor *join_grouped(const char *op, AcTensor *const *tensors, int n, int dim,
                              int stacking, const int64_t *shape, int ndim)
{
    AcTensor *parts[AC_MAX_INPUTS], *out = NULL;
    int group = (n + AC_MAX_INPUTS - 1) / AC_MAX_INPUTS, n_parts = 0, i;
    if (n <= AC_MAX_INPUTS || !records_graph(tensors, n))
        return join(op, tensors, n, dim, stacking, shape, ndim);
    for (i = 0; i < n; i += group) {
        int count = n - i < group ? n - i : group;
        parts[n_parts] = stacking ? ac_stack(tensors + i, count, dim)
                                  : ac_cat(tensors + i, count, dim);
        if (!parts[n_parts]) break;
        n_parts++;
    }
    if (i >= n) out = ac_cat(parts, n_parts, dim);
    /* the cat node holds its own references to the parts */
    for (i = 0; i < n_parts; i++) ac_tensor_free(parts[i]);
    return out;
}

static int join_check(const char *op, AcTensor *const *tensors, int n)
{
    int i;
    if (!tensors) return error_set(AC_ERR_ARG, "%s: tensors is NULL", op);
    if (n < 1) return error_set(AC_ERR_ARG, "%s: needs at least one tensor, got %d", op, n);
    for (i = 0; i < n; i++) {
        if (!tensors[i]) return error_set(AC_ERR_ARG, "%s: tensor %d is NULL", op, i);
        if (tensors[i]->dtype != tensors[0]->dtype)
            return error_set(AC_ERR_DTYPE, "%s: tensor %d is %s, tensor 0 is %s", op, i,
                             ac_dtype_name(tensors[i]->dtype), ac_dtype_name(tensors[0]->dtype));
    }
    return cpu_only(op, (const AcTensor *const *)tensors, n);
}

AcTensor *ac_cat(AcTensor *const *tensors, int n, int dim)
{
    if (ops_observed && tensors && n >= 1 && n <= GRAPH_JOIN_SLOTS) return join_observed("cat", cat_replay, tensors, n, dim);
    const AcTensor *first;
    int64_t shape[AC_MAX_DIMS], total = 0;
    int i, d;
    if (join_check("cat", tensors, n)) return NULL;
    first = tensors[0];
    if (first->ndim == 0)
        return error_null(AC_ERR_SHAPE, "cat: 0-d tensors cannot be concatenated");
    dim = dim_normalize("cat", dim, first->ndim);
    if (dim < 0) return NULL;
    for (i = 0; i < n; i++) {
        const AcTensor *t = tensors[i];
        int fits = t->ndim == first->ndim;
        for (d = 0; fits && d < t->ndim; d++)
            if (d != dim && t->shape[d] != first->shape[d]) fits = 0;
        if (!fits)
            return error_null(AC_ERR_SHAPE,
                              "cat: tensor %d has shape %s, tensor 0 has %s (they must match except in dim %d)",
                              i, tensor_shape_str(t), tensor_shape_str(first), dim);
        if (t->shape[dim] > INT64_MAX / 8 - total)
            return error_null(AC_ERR_MEMORY, "cat: the result along dim %d is too large", dim);
        total += t->shape[dim];
    }
    memcpy(shape, first->shape, sizeof shape);
    shape[dim] = total;
    if (shape_check("cat", shape, first->ndim, NULL)) return NULL;
    return join_grouped("cat", tensors, n, dim, 0, shape, first->ndim);
}

AcTensor *ac_stack(AcTensor *const *tensors, int n, int dim)
{
    if (ops_observed && tensors && n >= 1 && n <= GRAPH_JOIN_SLOTS) return join_observed("stack", stack_replay, tensors, n, dim);
    const AcTensor *first;
    int64_t shape[AC_MAX_DIMS];
    int i, d, ndim;
    if (join_check("stack", tensors, n)) return NULL;
    first = tensors[0];
    if (first->ndim == AC_MAX_DIMS)
        return error_null(AC_ERR_SHAPE, "stack: %s already has the most dims (%d)",
                          tensor_shape_str(first), AC_MAX_DIMS);
    dim = dim_normalize("stack", dim, first->ndim + 1);
    if (dim < 0) return NULL;
    for (i = 1; i < n; i++)
        if (!same_shape(tensors[i], first))
            return error_null(AC_ERR_SHAPE, "stack: tensor %d has shape %s, tensor 0 has %s (they must match)",
                              i, tensor_shape_str(tensors[i]), tensor_shape_str(first));
    ndim = first->ndim + 1;
    for (d = 0, i = 0; d < ndim; d++) shape[d] = d == dim ? n : first->shape[i++];
    if (shape_check("stack", shape, ndim, NULL)) return NULL;
    return join_grouped("stack", tensors, n, dim, 1, shape, ndim);
}

/* ---- recording (graph.h) ------------------------------------------------------ */

AcTensor *join_observed(const char *op, GraphReplayFn fn, AcTensor *const *tensors, int n, int dim)
{
    const AcTensor *in[GRAPH_JOIN_SLOTS] = {NULL};
    memcpy(in, tensors, (size_t)n * sizeof *in);
    return graph_op(op, fn, GRAPH_JOIN_SLOTS, in, (double[]){dim}, 1);
}

/* The tensors of a cat or stack node: its inputs up to the first NULL. */
static int join_count(AcTensor *const *t)
{
    int n = 0;
    while (n < GRAPH_JOIN_SLOTS && t[n]) n++;
    return n;
}

int cat_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[GRAPH_JOIN_SLOTS] = ac_cat(t, join_count(t), (int)attr[0]));
}

int stack_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[GRAPH_JOIN_SLOTS] = ac_stack(t, join_count(t), (int)attr[0]));
}
