/*
 * layout.c - ops that move elements of any dtype to new places, byte for byte:
 * flip, tril/triu, diagonal and diag_embed (each the other's backward), unfold,
 * repeat, nonzero (the int64 coordinates of the non-zero elements), and the
 * index helpers of repeat_interleave, index_put and unravel_index. Each forward
 * has its backward next to it.
 *
 * Not here: views and transposes (shape.c), cat and stack (join.c), picks by
 * index (index.c), writes by index (scatter.c). roll, tile and the
 * other compositions are Python (aicraft/shapes.py).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <string.h>

/* Row-major strides of shape, in elements. */
static void strides_of(const int64_t *shape, int ndim, int64_t *stride)
{
    int64_t s = 1;
    int d;
    for (d = ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= shape[d];
    }
}

static void copy_elem(char *dst, const char *src, size_t esize)
{
    switch (esize) {
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: *dst = *src; break;
    }
}

/* ---- flip ------------------------------------------------------------------- */

typedef struct {
    unsigned flipped;    /* bit d: dim d is reversed */
} FlipCtx;

/* out = a reversed along the dims in flipped, one row (the last dim) at a time. */
static void flip_copy(const AcTensor *a, unsigned flipped, void *out)
{
    int64_t stride[AC_MAX_DIMS], coord[AC_MAX_DIMS] = {0}, inner, rows, row, j;
    size_t esize = elem_size(a);
    int d, last = a->ndim - 1, reverse_rows;
    if (a->size == 0) return;
    if (a->ndim == 0) {
        memcpy(out, a->data, esize);
        return;
    }
    strides_of(a->shape, a->ndim, stride);
    inner = a->shape[last];
    rows = a->size / inner;
    reverse_rows = (flipped >> last) & 1u;
    for (row = 0; row < rows; row++) {
        int64_t from = 0;
        char *dst = (char *)out + (size_t)(row * inner) * esize;
        const char *src;
        for (d = 0; d < last; d++)
            from += ((flipped >> d) & 1u ? a->shape[d] - 1 - coord[d] : coord[d]) * stride[d];
        src = (const char *)a->data + (size_t)from * esize;
        if (!reverse_rows)
            memcpy(dst, src, (size_t)inner * esize);
        else
            for (j = 0; j < inner; j++) copy_elem(dst + (size_t)j * esize, src + (size_t)(inner - 1 - j) * esize, esize);
        for (d = last - 1; d >= 0; d--) {
            if (++coord[d] < a->shape[d]) break;
            coord[d] = 0;
        }
    }
}

static AcTensor *flip_op(const AcTensor *a, unsigned flipped);

/* flip is its own inverse: the gradient is the output gradient flipped back. */
static int flip_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const FlipCtx *ctx = node->context;
    gin[0] = flip_op(gout, ctx->flipped);
    return gin[0] ? AC_OK : ac_last_error_code();
}

static AcTensor *flip_op(const AcTensor *a, unsigned flipped)
{
    AcTensor *out = op_output_as("flip", a->dtype, a->shape, a->ndim, &a, 1, flip_backward, sizeof(FlipCtx));
    FlipCtx *ctx;
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) ctx->flipped = flipped;
    flip_copy(a, flipped, out->data);
    return out;
}

/* attr: n_dims, then the dims */
int flip_replay(AcTensor **t, const double *attr)
{
    int dims[AC_MAX_DIMS], i, n = (int)attr[0];
    for (i = 0; i < n; i++) dims[i] = (int)attr[1 + i];
    return graph_made(t[1] = ac_flip(t[0], dims, n));
}

AcTensor *ac_flip(const AcTensor *a, const int *dims, int n_dims)
{
    if (ops_observed && (dims || !n_dims) && n_dims >= 0 && n_dims <= AC_MAX_DIMS) {
        double attr[1 + AC_MAX_DIMS];
        int k;
        attr[0] = n_dims;
        for (k = 0; k < n_dims; k++) attr[1 + k] = dims[k];
        return graph_op("flip", flip_replay, 1, &a, attr, 1 + n_dims);
    }
    unsigned flipped = 0;
    int i, d;
    if (tensor_check_any("flip", a, "input") || cpu_only("flip", &a, 1)) return NULL;
    if (n_dims < 0 || n_dims > AC_MAX_DIMS || (n_dims > 0 && !dims))
        return error_null(AC_ERR_ARG, "flip: %d dims given (dims %s)", n_dims, dims ? "set" : "NULL");
    for (i = 0; i < n_dims; i++) {
        d = dim_normalize("flip", dims[i], a->ndim);
        if (d < 0) return NULL;
        if (flipped & (1u << d))
            return error_null(AC_ERR_ARG, "flip: dim %d appears more than once in dims", dims[i]);
        flipped |= 1u << d;
    }
    if (a->ndim == 0) flipped = 0;
    return flip_op(a, flipped);
}

/* ---- tril and triu -------------------------------------------------------------- */

typedef struct {
    int64_t diagonal;
    int upper;
} TriCtx;

/* Each matrix row i keeps columns j <= i + diagonal (tril) or j >= i + diagonal
   (triu); the rest is zero (all zero bits in every dtype). */
static void tri_copy(const AcTensor *a, int64_t diagonal, int upper, void *out)
{
    int64_t rows = a->shape[a->ndim - 2], cols = a->shape[a->ndim - 1], r, i;
    int64_t n_rows = rows > 0 ? a->size / cols : 0;
    size_t esize = elem_size(a), row_bytes = (size_t)cols * esize;
    for (r = 0; r < n_rows; r++) {
        char *dst = (char *)out + (size_t)r * row_bytes;
        const char *src = (const char *)a->data + (size_t)r * row_bytes;
        int64_t edge = r % rows + diagonal, keep_from, keep_to;   /* keep [keep_from, keep_to) */
        if (upper) {
            keep_from = edge < 0 ? 0 : edge > cols ? cols : edge;
            keep_to = cols;
        } else {
            keep_from = 0;
            keep_to = edge + 1 < 0 ? 0 : edge + 1 > cols ? cols : edge + 1;
        }
        i = keep_from;
        memset(dst, 0, (size_t)keep_from * esize);
        memcpy(dst + (size_t)i * esize, src + (size_t)i * esize, (size_t)(keep_to - keep_from) * esize);
        memset(dst + (size_t)keep_to * esize, 0, (size_t)(cols - keep_to) * esize);
    }
}

static AcTensor *tri_op(const AcTensor *a, int64_t diagonal, int upper);

/* The gradient keeps the same triangle of the output gradient. */
static int tri_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const TriCtx *ctx = node->context;
    gin[0] = tri_op(gout, ctx->diagonal, ctx->upper);
    return gin[0] ? AC_OK : ac_last_error_code();
}

static AcTensor *tri_op(const AcTensor *a, int64_t diagonal, int upper)
{
    const char *op = upper ? "triu" : "tril";
    AcTensor *out;
    TriCtx *ctx;
    if (tensor_check_any(op, a, "input") || cpu_only(op, &a, 1)) return NULL;
    if (a->ndim < 2)
        return error_null(AC_ERR_SHAPE, "%s: input must have at least 2 dims, got shape %s", op,
                          tensor_shape_str(a));
    out = op_output_as(op, a->dtype, a->shape, a->ndim, &a, 1, tri_backward, sizeof(TriCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) {
        ctx->diagonal = diagonal;
        ctx->upper = upper;
    }
    if (a->size > 0) tri_copy(a, diagonal, upper, out->data);
    return out;
}

int tril_replay(AcTensor **t, const double *attr) { return graph_made(t[1] = ac_tril(t[0], (int64_t)attr[0])); }
int triu_replay(AcTensor **t, const double *attr) { return graph_made(t[1] = ac_triu(t[0], (int64_t)attr[0])); }

/* Recorded only with a diagonal a program's int attribute holds. */
AcTensor *ac_tril(const AcTensor *a, int64_t diagonal)
{
    if (ops_observed && diagonal >= INT32_MIN && diagonal <= INT32_MAX)
        return graph_op("tril", tril_replay, 1, &a, (double[]){(double)diagonal}, 1);
    return tri_op(a, diagonal, 0);
}

AcTensor *ac_triu(const AcTensor *a, int64_t diagonal)
{
    if (ops_observed && diagonal >= INT32_MIN && diagonal <= INT32_MAX)
        return graph_op("triu", triu_replay, 1, &a, (double[]){(double)diagonal}, 1);
    return tri_op(a, diagonal, 1);
}

/* ---- diagonal and diag_embed ------------------------------------------------------ */

/*
 * The diagonal of a tensor of shape (shape, ndim) between dims dim1 and dim2,
 * offset above the main one (below when negative), as a strided window: the
 * other dims in order, then the diagonal; base is its first element.
 */
typedef struct {
    int n;
    int64_t size[AC_MAX_DIMS], stride[AC_MAX_DIMS], base;
} Window;

static void diagonal_window(const int64_t *shape, int ndim, int64_t offset, int dim1, int dim2, Window *w)
{
    int64_t stride[AC_MAX_DIMS], length;
    int d;
    strides_of(shape, ndim, stride);
    w->n = 0;
    for (d = 0; d < ndim; d++) {
        if (d == dim1 || d == dim2) continue;
        w->size[w->n] = shape[d];
        w->stride[w->n++] = stride[d];
    }
    if (offset >= 0)
        length = shape[dim2] - offset < shape[dim1] ? shape[dim2] - offset : shape[dim1];
    else
        length = shape[dim1] + offset < shape[dim2] ? shape[dim1] + offset : shape[dim2];
    if (length < 0) length = 0;
    w->size[w->n] = length;
    w->stride[w->n++] = stride[dim1] + stride[dim2];
    w->base = length == 0 ? 0 : offset >= 0 ? offset * stride[dim2] : -offset * stride[dim1];
}

/* dense (the window's elements in row-major order) = the window of t, or the reverse. */
static void window_move(char *t, const Window *w, char *dense, size_t esize, int into_window)
{
    int64_t coord[AC_MAX_DIMS] = {0}, count = 1, i, at = w->base;
    int d;
    for (d = 0; d < w->n; d++) count *= w->size[d];
    for (i = 0; i < count; i++) {
        if (into_window)
            copy_elem(t + (size_t)at * esize, dense + (size_t)i * esize, esize);
        else
            copy_elem(dense + (size_t)i * esize, t + (size_t)at * esize, esize);
        for (d = w->n - 1; d >= 0; d--) {
            at += w->stride[d];
            if (++coord[d] < w->size[d]) break;
            at -= w->stride[d] * w->size[d];
            coord[d] = 0;
        }
    }
}

typedef struct {
    int64_t offset;
    int dim1, dim2;
} DiagCtx;

static AcTensor *diagonal_op(const AcTensor *a, int64_t offset, int dim1, int dim2);
static AcTensor *diag_embed_op(const AcTensor *a, const int64_t *shape, int ndim, int64_t offset,
                               int dim1, int dim2);

/* The gradient of a diagonal: the output gradient on the diagonal of zeros of a's shape. */
static int diagonal_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const DiagCtx *ctx = node->context;
    const AcTensor *a = node->inputs[0];
    gin[0] = diag_embed_op(gout, a->shape, a->ndim, ctx->offset, ctx->dim1, ctx->dim2);
    return gin[0] ? AC_OK : ac_last_error_code();
}

static int diag_embed_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const DiagCtx *ctx = node->context;
    gin[0] = diagonal_op(gout, ctx->offset, ctx->dim1, ctx->dim2);
    return gin[0] ? AC_OK : ac_last_error_code();
}

static AcTensor *diag_node(AcTensor *out, int64_t offset, int dim1, int dim2)
{
    DiagCtx *ctx = op_context(out);
    if (ctx) {
        ctx->offset = offset;
        ctx->dim1 = dim1;
        ctx->dim2 = dim2;
    }
    return out;
}

static AcTensor *diagonal_op(const AcTensor *a, int64_t offset, int dim1, int dim2)
{
    Window w;
    AcTensor *out;
    diagonal_window(a->shape, a->ndim, offset, dim1, dim2, &w);
    out = op_output_as("diagonal", a->dtype, w.size, w.n, &a, 1, diagonal_backward, sizeof(DiagCtx));
    if (!out) return NULL;
    window_move((char *)a->data, &w, (char *)out->data, elem_size(a), 0);
    return diag_node(out, offset, dim1, dim2);
}

/* a (the diagonal's elements, as diagonal_window orders them) on the diagonal of
   zeros of the given shape. */
static AcTensor *diag_embed_op(const AcTensor *a, const int64_t *shape, int ndim, int64_t offset,
                               int dim1, int dim2)
{
    Window w;
    AcTensor *out;
    out = op_output_as("diag_embed", a->dtype, shape, ndim, &a, 1, diag_embed_backward, sizeof(DiagCtx));
    if (!out) return NULL;
    memset(out->data, 0, (size_t)out->size * elem_size(out));
    diagonal_window(shape, ndim, offset, dim1, dim2, &w);
    window_move((char *)out->data, &w, (char *)a->data, elem_size(a), 1);
    return diag_node(out, offset, dim1, dim2);
}

/* dim1 and dim2 as dims of an ndim-d tensor, different. */
static int diag_dims(const char *op, int *dim1, int *dim2, int ndim)
{
    int d1 = dim_normalize(op, *dim1, ndim), d2;
    if (d1 < 0) return ac_last_error_code();
    d2 = dim_normalize(op, *dim2, ndim);
    if (d2 < 0) return ac_last_error_code();
    if (d1 == d2) return error_set(AC_ERR_ARG, "%s: dim1 and dim2 are both dim %d", op, d1);
    *dim1 = d1;
    *dim2 = d2;
    return AC_OK;
}

int diagonal_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_diagonal(t[0], (int64_t)attr[0], (int)attr[1], (int)attr[2]));
}

int diag_embed_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_diag_embed(t[0], (int64_t)attr[0], (int)attr[1], (int)attr[2]));
}

AcTensor *ac_diagonal(const AcTensor *a, int64_t offset, int dim1, int dim2)
{
    if (ops_observed && offset >= INT32_MIN && offset <= INT32_MAX)
        return graph_op("diagonal", diagonal_replay, 1, &a, (double[]){(double)offset, dim1, dim2}, 3);
    if (tensor_check_any("diagonal", a, "input") || cpu_only("diagonal", &a, 1)) return NULL;
    if (a->ndim < 2)
        return error_null(AC_ERR_SHAPE, "diagonal: input must have at least 2 dims, got shape %s",
                          tensor_shape_str(a));
    if (diag_dims("diagonal", &dim1, &dim2, a->ndim)) return NULL;
    return diagonal_op(a, offset, dim1, dim2);
}

AcTensor *ac_diag_embed(const AcTensor *a, int64_t offset, int dim1, int dim2)
{
    if (ops_observed && offset >= INT32_MIN && offset <= INT32_MAX)
        return graph_op("diag_embed", diag_embed_replay, 1, &a, (double[]){(double)offset, dim1, dim2}, 3);
    if (tensor_check_any("diag_embed", a, "input") || cpu_only("diag_embed", &a, 1)) return NULL;
    if (a->ndim < 1 || a->ndim >= AC_MAX_DIMS)
        return error_null(AC_ERR_SHAPE, "diag_embed: input must have 1 to %d dims, got shape %s",
                          AC_MAX_DIMS - 1, tensor_shape_str(a));
    if (offset > INT32_MAX || offset < -INT32_MAX)
        return error_null(AC_ERR_ARG, "diag_embed: offset %lld is too large", (long long)offset);
    int64_t shape[AC_MAX_DIMS], length;
    int ndim = a->ndim + 1, d, i = 0;
    if (diag_dims("diag_embed", &dim1, &dim2, ndim)) return NULL;
    length = a->shape[a->ndim - 1] + (offset < 0 ? -offset : offset);
    for (d = 0; d < ndim; d++) shape[d] = d == dim1 || d == dim2 ? length : a->shape[i++];
    if (shape_check("diag_embed", shape, ndim, NULL)) return NULL;
    return diag_embed_op(a, shape, ndim, offset, dim1, dim2);
}

/* ---- nonzero ------------------------------------------------------------------------ */

static int is_nonzero(const AcTensor *a, int64_t i)
{
    switch (a->dtype) {
    case AC_FLOAT32: return a->data[i] != 0.0f;   /* NaN is non-zero */
    case AC_INT64: return data_i64(a)[i] != 0;
    default: return data_u8(a)[i] != 0;
    }
}

AcTensor *ac_nonzero(const AcTensor *a)
{
    int64_t shape[2], coord[AC_MAX_DIMS] = {0}, i, n = 0, *out_data;
    AcTensor *out;
    int d;
    if (tensor_check_any("nonzero", a, "input") || cpu_only("nonzero", &a, 1)) return NULL;
    for (i = 0; i < a->size; i++) n += is_nonzero(a, i);
    shape[0] = n;
    shape[1] = a->ndim;
    out = tensor_create("nonzero", shape, 2, AC_INT64, NULL, 0, 0);
    if (!out) return NULL;
    out_data = data_i64(out);
    for (i = 0; i < a->size; i++) {
        if (is_nonzero(a, i)) {
            memcpy(out_data, coord, (size_t)a->ndim * sizeof(int64_t));
            out_data += a->ndim;
        }
        for (d = a->ndim - 1; d >= 0; d--) {
            if (++coord[d] < a->shape[d]) break;
            coord[d] = 0;
        }
    }
    return out;
}

/* ---- index helpers: repeat_interleave's and index_put's positions ------------------ */

AcTensor *ac_repeat_index(const AcTensor *repeats)
{
    int64_t shape[1], i, j, total = 0, *out_data;
    AcTensor *out;
    if (tensor_check_any("repeat_interleave", repeats, "repeats") || cpu_only("repeat_interleave", &repeats, 1))
        return NULL;
    if (repeats->dtype != AC_INT64 || repeats->ndim != 1)
        return error_null(AC_ERR_ARG, "repeat_interleave: repeats must be a 1-d int64 tensor, got %s of shape %s",
                          ac_dtype_name(repeats->dtype), tensor_shape_str(repeats));
    for (i = 0; i < repeats->size; i++) {
        int64_t r = data_i64(repeats)[i];
        if (r < 0)
            return error_null(AC_ERR_ARG, "repeat_interleave: repeats must be non-negative, got %lld", (long long)r);
        if (r > INT64_MAX / 8 - total)
            return error_null(AC_ERR_MEMORY, "repeat_interleave: the result is too large");
        total += r;
    }
    shape[0] = total;
    out = tensor_create("repeat_interleave", shape, 1, AC_INT64, NULL, 0, 0);
    if (!out) return NULL;
    out_data = data_i64(out);
    for (i = 0; i < repeats->size; i++)
        for (j = 0; j < data_i64(repeats)[i]; j++) *out_data++ = i;
    return out;
}

AcTensor *ac_ravel_index(AcTensor *const *indices, int k, const int64_t *shape, int ndim)
{
    const char *op = "index_put";
    int64_t stride[AC_MAX_DIMS], i, s = 1;
    AcTensor *out;
    int j;
    if (!indices || k < 1 || k > ndim || ndim > AC_MAX_DIMS || !shape)
        return error_null(AC_ERR_ARG, "%s: %d index tensors for a %d-d tensor", op, k, ndim);
    for (j = 0; j < k; j++) {
        if (tensor_check_any(op, indices[j], "index") || cpu_only(op, (const AcTensor *const *)&indices[j], 1))
            return NULL;
        if (indices[j]->dtype != AC_INT64)
            return error_null(AC_ERR_DTYPE, "%s: index %d is %s; it must be int64", op, j,
                              ac_dtype_name(indices[j]->dtype));
        if (!same_shape(indices[j], indices[0]))
            return error_null(AC_ERR_SHAPE, "%s: index %d has shape %s, index 0 %s (broadcast them first)",
                              op, j, tensor_shape_str(indices[j]), tensor_shape_str(indices[0]));
    }
    for (j = k - 1; j >= 0; j--) {
        stride[j] = s;
        s *= shape[j];
    }
    out = tensor_create(op, indices[0]->shape, indices[0]->ndim, AC_INT64, NULL, 0, 0);
    if (!out) return NULL;
    for (i = 0; i < out->size; i++) {
        int64_t at = 0;
        for (j = 0; j < k; j++) {
            int64_t v = data_i64(indices[j])[i], n = shape[j];
            if (v < -n || v >= n) {
                ac_tensor_free(out);
                return error_null(AC_ERR_INDEX, "%s: index %lld is out of bounds for dim %d with size %lld",
                                  op, (long long)v, j, (long long)n);
            }
            at += (v < 0 ? v + n : v) * stride[j];
        }
        data_i64(out)[i] = at;
    }
    return out;
}

/* ---- unfold: sliding windows along one dim ------------------------------------------- */

typedef struct {
    int dim;
    int64_t size, step;
} UnfoldCtx;

/* The windows of a (shape, ndim) along dim as a strided window: dim becomes the
   window count (stepping step), and a new last dim walks one window. */
static void unfold_window(const int64_t *shape, int ndim, int dim, int64_t size, int64_t step, Window *w)
{
    int64_t stride[AC_MAX_DIMS];
    int d;
    strides_of(shape, ndim, stride);
    w->n = 0;
    for (d = 0; d < ndim; d++) {
        w->size[w->n] = d == dim ? (shape[d] - size) / step + 1 : shape[d];
        w->stride[w->n++] = d == dim ? stride[d] * step : stride[d];
    }
    w->size[w->n] = size;
    w->stride[w->n++] = ndim > 0 ? stride[dim] : 1;
    w->base = 0;
}

/* Windows overlap when step < size: the gradient adds each window's share. */
static int unfold_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const UnfoldCtx *ctx = node->context;
    const AcTensor *a = node->inputs[0];
    int64_t coord[AC_MAX_DIMS] = {0}, i, at = 0;
    Window w;
    int d;
    gin[0] = tensor_alloc("unfold", a->shape, a->ndim);
    if (!gin[0]) return ac_last_error_code();
    memset(gin[0]->data, 0, (size_t)a->size * sizeof(float));
    unfold_window(a->shape, a->ndim, ctx->dim, ctx->size, ctx->step, &w);
    for (i = 0; i < gout->size; i++) {
        gin[0]->data[at] += gout->data[i];
        for (d = w.n - 1; d >= 0; d--) {
            at += w.stride[d];
            if (++coord[d] < w.size[d]) break;
            at -= w.stride[d] * w.size[d];
            coord[d] = 0;
        }
    }
    return AC_OK;
}

int unfold_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_unfold(t[0], (int)attr[0], (int64_t)attr[1], (int64_t)attr[2]));
}

AcTensor *ac_unfold(const AcTensor *a, int dim, int64_t size, int64_t step)
{
    if (ops_observed && size >= 0 && size <= INT32_MAX && step > 0 && step <= INT32_MAX)
        return graph_op("unfold", unfold_replay, 1, &a, (double[]){dim, (double)size, (double)step}, 3);
    const char *op = "unfold";
    int64_t n;
    UnfoldCtx *ctx;
    AcTensor *out;
    Window w;
    if (tensor_check_any(op, a, "input") || cpu_only(op, &a, 1)) return NULL;
    if (a->ndim >= AC_MAX_DIMS)
        return error_null(AC_ERR_SHAPE, "%s: input %s already has the most dims (%d)", op, tensor_shape_str(a), AC_MAX_DIMS);
    dim = dim_normalize(op, dim, a->ndim);
    if (dim < 0) return NULL;
    n = a->ndim > 0 ? a->shape[dim] : 1;
    if (size < 0 || size > n)
        return error_null(AC_ERR_SHAPE, "%s: size %lld is out of range for dim %d of size %lld (input %s)", op,
                          (long long)size, dim, (long long)n, tensor_shape_str(a));
    if (step <= 0) return error_null(AC_ERR_ARG, "%s: step must be positive, got %lld", op, (long long)step);
    if (a->ndim == 0) {
        /* as PyTorch: a 0-d tensor unfolds into one window of its one element */
        int64_t one[1] = {size};
        out = op_output_as(op, a->dtype, one, 1, &a, 1, unfold_backward, sizeof(UnfoldCtx));
        if (out && size) memcpy(out->data, a->data, elem_size(a));
    } else {
        unfold_window(a->shape, a->ndim, dim, size, step, &w);
        out = op_output_as(op, a->dtype, w.size, w.n, &a, 1, unfold_backward, sizeof(UnfoldCtx));
        if (out) window_move((char *)a->data, &w, (char *)out->data, elem_size(a), 0);
    }
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) {
        ctx->dim = dim;
        ctx->size = size;
        ctx->step = step;
    }
    return out;
}

AcTensor *ac_unravel_index(const AcTensor *indices, const int64_t *shape, int ndim)
{
    const char *op = "unravel_index";
    int64_t out_shape[AC_MAX_DIMS], i;
    AcTensor *out;
    int d;
    if (tensor_check_any(op, indices, "indices") || cpu_only(op, &indices, 1)) return NULL;
    if (indices->dtype != AC_INT64)
        return error_null(AC_ERR_DTYPE, "%s: indices are %s; they must be int64", op, ac_dtype_name(indices->dtype));
    if (ndim < 0 || ndim > AC_MAX_DIMS || (ndim > 0 && !shape) || indices->ndim >= AC_MAX_DIMS)
        return error_null(AC_ERR_ARG, "%s: a shape of %d dims for indices %s", op, ndim, tensor_shape_str(indices));
    for (d = 0; d < ndim; d++)
        if (shape[d] <= 0)
            return error_null(AC_ERR_SHAPE, "%s: shape %s must have positive sizes", op, shape_str(shape, ndim));
    memcpy(out_shape, indices->shape, (size_t)indices->ndim * sizeof(int64_t));
    out_shape[indices->ndim] = ndim;
    out = tensor_create(op, out_shape, indices->ndim + 1, AC_INT64, NULL, 0, 0);
    if (!out) return NULL;
    for (i = 0; i < indices->size; i++) {
        int64_t v = data_i64(indices)[i];
        for (d = ndim - 1; d >= 0; d--) {
            /* floor division and modulo, as PyTorch's (values past the shape wrap) */
            int64_t q = v / shape[d], r = v % shape[d];
            if (r < 0) {
                r += shape[d];
                q--;
            }
            data_i64(out)[i * ndim + d] = r;
            v = q;
        }
    }
    return out;
}

/* ---- repeat: tiles of a ----------------------------------------------------------------- */

typedef struct {
    int n;
    int64_t repeats[AC_MAX_DIMS];
} RepeatCtx;

/* a's shape padded with leading ones to n dims, its rows' strides (in rows of the
   last dim), and the output shape. */
static void repeat_shapes(const AcTensor *a, const int64_t *repeats, int n, int64_t *in_shape,
                          int64_t *row_stride, int64_t *out_shape)
{
    int64_t s = 1;
    int d;
    for (d = 0; d < n; d++) {
        in_shape[d] = d < n - a->ndim ? 1 : a->shape[d - (n - a->ndim)];
        out_shape[d] = in_shape[d] * repeats[d];
    }
    for (d = n - 2; d >= 0; d--) {
        row_stride[d] = s;
        s *= in_shape[d];
    }
}

/* Walk the output's rows (all dims but the last), calling visit with each output row
   and the input row it tiles (the last dim: in_shape[n - 1] elements, repeated). */
typedef void (*RowVisit)(void *ctx, int64_t out_row, int64_t in_row);

static void repeat_rows(const int64_t *in_shape, const int64_t *row_stride, const int64_t *out_shape, int n,
                        RowVisit visit, void *ctx)
{
    int64_t coord[AC_MAX_DIMS] = {0}, rows = 1, row;
    int d;
    for (d = 0; d < n - 1; d++) rows *= out_shape[d];
    for (row = 0; row < rows; row++) {
        int64_t in_row = 0;
        for (d = 0; d < n - 1; d++) in_row += (coord[d] % in_shape[d]) * row_stride[d];
        visit(ctx, row, in_row);
        for (d = n - 2; d >= 0; d--) {
            if (++coord[d] < out_shape[d]) break;
            coord[d] = 0;
        }
    }
}

typedef struct {
    const char *in;
    char *out;
    size_t row_bytes;       /* one input row */
    int64_t times;          /* repeats of the last dim */
    const float *gout;      /* backward: the output gradient */
    float *gin;
    int64_t inner;
} RepeatJob;

static void repeat_copy_row(void *ctx, int64_t out_row, int64_t in_row)
{
    const RepeatJob *job = ctx;
    char *dst = job->out + (size_t)out_row * job->row_bytes * (size_t)job->times;
    int64_t k;
    for (k = 0; k < job->times; k++)
        memcpy(dst + (size_t)k * job->row_bytes, job->in + (size_t)in_row * job->row_bytes, job->row_bytes);
}

static void repeat_add_row(void *ctx, int64_t out_row, int64_t in_row)
{
    const RepeatJob *job = ctx;
    const float *g = job->gout + out_row * job->inner * job->times;
    float *dst = job->gin + in_row * job->inner;
    int64_t k, j;
    for (k = 0; k < job->times; k++)
        for (j = 0; j < job->inner; j++) dst[j] += g[k * job->inner + j];
}

/* The gradient sums the output gradient over the tiles. */
static int repeat_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const RepeatCtx *ctx = node->context;
    const AcTensor *a = node->inputs[0];
    int64_t in_shape[AC_MAX_DIMS] = {0}, row_stride[AC_MAX_DIMS] = {0}, out_shape[AC_MAX_DIMS] = {0};
    RepeatJob job;
    gin[0] = tensor_alloc("repeat", a->shape, a->ndim);
    if (!gin[0]) return ac_last_error_code();
    memset(gin[0]->data, 0, (size_t)a->size * sizeof(float));
    if (gout->size == 0) return AC_OK;
    if (ctx->n == 0) {
        gin[0]->data[0] = gout->data[0];
        return AC_OK;
    }
    repeat_shapes(a, ctx->repeats, ctx->n, in_shape, row_stride, out_shape);
    job.gout = gout->data;
    job.gin = gin[0]->data;
    job.inner = in_shape[ctx->n - 1];
    job.times = ctx->repeats[ctx->n - 1];
    repeat_rows(in_shape, row_stride, out_shape, ctx->n, repeat_add_row, &job);
    return AC_OK;
}

int repeat_replay(AcTensor **t, const double *attr)
{
    int64_t repeats[AC_MAX_DIMS];
    int i, n = (int)attr[0];
    for (i = 0; i < n; i++) repeats[i] = (int64_t)attr[1 + i];
    return graph_made(t[1] = ac_repeat(t[0], repeats, n));
}

AcTensor *ac_repeat(const AcTensor *a, const int64_t *repeats, int n)
{
    if (ops_observed && (repeats || !n) && n >= 0 && n <= AC_MAX_DIMS) {
        double attr[1 + AC_MAX_DIMS];
        int k;
        attr[0] = n;
        for (k = 0; k < n; k++) attr[1 + k] = (double)repeats[k];
        return graph_op("repeat", repeat_replay, 1, &a, attr, 1 + n);
    }
    const char *op = "repeat";
    int64_t in_shape[AC_MAX_DIMS] = {0}, row_stride[AC_MAX_DIMS] = {0}, out_shape[AC_MAX_DIMS] = {0};
    RepeatCtx *ctx;
    RepeatJob job;
    AcTensor *out;
    int d;
    if (tensor_check_any(op, a, "input") || cpu_only(op, &a, 1)) return NULL;
    if (n < a->ndim || n > AC_MAX_DIMS || (n > 0 && !repeats))
        return error_null(AC_ERR_SHAPE, "%s: %d repeats for a tensor of shape %s (needs %d to %d)", op, n,
                          tensor_shape_str(a), a->ndim, AC_MAX_DIMS);
    for (d = 0; d < n; d++)
        if (repeats[d] < 0 || repeats[d] > INT64_MAX / 8)
            return error_null(AC_ERR_ARG, "%s: repeats %s must be non-negative", op, shape_str(repeats, n));
    repeat_shapes(a, repeats, n, in_shape, row_stride, out_shape);
    for (d = 0; d < n; d++)
        if (in_shape[d] > 0 && repeats[d] > INT64_MAX / 8 / in_shape[d])
            return error_null(AC_ERR_MEMORY, "%s: the result of repeating %s by %s is too large", op,
                              tensor_shape_str(a), shape_str(repeats, n));
    if (shape_check(op, out_shape, n, NULL)) return NULL;
    out = op_output_as(op, a->dtype, out_shape, n, &a, 1, repeat_backward, sizeof(RepeatCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) {
        ctx->n = n;
        memcpy(ctx->repeats, repeats, (size_t)n * sizeof(int64_t));
    }
    if (out->size == 0) return out;
    if (n == 0) {
        memcpy(out->data, a->data, elem_size(a));
        return out;
    }
    job.in = (const char *)a->data;
    job.out = (char *)out->data;
    job.row_bytes = (size_t)in_shape[n - 1] * elem_size(a);
    job.times = repeats[n - 1];
    repeat_rows(in_shape, row_stride, out_shape, n, repeat_copy_row, &job);
    return out;
}
