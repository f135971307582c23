/*
 * sort.c - ops that order along one dim: sort and topk (int64 indices, and the
 * values picked with ac_gather, whose backward scatters the gradient back), and
 * cumsum with its backward (a cumulative sum from the other end). Integer and
 * bool tensors order by their exact values, and their cumsum is int64.
 *
 * Sorting is a stable merge sort per row: ties keep their input order, as
 * PyTorch's stable sort on CPU, and NaN orders above every number.
 *
 * Not here: gather (index.c), max/min along a dim (reduce.c).
 */
#include "internal.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

/* Whether u goes strictly before v. */
static int goes_before(float u, float v, int descending)
{
    if (descending) return u > v || (isnan(u) && !isnan(v));
    return u < v || (!isnan(u) && isnan(v));
}

/* Stable merge sort of pos[0..n) by vals[pos[i]], bottom up, through tmp. */
static void merge_sort(const float *vals, int64_t *pos, int64_t *tmp, int64_t n, int descending)
{
    int64_t width, lo, *src = pos, *dst = tmp, *swap;
    for (width = 1; width < n; width *= 2) {
        for (lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = goes_before(vals[src[j]], vals[src[i]], descending) ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        swap = src;
        src = dst;
        dst = swap;
    }
    if (src != pos) memcpy(pos, src, (size_t)n * sizeof(int64_t));
}

/* The same for integer keys (int64, uint8, int8 and bool rows, read exactly). */
static void merge_sort_int(const int64_t *vals, int64_t *pos, int64_t *tmp, int64_t n, int descending)
{
    int64_t width, lo, *src = pos, *dst = tmp, *swap;
    for (width = 1; width < n; width *= 2) {
        for (lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                const int64_t u = vals[src[j]], v = vals[src[i]];
                dst[k++] = (descending ? u > v : u < v) ? src[j++] : src[i++];
            }
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        swap = src;
        src = dst;
        dst = swap;
    }
    if (src != pos) memcpy(pos, src, (size_t)n * sizeof(int64_t));
}

/* Element i of t, an integer or bool tensor, exactly. */
static int64_t int_elem(const AcTensor *t, int64_t i)
{
    switch (t->dtype) {
    case AC_INT64: return data_i64(t)[i];
    case AC_INT8: return (int8_t)data_u8(t)[i];
    default: return data_u8(t)[i];
    }
}

/* An error unless a is a tensor of a dtype these ops order (float32, int64,
   uint8, int8, bool), on the CPU. */
static int order_check(const char *op, const AcTensor *a)
{
    if (tensor_check_any(op, a, "input")) return ac_last_error_code();
    if (a->dtype != AC_FLOAT32 && a->dtype != AC_INT64 && a->dtype != AC_UINT8 && a->dtype != AC_INT8 &&
        a->dtype != AC_BOOL)
        return error_set(AC_ERR_DTYPE, "%s: a %s tensor is not supported", op, ac_dtype_name(a->dtype));
    return cpu_only(op, &a, 1) ? ac_last_error_code() : AC_OK;
}

/* Sizes of the dims before and after dim (a 0-d tensor is one row of one). */
static void split_at(const AcTensor *a, int dim, int64_t *outer, int64_t *n, int64_t *inner)
{
    int d;
    *outer = *inner = 1;
    *n = a->ndim > 0 ? a->shape[dim] : 1;
    for (d = 0; d < a->ndim; d++) {
        if (d < dim) *outer *= a->shape[d];
        if (d > dim) *inner *= a->shape[d];
    }
}

/* The first k sorted positions along dim of every row, as an int64 tensor. */
static AcTensor *sorted_indices(const char *op, const AcTensor *a, int dim, int64_t k, int descending)
{
    int64_t shape[AC_MAX_DIMS], outer, n, inner, o, r, j;
    size_t bytes;
    AcTensor *indices;
    float *vals;
    int64_t *pos, *tmp;
    split_at(a, dim, &outer, &n, &inner);
    memcpy(shape, a->shape, sizeof shape);
    if (a->ndim > 0) shape[dim] = k;
    indices = tensor_create(op, shape, a->ndim, AC_INT64, NULL, 0, 0);
    if (!indices) return NULL;
    bytes = (size_t)(n + 1) * (3 * sizeof(int64_t));
    pos = scratch_alloc(bytes);
    if (!pos) {
        ac_tensor_free(indices);
        return NULL;
    }
    tmp = pos + n + 1;
    vals = (float *)(void *)(tmp + n + 1);
    for (o = 0; o < outer; o++)
        for (r = 0; r < inner; r++) {
            const int64_t first = o * n * inner + r;
            int64_t *out = data_i64(indices) + o * k * inner + r;
            if (a->dtype == AC_FLOAT32) {
                for (j = 0; j < n; j++) {
                    vals[j] = a->data[first + j * inner];
                    pos[j] = j;
                }
                merge_sort(vals, pos, tmp, n, descending);
            } else {
                int64_t *keys = (int64_t *)(void *)vals;
                for (j = 0; j < n; j++) {
                    keys[j] = int_elem(a, first + j * inner);
                    pos[j] = j;
                }
                merge_sort_int(keys, pos, tmp, n, descending);
            }
            for (j = 0; j < k; j++) out[j * inner] = pos[j];
        }
    scratch_free(pos, bytes);
    return indices;
}

/* values = gather(a, dim, indices): differentiable in a. */
static AcTensor *ordered(const char *op, const AcTensor *a, int dim, int64_t k, int descending,
                         AcTensor **indices)
{
    AcTensor *idx, *values;
    if (!indices) return error_null(AC_ERR_ARG, "%s: indices is NULL", op);
    idx = sorted_indices(op, a, dim, k, descending);
    if (!idx) return NULL;
    values = ac_gather(a, a->ndim > 0 ? dim : 0, idx);
    if (!values) {
        ac_tensor_free(idx);
        return NULL;
    }
    *indices = idx;
    return values;
}

AcTensor *ac_sort(const AcTensor *a, int dim, int descending, AcTensor **indices)
{
    int64_t outer, n, inner;
    if (order_check("sort", a)) return NULL;
    dim = dim_normalize("sort", dim, a->ndim);
    if (dim < 0) return NULL;
    split_at(a, dim, &outer, &n, &inner);
    return ordered("sort", a, dim, n, descending, indices);
}

AcTensor *ac_topk(const AcTensor *a, int64_t k, int dim, int largest, AcTensor **indices)
{
    int64_t outer, n, inner;
    if (order_check("topk", a)) return NULL;
    dim = dim_normalize("topk", dim, a->ndim);
    if (dim < 0) return NULL;
    split_at(a, dim, &outer, &n, &inner);
    if (k < 0 || k > n)
        return error_null(AC_ERR_ARG, "topk: k %lld is out of range for dim %d of %s", (long long)k,
                          dim, tensor_shape_str(a));
    return ordered("topk", a, dim, k, largest, indices);
}

/* ---- cumsum ---------------------------------------------------------------- */

typedef struct {
    int dim;
} CumsumCtx;

/* out[.., j, ..] = sum of x[.., i, ..] for i <= j (reverse: for i >= j), in double. */
static void cumulative_sum(const AcTensor *x, int dim, int reverse, float *out)
{
    int64_t outer, n, inner, o, r, j;
    split_at(x, dim, &outer, &n, &inner);
    for (o = 0; o < outer; o++)
        for (r = 0; r < inner; r++) {
            int64_t base = o * n * inner + r;
            double sum = 0.0;
            for (j = 0; j < n; j++) {
                int64_t at = base + (reverse ? n - 1 - j : j) * inner;
                sum += x->data[at];
                out[at] = (float)sum;
            }
        }
}

static int cumsum_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const CumsumCtx *ctx = node->context;
    gin[0] = tensor_alloc_like("cumsum", gout);
    if (!gin[0]) return ac_last_error_code();
    cumulative_sum(gout, ctx->dim, 1, gin[0]->data);
    return AC_OK;
}

/* The cumulative sum of an integer or bool a along dim, as int64 (as torch),
   exact and wrapping on overflow; no graph. */
static AcTensor *integer_cumsum(const AcTensor *a, int dim)
{
    int64_t outer, n, inner, o, r, j;
    AcTensor *out = op_output_as("cumsum", AC_INT64, a->shape, a->ndim, &a, 1, NULL, 0);
    if (!out) return NULL;
    split_at(a, dim, &outer, &n, &inner);
    for (o = 0; o < outer; o++)
        for (r = 0; r < inner; r++) {
            const int64_t base = o * n * inner + r;
            uint64_t sum = 0;
            for (j = 0; j < n; j++) {
                sum += (uint64_t)int_elem(a, base + j * inner);
                data_i64(out)[base + j * inner] = (int64_t)sum;
            }
        }
    return out;
}

AcTensor *ac_cumsum(const AcTensor *a, int dim)
{
    CumsumCtx *ctx;
    AcTensor *out;
    if (order_check("cumsum", a)) return NULL;
    dim = dim_normalize("cumsum", dim, a->ndim);
    if (dim < 0) return NULL;
    if (a->dtype != AC_FLOAT32) return integer_cumsum(a, dim);
    out = op_output("cumsum", a->shape, a->ndim, &a, 1, cumsum_backward, sizeof(CumsumCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) ctx->dim = dim;
    cumulative_sum(a, dim, 0, out->data);
    return out;
}
