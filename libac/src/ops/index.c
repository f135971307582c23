/*
 * index.c - picking elements by index and writing them back: PyTorch's
 * advanced indexing along one dim (ac_index: int64 indices or a bool mask),
 * index_select, gather, the in-place write ac_index_put_, and expand (a
 * broadcast copy). Each forward has its backward right under it; the gradient
 * of a pick scatter-adds the output gradient into zeros of the input's shape.
 *
 * ac_index and index_select see the input as (outer, span, inner): span covers
 * the indexed dims, and each pick copies one run of `inner` elements.
 *
 * Not here: basic slicing and its write (shape.c), sort and topk (sort.c).
 */
#include "graph.h"
#include "kernels/kernels.h"

#include <string.h>

/* ---- advanced indexing and index_select ------------------------------------ */

typedef struct {
    int64_t outer, span, inner;   /* the input as (outer, span, inner) */
    int64_t n;                    /* picks */
    int64_t pos[];                /* each pick's position in [0, span) */
} Picks;

typedef enum {
    PICK_INDEX,    /* ac_index: negative indices count from the end; index's shape replaces dim */
    PICK_SELECT    /* index_select: indices in [0, size), the dim keeps its place with n entries */
} PickMode;

/*
 * Resolve index against a at dim into p's sizes and a scratch array of positions
 * (*pos, n + 1 entries; scratch_free it), and the output shape. A bool mask covers
 * dims dim .. dim + mask->ndim - 1 and picks its true elements in row-major order.
 */
static int picks_plan(const char *op, const AcTensor *a, int dim, const AcTensor *index,
                      PickMode mode, Picks *p, int64_t **pos, int64_t *shape, int *ndim)
{
    int k = index->dtype == AC_BOOL ? index->ndim : 1, d, n_dims = 0;
    int64_t i, j, n = 0;
    int index_dims;
    if ((index->dtype != AC_INT64 && index->dtype != AC_BOOL) ||
        (mode == PICK_SELECT && index->dtype != AC_INT64))
        return error_set(AC_ERR_DTYPE, "%s: index is %s; it must be int64%s", op,
                         ac_dtype_name(index->dtype), mode == PICK_SELECT ? "" : " or bool");
    if (mode == PICK_SELECT && index->ndim > 1)
        return error_set(AC_ERR_SHAPE, "%s: index must be 0-d or 1-d, got shape %s", op,
                         tensor_shape_str(index));
    if (k < 1 || dim + k > a->ndim)
        return error_set(AC_ERR_INDEX, "%s: a mask of shape %s cannot index dims %d.. of a tensor of shape %s",
                         op, tensor_shape_str(index), dim, tensor_shape_str(a));
    p->outer = p->span = p->inner = 1;
    for (d = 0; d < a->ndim; d++) {
        if (index->dtype == AC_BOOL && d >= dim && d < dim + k && index->shape[d - dim] != a->shape[d])
            return error_set(AC_ERR_INDEX, "%s: the mask's shape %s does not match the indexed tensor's shape %s at dim %d",
                             op, tensor_shape_str(index), tensor_shape_str(a), d);
        *(d < dim ? &p->outer : d < dim + k ? &p->span : &p->inner) *= a->shape[d];
    }
    if (index->dtype == AC_BOOL)
        for (i = 0; i < index->size; i++) n += data_u8(index)[i] != 0;
    else
        n = index->size;
    index_dims = index->dtype == AC_BOOL || mode == PICK_SELECT ? 1 : index->ndim;
    if (a->ndim - k + index_dims > AC_MAX_DIMS)
        return error_set(AC_ERR_SHAPE, "%s: the result would have more than %d dims", op, AC_MAX_DIMS);
    for (d = 0; d < a->ndim; d++) {
        if (d == dim && (index->dtype == AC_BOOL || mode == PICK_SELECT))
            shape[n_dims++] = n;
        else if (d == dim)
            for (j = 0; j < index->ndim; j++) shape[n_dims++] = index->shape[j];
        if (d < dim || d >= dim + k) shape[n_dims++] = a->shape[d];
    }
    *ndim = n_dims;
    *pos = scratch_alloc((size_t)(n + 1) * sizeof(int64_t));
    if (!*pos) return AC_ERR_MEMORY;
    p->n = n;
    for (i = 0, j = 0; i < index->size; i++) {
        int64_t v;
        if (index->dtype == AC_BOOL) {
            if (data_u8(index)[i]) (*pos)[j++] = i;
            continue;
        }
        v = data_i64(index)[i];
        if (v < 0 && mode == PICK_INDEX) v += p->span;
        if (v < 0 || v >= p->span) {
            scratch_free(*pos, (size_t)(n + 1) * sizeof(int64_t));
            return error_set(AC_ERR_INDEX, "%s: index %lld is out of bounds for dim %d with size %lld",
                             op, (long long)data_i64(index)[i], dim, (long long)p->span);
        }
        (*pos)[j++] = v;
    }
    return AC_OK;
}

/* gin = zeros of a's shape; gin[o, pos[j], :] += gout[o, j, :]. */
static int picks_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const Picks *p = node->context;
    const AcTensor *a = node->inputs[0];
    int64_t o, j, r;
    gin[0] = tensor_alloc(node->op, a->shape, a->ndim);
    if (!gin[0]) return ac_last_error_code();
    memset(gin[0]->data, 0, (size_t)a->size * sizeof(float));
    for (o = 0; o < p->outer; o++)
        for (j = 0; j < p->n; j++) {
            float *dst = gin[0]->data + (o * p->span + p->pos[j]) * p->inner;
            const float *src = gout->data + (o * p->n + j) * p->inner;
            for (r = 0; r < p->inner; r++) dst[r] += src[r];
        }
    return AC_OK;
}

static AcTensor *pick(const char *op, const AcTensor *a, int dim, const AcTensor *index,
                      PickMode mode)
{
    int64_t shape[AC_MAX_DIMS], *pos, o, j;
    size_t esize, run;
    Picks p, *ctx;
    AcTensor *out;
    int ndim;
    if (tensor_check_any(op, a, "input") || tensor_check_any(op, index, "index") ||
        cpu_only(op, (const AcTensor *[]){a, index}, 2))
        return NULL;
    if (a->ndim == 0) return error_null(AC_ERR_INDEX, "%s: a 0-d tensor cannot be indexed", op);
    dim = dim_normalize(op, dim, a->ndim);
    if (dim < 0 || picks_plan(op, a, dim, index, mode, &p, &pos, shape, &ndim)) return NULL;
    out = op_output_as(op, a->dtype, shape, ndim, &a, 1, picks_backward,
                       sizeof(Picks) + (size_t)p.n * sizeof(int64_t));
    if (out) {
        ctx = op_context(out);
        if (ctx) {
            *ctx = p;
            memcpy(ctx->pos, pos, (size_t)p.n * sizeof(int64_t));
        }
        esize = elem_size(a);
        run = (size_t)p.inner * esize;
        for (o = 0; o < p.outer; o++)
            for (j = 0; j < p.n; j++)
                memcpy((char *)out->data + (size_t)(o * p.n + j) * run,
                       (const char *)a->data + (size_t)(o * p.span + pos[j]) * run, run);
    }
    scratch_free(pos, (size_t)(p.n + 1) * sizeof(int64_t));
    return out;
}

AcTensor *ac_index(const AcTensor *a, int dim, const AcTensor *index)
{
    return pick("index", a, dim, index, PICK_INDEX);
}

AcTensor *ac_index_select(const AcTensor *a, int dim, const AcTensor *index)
{
    return pick("index_select", a, dim, index, PICK_SELECT);
}

int ac_index_put_(AcTensor *a, int dim, const AcTensor *index, const AcTensor *values)
{
    if (graph_recording && a) graph_note_write("index_put_", a);
    const char *op = "index_put_";
    int64_t shape[AC_MAX_DIMS], *pos, o, j, size = 1;
    size_t run, dense_bytes;
    char *dense;
    Picks p;
    int ndim, d, rc;
    if (tensor_check_any(op, a, "input") || tensor_check_any(op, index, "index") ||
        tensor_check_any(op, values, "values") ||
        cpu_only(op, (const AcTensor *[]){a, index, values}, 3))
        return ac_last_error_code();
    if (a->ndim == 0) return error_set(AC_ERR_INDEX, "%s: a 0-d tensor cannot be indexed", op);
    dim = dim_normalize(op, dim, a->ndim);
    if (dim < 0 || picks_plan(op, a, dim, index, PICK_INDEX, &p, &pos, shape, &ndim))
        return ac_last_error_code();
    for (d = 0; d < ndim; d++) size *= shape[d];
    run = (size_t)p.inner * elem_size(a);
    dense_bytes = (size_t)size * elem_size(a) + 1;
    dense = scratch_alloc(dense_bytes);
    rc = dense ? broadcast_into(op, values, shape, ndim, a->dtype, dense) : AC_ERR_MEMORY;
    for (o = 0; rc == AC_OK && o < p.outer; o++)
        for (j = 0; j < p.n; j++)
            memcpy((char *)a->data + (size_t)(o * p.span + pos[j]) * run,
                   dense + (size_t)(o * p.n + j) * run, run);
    scratch_free(dense, dense_bytes);
    scratch_free(pos, (size_t)(p.n + 1) * sizeof(int64_t));
    return rc;
}

/* ---- gather ------------------------------------------------------------------ */

typedef struct {
    int dim;
} GatherCtx;

/* Offset in a of the element at coordinates coord, with coord[dim] replaced by pick. */
static int64_t gather_offset(const AcTensor *a, const int64_t *coord, int dim, int64_t pick)
{
    int64_t offset = 0;
    int d;
    for (d = 0; d < a->ndim; d++) offset = offset * a->shape[d] + (d == dim ? pick : coord[d]);
    return offset;
}

static void coord_next(int64_t *coord, const int64_t *shape, int ndim)
{
    int d;
    for (d = ndim - 1; d >= 0; d--) {
        if (++coord[d] < shape[d]) return;
        coord[d] = 0;
    }
}

/* Node inputs: a, index. gin[a][..., index[i], ...] += gout[i]. */
static int gather_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const GatherCtx *ctx = node->context;
    const AcTensor *a = node->inputs[0], *index = node->inputs[1];
    int64_t coord[AC_MAX_DIMS] = {0}, i;
    gin[0] = tensor_alloc("gather", a->shape, a->ndim);
    if (!gin[0]) return ac_last_error_code();
    memset(gin[0]->data, 0, (size_t)a->size * sizeof(float));
    for (i = 0; i < index->size; i++) {
        gin[0]->data[gather_offset(a, coord, ctx->dim, data_i64(index)[i])] += gout->data[i];
        coord_next(coord, index->shape, index->ndim);
    }
    return AC_OK;
}

AcTensor *ac_gather(const AcTensor *a, int dim, const AcTensor *index)
{
    const char *op = "gather";
    const AcTensor *inputs[2];
    int64_t coord[AC_MAX_DIMS] = {0}, i, n;
    GatherCtx *ctx;
    AcTensor *out;
    size_t esize;
    int d;
    if (tensor_check_any(op, a, "input") || tensor_check_any(op, index, "index") ||
        cpu_only(op, (const AcTensor *[]){a, index}, 2))
        return NULL;
    if (index->dtype != AC_INT64)
        return error_null(AC_ERR_DTYPE, "%s: index is %s; it must be int64", op, ac_dtype_name(index->dtype));
    dim = dim_normalize(op, dim, a->ndim);
    if (dim < 0) return NULL;
    if (index->ndim != a->ndim)
        return error_null(AC_ERR_SHAPE, "%s: index %s and input %s must have the same number of dims",
                          op, tensor_shape_str(index), tensor_shape_str(a));
    for (d = 0; d < a->ndim; d++)
        if (d != dim && index->shape[d] > a->shape[d])
            return error_null(AC_ERR_SHAPE, "%s: index %s is larger than input %s at dim %d", op,
                              tensor_shape_str(index), tensor_shape_str(a), d);
    n = a->ndim > 0 ? a->shape[dim] : 1;
    for (i = 0; i < index->size; i++)
        if (data_i64(index)[i] < 0 || data_i64(index)[i] >= n)
            return error_null(AC_ERR_INDEX, "%s: index %lld is out of bounds for dim %d with size %lld",
                              op, (long long)data_i64(index)[i], dim, (long long)n);
    inputs[0] = a;
    inputs[1] = index;
    out = op_output_as(op, a->dtype, index->shape, index->ndim, inputs, 2, gather_backward,
                       sizeof(GatherCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) ctx->dim = dim;
    esize = elem_size(a);
    for (i = 0; i < out->size; i++) {
        memcpy((char *)out->data + (size_t)i * esize,
               (const char *)a->data + (size_t)gather_offset(a, coord, dim, data_i64(index)[i]) * esize,
               esize);
        coord_next(coord, index->shape, index->ndim);
    }
    return out;
}

/* ---- expand ------------------------------------------------------------------ */

/* The gradient sums the output gradient over the broadcast dims. */
static int expand_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    gin[0] = reduce_to_shape(gout, node->inputs[0]);
    return gin[0] ? AC_OK : ac_last_error_code();
}

AcTensor *ac_expand(const AcTensor *a, const int64_t *shape, int ndim)
{
    int64_t resolved[AC_MAX_DIMS];
    AcTensor *out;
    int d;
    if (tensor_check_any("expand", a, "input") || cpu_only("expand", &a, 1)) return NULL;
    if (ndim < a->ndim || ndim > AC_MAX_DIMS)
        return error_null(AC_ERR_SHAPE, "expand: %d sizes given for a tensor of shape %s (needs %d to %d)",
                          ndim, tensor_shape_str(a), a->ndim, AC_MAX_DIMS);
    if (ndim > 0 && !shape) return error_null(AC_ERR_ARG, "expand: shape is NULL");
    for (d = 0; d < ndim; d++) {
        int s = d - (ndim - a->ndim);
        resolved[d] = shape[d] == -1 && s >= 0 ? a->shape[s] : shape[d];
        if (shape[d] == -1 && s < 0)
            return error_null(AC_ERR_SHAPE, "expand: -1 is not allowed for the new leading dim %d of %s",
                              d, shape_str(shape, ndim));
        if (s >= 0 && a->shape[s] != 1 && a->shape[s] != resolved[d])
            return error_null(AC_ERR_SHAPE, "expand: %s cannot be expanded to %s (dim %d)",
                              tensor_shape_str(a), shape_str(shape, ndim), d);
    }
    if (shape_check("expand", resolved, ndim, NULL)) return NULL;
    out = op_output_as("expand", a->dtype, resolved, ndim, &a, 1, expand_backward, 0);
    if (out) broadcast_into("expand", a, resolved, ndim, a->dtype, out->data);   /* fits: checked */
    return out;
}
