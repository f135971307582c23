/*
 * shape.c - ops that move elements without computing on them: reshape,
 * flatten, squeeze and unsqueeze (views sharing the input's data), transpose
 * and permute (a contiguous copy), slicing and its in-place write; each
 * forward with its backward right under it.
 *
 * Not here: cat and stack (join.c), the view mechanism itself (tensor.c,
 * ops/output.c op_view).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <string.h>

#define TILE 32            /* transpose tile: 32 x 32 floats stay in L1 */

/* ---- views: reshape, flatten, squeeze, unsqueeze -------------------------- */

/* Every view's gradient is the output gradient seen in the input's shape. */
static int view_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *a = node->inputs[0];
    gin[0] = op_view(node->op, gout, a->shape, a->ndim, NULL, 0);
    return gin[0] ? AC_OK : ac_last_error_code();
}

static AcTensor *view_as(const char *op, const AcTensor *a, const int64_t *shape, int ndim)
{
    return op_view(op, a, shape, ndim, view_backward, 0);
}

/* attr: ndim, then the shape (reshape) or the permutation (permute) */
int reshape_replay(AcTensor **t, const double *attr)
{
    int64_t shape[AC_MAX_DIMS];
    int i, ndim = (int)attr[0];
    for (i = 0; i < ndim; i++) shape[i] = (int64_t)attr[1 + i];
    return graph_made(t[1] = ac_reshape(t[0], shape, ndim));
}

AcTensor *ac_reshape(const AcTensor *a, const int64_t *shape, int ndim)
{
    if (ops_observed && shape && ndim >= 0 && ndim <= AC_MAX_DIMS) {
        double attr[1 + AC_MAX_DIMS];
        int i;
        attr[0] = ndim;
        for (i = 0; i < ndim; i++) attr[1 + i] = (double)shape[i];
        return graph_op("reshape", reshape_replay, 1, &a, attr, 1 + ndim);
    }
    int64_t resolved[AC_MAX_DIMS], known;
    int i, inferred = -1;
    if (tensor_check_any("reshape", a, "a")) return NULL;
    if (ndim < 0 || ndim > AC_MAX_DIMS)
        return error_null(AC_ERR_ARG, "reshape: ndim %d is out of range [0, %d]", ndim, AC_MAX_DIMS);
    if (ndim > 0 && !shape) return error_null(AC_ERR_ARG, "reshape: shape is NULL");
    for (i = 0; i < ndim; i++) {
        resolved[i] = shape[i];
        if (shape[i] != -1) continue;
        if (inferred >= 0)
            return error_null(AC_ERR_ARG, "reshape: shape %s has more than one -1",
                              shape_str(shape, ndim));
        inferred = i;
        resolved[i] = 1;
    }
    if (shape_check("reshape", resolved, ndim, &known)) return NULL;
    if (inferred >= 0) {
        if (known == 0 || a->size % known != 0)
            return error_null(AC_ERR_SHAPE, "reshape: cannot reshape %s (%lld elements) into %s",
                              tensor_shape_str(a), (long long)a->size, shape_str(shape, ndim));
        resolved[inferred] = a->size / known;
        known = a->size;
    }
    if (known != a->size)
        return error_null(AC_ERR_SHAPE, "reshape: cannot reshape %s (%lld elements) into %s",
                          tensor_shape_str(a), (long long)a->size, shape_str(shape, ndim));
    return view_as("reshape", a, resolved, ndim);
}

int flatten_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_flatten(t[0], (int)attr[0], (int)attr[1]));
}

AcTensor *ac_flatten(const AcTensor *a, int start_dim, int end_dim)
{
    if (ops_observed) return graph_op("flatten", flatten_replay, 1, (const AcTensor *[]){a}, (double[]){start_dim, end_dim}, 2);
    int64_t shape[AC_MAX_DIMS], merged = 1;
    int rank, start, end, d, n = 0;
    if (tensor_check_any("flatten", a, "a")) return NULL;
    rank = a->ndim > 0 ? a->ndim : 1;
    start = dim_normalize("flatten", start_dim, rank);
    end = dim_normalize("flatten", end_dim, rank);
    if (start < 0 || end < 0) return NULL;
    if (start > end)
        return error_null(AC_ERR_ARG, "flatten: start_dim %d comes after end_dim %d", start_dim,
                          end_dim);
    if (a->ndim == 0) {
        shape[0] = 1;   /* as PyTorch: a 0-d tensor flattens to one element */
        return view_as("flatten", a, shape, 1);
    }
    for (d = 0; d < a->ndim; d++) {
        if (d < start || d > end) {
            shape[n++] = a->shape[d];
            continue;
        }
        merged *= a->shape[d];
        if (d == end) shape[n++] = merged;
    }
    return view_as("flatten", a, shape, n);
}

/* attr: n_dims (-1 for every size-1 dim), then the dims */
int squeeze_replay(AcTensor **t, const double *attr)
{
    int dims[AC_MAX_DIMS], i, n_dims = (int)attr[0];
    for (i = 0; i < n_dims; i++) dims[i] = (int)attr[1 + i];
    return graph_made(t[1] = ac_squeeze(t[0], n_dims < 0 ? NULL : dims, n_dims < 0 ? 0 : n_dims));
}

AcTensor *ac_squeeze(const AcTensor *a, const int *dims, int n_dims)
{
    if (ops_observed && (!dims || (n_dims >= 0 && n_dims <= AC_MAX_DIMS))) {
        double attr[1 + AC_MAX_DIMS];
        int i;
        attr[0] = dims ? n_dims : -1;
        for (i = 0; dims && i < n_dims; i++) attr[1 + i] = dims[i];
        return graph_op("squeeze", squeeze_replay, 1, &a, attr, 1 + (dims ? n_dims : 0));
    }
    int64_t shape[AC_MAX_DIMS];
    unsigned chosen = 0;
    int i, d, n = 0;
    if (tensor_check_any("squeeze", a, "a")) return NULL;
    if (dims && (n_dims < 0 || n_dims > AC_MAX_DIMS))
        return error_null(AC_ERR_ARG, "squeeze: %d dims given", n_dims);
    if (!dims) chosen = (1u << a->ndim) - 1u;
    for (i = 0; dims && i < n_dims; i++) {
        d = dim_normalize("squeeze", dims[i], a->ndim);
        if (d < 0) return NULL;
        if (chosen & (1u << d))
            return error_null(AC_ERR_ARG, "squeeze: dim %d appears more than once", dims[i]);
        chosen |= 1u << d;
    }
    /* a chosen dim that is not of size 1 stays, as in PyTorch */
    for (d = 0; d < a->ndim; d++)
        if (!(chosen & (1u << d)) || a->shape[d] != 1) shape[n++] = a->shape[d];
    return view_as("squeeze", a, shape, n);
}

int unsqueeze_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_unsqueeze(t[0], (int)attr[0]));
}

AcTensor *ac_unsqueeze(const AcTensor *a, int dim)
{
    if (ops_observed) return graph_op("unsqueeze", unsqueeze_replay, 1, (const AcTensor *[]){a}, (double[]){dim}, 1);
    int64_t shape[AC_MAX_DIMS];
    int d, n = 0;
    if (tensor_check_any("unsqueeze", a, "a")) return NULL;
    if (a->ndim == AC_MAX_DIMS)
        return error_null(AC_ERR_SHAPE, "unsqueeze: %s already has the most dims (%d)",
                          tensor_shape_str(a), AC_MAX_DIMS);
    dim = dim_normalize("unsqueeze", dim, a->ndim + 1);
    if (dim < 0) return NULL;
    for (d = 0; d <= a->ndim; d++) {
        if (d == dim) shape[n++] = 1;
        if (d < a->ndim) shape[n++] = a->shape[d];
    }
    return view_as("unsqueeze", a, shape, n);
}

/* ---- transpose and permute ------------------------------------------------ */

/*
 * out = a with its dims reordered, as a walk over the output's dims with the
 * input's strides. Size-1 dims are dropped and dims adjacent in both orders
 * merged first, so every case is either a copy of contiguous rows or a batch
 * of 2-D transposes done in TILE x TILE blocks.
 */
typedef struct {
    const char *in;
    char *out;
    size_t esize;                     /* bytes per element */
    int n;
    int64_t size[AC_MAX_DIMS];        /* output order */
    int64_t in_stride[AC_MAX_DIMS];
    int64_t out_stride[AC_MAX_DIMS];
    int col;                          /* the output dim with input stride 1 */
    int64_t tiles;                    /* tile rows per batch (transpose case) */
    int64_t batch_size[AC_MAX_DIMS], batch_in[AC_MAX_DIMS], batch_out[AC_MAX_DIMS];
    int n_batch;
} PermuteJob;

static void permute_rows_task(void *ctx, int64_t begin, int64_t end)
{
    const PermuteJob *job = ctx;
    int64_t row, inner = job->size[job->n - 1];
    for (row = begin; row < end; row++)
        memcpy(job->out + row * inner * job->esize,
               job->in + index_offset(row, job->size, job->in_stride, job->n - 1) * job->esize,
               (size_t)inner * job->esize);
}

/* Copy n elements of esize bytes from in (stepping in_step) to out (stepping out_step). */
static void strided_copy(char *out, int64_t out_step, const char *in, int64_t in_step, int64_t n,
                         size_t esize)
{
    int64_t j;
    switch (esize) {
    case 4: {
        uint32_t *o = (uint32_t *)(void *)out;
        const uint32_t *x = (const uint32_t *)(const void *)in;
        for (j = 0; j < n; j++) o[j * out_step] = x[j * in_step];
        break;
    }
    case 8: {
        uint64_t *o = (uint64_t *)(void *)out;
        const uint64_t *x = (const uint64_t *)(const void *)in;
        for (j = 0; j < n; j++) o[j * out_step] = x[j * in_step];
        break;
    }
    default:
        for (j = 0; j < n; j++) out[j * out_step] = in[j * in_step];
        break;
    }
}

/* One unit: one batch entry, one band of TILE output rows of the 2-D transpose. */
static void permute_tiles_task(void *ctx, int64_t begin, int64_t end)
{
    const PermuteJob *job = ctx;
    int64_t rows = job->size[job->col], cols = job->size[job->n - 1];
    int64_t col_stride = job->in_stride[job->n - 1], row_stride = job->out_stride[job->col];
    int64_t u, i, j0;
    for (u = begin; u < end; u++) {
        int64_t batch = u / job->tiles, i0 = (u % job->tiles) * TILE;
        int64_t i1 = i0 + TILE < rows ? i0 + TILE : rows;
        const char *in = job->in + index_offset(batch, job->batch_size, job->batch_in, job->n_batch) * job->esize;
        char *out = job->out + index_offset(batch, job->batch_size, job->batch_out, job->n_batch) * job->esize;
        for (j0 = 0; j0 < cols; j0 += TILE) {
            int64_t j1 = j0 + TILE < cols ? j0 + TILE : cols;
            for (i = i0; i < i1; i++)
                strided_copy(out + (i * row_stride + j0) * job->esize, 1,
                             in + (i + j0 * col_stride) * job->esize, col_stride, j1 - j0, job->esize);
        }
    }
}

static void permute_copy(const AcTensor *a, const int *perm, void *out)
{
    int64_t in_stride[AC_MAX_DIMS], stride = 1;
    PermuteJob job;
    int d, i;
    for (d = a->ndim - 1; d >= 0; d--) {
        in_stride[d] = stride;
        stride *= a->shape[d];
    }
    job.in = (const char *)a->data;
    job.out = out;
    job.esize = elem_size(a);
    job.n = 0;
    for (i = 0; i < a->ndim; i++) {
        d = perm[i];
        if (a->shape[d] == 1) continue;
        if (job.n > 0 && job.in_stride[job.n - 1] == in_stride[d] * a->shape[d]) {
            job.size[job.n - 1] *= a->shape[d];
            job.in_stride[job.n - 1] = in_stride[d];
            continue;
        }
        job.size[job.n] = a->shape[d];
        job.in_stride[job.n++] = in_stride[d];
    }
    if (job.n == 0 || job.in_stride[job.n - 1] == 1) {
        if (job.n == 0) {
            job.n = 1;
            job.size[0] = a->size;
            job.in_stride[0] = 1;
        }
        parallel_for(a->size / job.size[job.n - 1], rows_grain(job.size[job.n - 1]),
                     permute_rows_task, &job);
        return;
    }
    stride = 1;
    job.col = 0;
    for (i = job.n - 1; i >= 0; i--) {
        job.out_stride[i] = stride;
        stride *= job.size[i];
        if (job.in_stride[i] == 1) job.col = i;
    }
    job.n_batch = 0;
    for (i = 0; i < job.n - 1; i++) {
        if (i == job.col) continue;
        job.batch_size[job.n_batch] = job.size[i];
        job.batch_in[job.n_batch] = job.in_stride[i];
        job.batch_out[job.n_batch++] = job.out_stride[i];
    }
    job.tiles = (job.size[job.col] + TILE - 1) / TILE;
    parallel_for(a->size / (job.size[job.col] * job.size[job.n - 1]) * job.tiles,
                 rows_grain(TILE * job.size[job.n - 1]), permute_tiles_task, &job);
}

typedef struct {
    int perm[AC_MAX_DIMS];
} PermuteCtx;

/* The gradient is the output gradient permuted back. */
static int permute_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const PermuteCtx *ctx = node->context;
    int inverse[AC_MAX_DIMS], i;
    for (i = 0; i < gout->ndim; i++) inverse[ctx->perm[i]] = i;
    gin[0] = ac_permute(gout, inverse, gout->ndim);
    return gin[0] ? AC_OK : ac_last_error_code();
}

static AcTensor *permute_op(const char *op, const AcTensor *a, const int *perm)
{
    int64_t shape[AC_MAX_DIMS];
    AcTensor *out;
    PermuteCtx *ctx;
    int i;
    if (cpu_only(op, &a, 1)) return NULL;
    for (i = 0; i < a->ndim; i++) shape[i] = a->shape[perm[i]];
    out = op_output_as(op, a->dtype, shape, a->ndim, &a, 1, permute_backward, sizeof(PermuteCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) memcpy(ctx->perm, perm, (size_t)a->ndim * sizeof(int));
    if (out->size > 0) permute_copy(a, perm, out->data);
    return out;
}

int permute_replay(AcTensor **t, const double *attr)
{
    int perm[AC_MAX_DIMS], i, ndim = (int)attr[0];
    for (i = 0; i < ndim; i++) perm[i] = (int)attr[1 + i];
    return graph_made(t[1] = ac_permute(t[0], perm, ndim));
}

AcTensor *ac_permute(const AcTensor *a, const int *perm, int ndim)
{
    if (ops_observed && perm && ndim >= 0 && ndim <= AC_MAX_DIMS) {
        double attr[1 + AC_MAX_DIMS];
        int i;
        attr[0] = ndim;
        for (i = 0; i < ndim; i++) attr[1 + i] = perm[i];
        return graph_op("permute", permute_replay, 1, &a, attr, 1 + ndim);
    }
    int normalized[AC_MAX_DIMS], i;
    unsigned seen = 0;
    if (tensor_check_any("permute", a, "a")) return NULL;
    if (ndim != a->ndim)
        return error_null(AC_ERR_ARG, "permute: %d dims given for a tensor of shape %s", ndim,
                          tensor_shape_str(a));
    if (ndim > 0 && !perm) return error_null(AC_ERR_ARG, "permute: perm is NULL");
    for (i = 0; i < ndim; i++) {
        normalized[i] = dim_normalize("permute", perm[i], ndim);
        if (normalized[i] < 0) return NULL;
        if (seen & (1u << normalized[i]))
            return error_null(AC_ERR_ARG, "permute: dim %d appears more than once", perm[i]);
        seen |= 1u << normalized[i];
    }
    return permute_op("permute", a, normalized);
}

int transpose_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_transpose(t[0], (int)attr[0], (int)attr[1]));
}

AcTensor *ac_transpose(const AcTensor *a, int dim0, int dim1)
{
    if (ops_observed) return graph_op("transpose", transpose_replay, 1, (const AcTensor *[]){a}, (double[]){dim0, dim1}, 2);
    int perm[AC_MAX_DIMS], i;
    if (tensor_check_any("transpose", a, "a")) return NULL;
    dim0 = dim_normalize("transpose", dim0, a->ndim);
    dim1 = dim_normalize("transpose", dim1, a->ndim);
    if (dim0 < 0 || dim1 < 0) return NULL;
    for (i = 0; i < a->ndim; i++) perm[i] = i;
    if (a->ndim > 0) {
        perm[dim0] = dim1;
        perm[dim1] = dim0;
    }
    return permute_op("transpose", a, perm);
}

/* ---- slicing --------------------------------------------------------------- */

/* Copy between a dense tensor and a strided window of another, either way. */
typedef struct {
    char *dense;
    char *window;           /* the window's first element */
    size_t esize;           /* bytes per element */
    int n;
    int64_t size[AC_MAX_DIMS];
    int64_t stride[AC_MAX_DIMS];   /* in the windowed tensor's elements */
    int scatter;            /* 0: dense = window; 1: window = dense */
} WindowJob;

static void window_task(void *ctx, int64_t begin, int64_t end)
{
    const WindowJob *job = ctx;
    int64_t inner = job->n > 0 ? job->size[job->n - 1] : 1;
    int64_t step = job->n > 0 ? job->stride[job->n - 1] : 1;
    int64_t row;
    for (row = begin; row < end; row++) {
        char *dense = job->dense + row * inner * job->esize;
        char *window = job->window + index_offset(row, job->size, job->stride, job->n - 1) * job->esize;
        if (step == 1 && job->scatter)
            memcpy(window, dense, (size_t)inner * job->esize);
        else if (step == 1)
            memcpy(dense, window, (size_t)inner * job->esize);
        else if (job->scatter)
            strided_copy(window, step, dense, 1, inner, job->esize);
        else
            strided_copy(dense, 1, window, step, inner, job->esize);
    }
}

/* What forward resolved, enough to find the window again. */
typedef struct {
    int64_t start[AC_MAX_DIMS], step[AC_MAX_DIMS], length[AC_MAX_DIMS];
    unsigned dropped;        /* dims picked by an index */
} SliceCtx;

static void window_copy(const AcTensor *a, const SliceCtx *s, void *dense, int scatter)
{
    WindowJob job;
    int64_t a_stride[AC_MAX_DIMS], stride = 1, offset = 0, count = 1, inner;
    int d;
    for (d = a->ndim - 1; d >= 0; d--) {
        a_stride[d] = stride;
        stride *= a->shape[d];
    }
    job.n = 0;
    for (d = 0; d < a->ndim; d++) {
        offset += s->start[d] * a_stride[d];
        if (s->dropped & (1u << d)) continue;
        job.size[job.n] = s->length[d];
        job.stride[job.n++] = s->step[d] * a_stride[d];
        count *= s->length[d];
    }
    if (count == 0) return;
    job.dense = dense;
    job.esize = elem_size(a);
    job.window = (char *)a->data + offset * (int64_t)job.esize;
    job.scatter = scatter;
    inner = job.n > 0 ? job.size[job.n - 1] : 1;
    parallel_for(count / inner, rows_grain(inner), window_task, &job);
}

/* The gradient is zero except in the window, which gets the output gradient. */
static int slice_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *a = node->inputs[0];
    gin[0] = tensor_alloc("slice", a->shape, a->ndim);
    if (!gin[0]) return ac_last_error_code();
    memset(gin[0]->data, 0, (size_t)a->size * sizeof(float));
    window_copy(gin[0], node->context, gout->data, 1);
    return AC_OK;
}

/* Resolve slice i against a dim of size n, Python's way (positive steps). */
static int slice_resolve(const AcSlice *sl, int d, int64_t n, SliceCtx *s)
{
    int64_t start, stop;
    if (sl->is_index) {
        start = sl->start < 0 ? sl->start + n : sl->start;
        if (!sl->has_start || start < 0 || start >= n)
            return error_set(AC_ERR_INDEX, "slice: index %lld is out of range for dim %d of size %lld",
                             (long long)sl->start, d, (long long)n);
        s->start[d] = start;
        s->step[d] = 1;
        s->length[d] = 1;
        s->dropped |= 1u << d;
        return AC_OK;
    }
    if (sl->step <= 0)
        return error_set(AC_ERR_ARG, "slice: step must be positive, got %lld for dim %d",
                         (long long)sl->step, d);
    start = sl->has_start ? sl->start : 0;
    stop = sl->has_stop ? sl->stop : n;
    if (start < 0) start = start + n < 0 ? 0 : start + n;
    if (stop < 0) stop = stop + n < 0 ? 0 : stop + n;
    if (start > n) start = n;
    if (stop > n) stop = n;
    s->start[d] = start;
    s->length[d] = stop > start ? (stop - start - 1) / sl->step + 1 : 0;
    /* a window of one element has no step (and a huge one must not overflow) */
    s->step[d] = s->length[d] > 1 ? sl->step : 1;
    return AC_OK;
}

/* The window slices pick in a (into s) and its shape. */
static int slice_plan(const AcTensor *a, const AcSlice *slices, int n_slices, SliceCtx *s,
                      int64_t *shape, int *ndim)
{
    int d;
    if (n_slices < 0) return error_set(AC_ERR_ARG, "slice: n_slices is %d", n_slices);
    if (n_slices > 0 && !slices) return error_set(AC_ERR_ARG, "slice: slices is NULL");
    if (n_slices > a->ndim)
        return error_set(AC_ERR_INDEX, "slice: %d indices for a tensor of shape %s", n_slices,
                         tensor_shape_str(a));
    memset(s, 0, sizeof *s);
    *ndim = 0;
    for (d = 0; d < a->ndim; d++) {
        if (d < n_slices && slice_resolve(&slices[d], d, a->shape[d], s)) return AC_ERR_INDEX;
        if (d >= n_slices) {
            s->step[d] = 1;
            s->length[d] = a->shape[d];
        }
        if (!(s->dropped & (1u << d))) shape[(*ndim)++] = s->length[d];
    }
    return AC_OK;
}

AcTensor *ac_slice(const AcTensor *a, const AcSlice *slices, int n_slices)
{
    if (ops_observed && (slices || !n_slices) && n_slices >= 0 && n_slices <= AC_MAX_DIMS) return slice_observed(a, slices, n_slices);
    SliceCtx s, *ctx;
    int64_t shape[AC_MAX_DIMS];
    int ndim;
    AcTensor *out;
    if (tensor_check_any("slice", a, "a") || cpu_only("slice", &a, 1) ||
        slice_plan(a, slices, n_slices, &s, shape, &ndim))
        return NULL;
    out = op_output_as("slice", a->dtype, shape, ndim, &a, 1, slice_backward, sizeof(SliceCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) *ctx = s;
    window_copy(a, &s, out->data, 0);
    return out;
}

int ac_slice_put_(AcTensor *a, const AcSlice *slices, int n_slices, const AcTensor *values)
{
    if (graph_recording && a) graph_note_write("slice_put_", a);
    int64_t shape[AC_MAX_DIMS], size = 1;
    size_t bytes;
    SliceCtx s;
    void *dense;
    int ndim, d, rc;
    if (tensor_check_any("slice_put_", a, "a") || tensor_check_any("slice_put_", values, "values") ||
        cpu_only("slice_put_", (const AcTensor *[]){a, values}, 2) ||
        slice_plan(a, slices, n_slices, &s, shape, &ndim))
        return ac_last_error_code();
    for (d = 0; d < ndim; d++) size *= shape[d];
    bytes = (size_t)size * elem_size(a) + 1;
    dense = scratch_alloc(bytes);
    rc = dense ? broadcast_into("slice_put_", values, shape, ndim, a->dtype, dense) : AC_ERR_MEMORY;
    if (rc == AC_OK) window_copy(a, &s, dense, 1);
    scratch_free(dense, bytes);
    return rc;
}

/* ---- recording slice (graph.h) ------------------------------- */

AcTensor *slice_observed(const AcTensor *a, const AcSlice *slices, int n_slices)
{
    double attr[1 + 4 * AC_MAX_DIMS];
    int i;
    attr[0] = n_slices;
    for (i = 0; i < n_slices; i++) {
        const AcSlice *s = &slices[i];
        attr[1 + 4 * i] = (double)s->start;
        attr[2 + 4 * i] = (double)s->stop;
        attr[3 + 4 * i] = (double)s->step;
        attr[4 + 4 * i] = (s->has_start ? 1 : 0) | (s->has_stop ? 2 : 0) | (s->is_index ? 4 : 0);
    }
    return graph_op("slice", slice_replay, 1, &a, attr, 1 + 4 * n_slices);
}

int slice_replay(AcTensor **t, const double *attr)
{
    AcSlice slices[AC_MAX_DIMS];
    const int n = (int)attr[0];
    int i;
    if (n < 0 || n > AC_MAX_DIMS) return error_set(AC_ERR_ARG, "slice: %d slices", n);
    for (i = 0; i < n; i++) {
        const int flags = (int)attr[4 + 4 * i];
        slices[i].start = (int64_t)attr[1 + 4 * i];
        slices[i].stop = (int64_t)attr[2 + 4 * i];
        slices[i].step = (int64_t)attr[3 + 4 * i];
        slices[i].has_start = flags & 1;
        slices[i].has_stop = (flags >> 1) & 1;
        slices[i].is_index = (flags >> 2) & 1;
    }
    return graph_made(t[1] = ac_slice(t[0], slices, n));
}
