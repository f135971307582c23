/*
 * scan.c - products and running scans along one dim: prod, cumprod and
 * logcumsumexp, with their backward.
 *
 * float32 computes in double per row and is differentiable. The backward of
 * prod and cumprod is exact where inputs are zero: the gradient of x[i] is
 * built from the products of the other elements (a prefix and a suffix
 * product), never by dividing the output by x[i]. Integer and bool inputs give
 * int64, multiplied in int64 with wrap-around as PyTorch does, and no graph.
 *
 * Not here: cumsum (sort.c), the order statistics (order.c).
 */
#include "internal.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

typedef struct {
    int dim;
    int keepdim;
} ScanCtx;

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

/* Element i of an integer or bool tensor as int64. */
static int64_t int_elem(const AcTensor *t, int64_t i)
{
    if (t->dtype == AC_INT64) return data_i64(t)[i];
    if (t->dtype == AC_INT8) return ((const int8_t *)(const void *)t->data)[i];
    return data_u8(t)[i];
}

static int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

static int scan_check(const char *op, const AcTensor *a, int *dim)
{
    if (tensor_check_any(op, a, "input") || cpu_only(op, &a, 1)) return -1;
    *dim = dim_normalize(op, *dim, a->ndim);
    return *dim < 0 ? -1 : 0;
}

/* ---- prod ------------------------------------------------------------------ */

/* gin[i] = gout * (product of the row's other elements): prefix times suffix. */
static int prod_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const ScanCtx *ctx = node->context;
    const AcTensor *a = node->inputs[0];
    int64_t outer, n, inner, o, r, j;
    split_at(a, ctx->dim, &outer, &n, &inner);
    gin[0] = tensor_alloc_like("prod", a);
    if (!gin[0]) return ac_last_error_code();
    for (o = 0; o < outer; o++)
        for (r = 0; r < inner; r++) {
            const float *x = a->data + o * n * inner + r;
            float *g = gin[0]->data + o * n * inner + r;
            double prefix = 1.0, suffix = 1.0, go = gout->data[o * inner + r];
            for (j = 0; j < n; j++) {
                g[j * inner] = (float)prefix;
                prefix *= x[j * inner];
            }
            for (j = n - 1; j >= 0; j--) {
                g[j * inner] = (float)(go * g[j * inner] * suffix);
                suffix *= x[j * inner];
            }
        }
    return AC_OK;
}

AcTensor *ac_prod(const AcTensor *a, int dim, int keepdim)
{
    const char *op = "prod";
    int64_t shape[AC_MAX_DIMS], outer, n, inner, o, r, j;
    int ndim = 0, d;
    ScanCtx *ctx;
    AcTensor *out;
    if (scan_check(op, a, &dim)) return NULL;
    split_at(a, dim, &outer, &n, &inner);
    for (d = 0; d < a->ndim; d++)
        if (d != dim) shape[ndim++] = a->shape[d];
        else if (keepdim) shape[ndim++] = 1;
    if (a->dtype != AC_FLOAT32) {
        out = tensor_create(op, shape, ndim, AC_INT64, NULL, 0, 0);
        if (!out) return NULL;
        for (o = 0; o < outer; o++)
            for (r = 0; r < inner; r++) {
                int64_t p = 1;
                for (j = 0; j < n; j++) p = wrap_mul(p, int_elem(a, (o * n + j) * inner + r));
                data_i64(out)[o * inner + r] = p;
            }
        return out;
    }
    out = op_output(op, shape, ndim, &a, 1, prod_backward, sizeof(ScanCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) ctx->dim = dim;
    for (o = 0; o < outer; o++)
        for (r = 0; r < inner; r++) {
            double p = 1.0;
            for (j = 0; j < n; j++) p *= a->data[(o * n + j) * inner + r];
            out->data[o * inner + r] = (float)p;
        }
    return out;
}

/* ---- cumprod ---------------------------------------------------------------- */

/*
 * out[j] = x[0] ... x[j]. d out[j] / d x[i] (i <= j) is the product of x[0..j]
 * without x[i], so gin[i] = P[i] * T[i] with P[i] = x[0] ... x[i-1] and
 * T[i] = sum over j >= i of gout[j] x[i+1] ... x[j] = gout[i] + x[i+1] T[i+1].
 */
static int cumprod_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const ScanCtx *ctx = node->context;
    const AcTensor *a = node->inputs[0];
    int64_t outer, n, inner, o, r, j;
    double *t;
    split_at(a, ctx->dim, &outer, &n, &inner);
    gin[0] = tensor_alloc_like("cumprod", a);
    if (!gin[0]) return ac_last_error_code();
    t = scratch_alloc((size_t)(n + 1) * sizeof(double));
    if (!t) return ac_last_error_code();
    for (o = 0; o < outer; o++)
        for (r = 0; r < inner; r++) {
            int64_t base = o * n * inner + r;
            const float *x = a->data + base, *go = gout->data + base;
            float *g = gin[0]->data + base;
            double prefix = 1.0;
            for (j = n - 1; j >= 0; j--)
                t[j] = go[j * inner] + (j + 1 < n ? (double)x[(j + 1) * inner] * t[j + 1] : 0.0);
            for (j = 0; j < n; j++) {
                g[j * inner] = (float)(prefix * t[j]);
                prefix *= x[j * inner];
            }
        }
    scratch_free(t, (size_t)(n + 1) * sizeof(double));
    return AC_OK;
}

AcTensor *ac_cumprod(const AcTensor *a, int dim)
{
    const char *op = "cumprod";
    int64_t outer, n, inner, o, r, j;
    ScanCtx *ctx;
    AcTensor *out;
    if (scan_check(op, a, &dim)) return NULL;
    split_at(a, dim, &outer, &n, &inner);
    if (a->dtype != AC_FLOAT32) {
        out = tensor_create(op, a->shape, a->ndim, AC_INT64, NULL, 0, 0);
        if (!out) return NULL;
        for (o = 0; o < outer; o++)
            for (r = 0; r < inner; r++) {
                int64_t p = 1, at;
                for (j = 0; j < n; j++) {
                    at = (o * n + j) * inner + r;
                    p = wrap_mul(p, int_elem(a, at));
                    data_i64(out)[at] = p;
                }
            }
        return out;
    }
    out = op_output(op, a->shape, a->ndim, &a, 1, cumprod_backward, sizeof(ScanCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) ctx->dim = dim;
    for (o = 0; o < outer; o++)
        for (r = 0; r < inner; r++) {
            double p = 1.0;
            for (j = 0; j < n; j++) {
                int64_t at = (o * n + j) * inner + r;
                p *= a->data[at];
                out->data[at] = (float)p;
            }
        }
    return out;
}

/* ---- logcumsumexp ------------------------------------------------------------- */

/* log(exp(u) + exp(v)) without overflow; -inf when both are. */
static double log_add_exp(double u, double v)
{
    double hi = u > v ? u : v, lo = u > v ? v : u;
    if (isnan(u) || isnan(v)) return NAN;
    if (hi == -INFINITY) return -INFINITY;
    if (hi == INFINITY) return INFINITY;
    return hi + log1p(exp(lo - hi));
}

/*
 * gin[i] = sum over j >= i of gout[j] exp(x[i] - out[j]) = exp(x[i] - out[i]) S[i],
 * S[i] = gout[i] + exp(out[i] - out[i+1]) S[i+1]: out never decreases, so no term
 * overflows.
 */
static int logcumsumexp_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const ScanCtx *ctx = node->context;
    const AcTensor *a = node->inputs[0], *out = node->output;
    int64_t outer, n, inner, o, r, j;
    split_at(a, ctx->dim, &outer, &n, &inner);
    gin[0] = tensor_alloc_like("logcumsumexp", a);
    if (!gin[0]) return ac_last_error_code();
    for (o = 0; o < outer; o++)
        for (r = 0; r < inner; r++) {
            int64_t base = o * n * inner + r;
            const float *x = a->data + base, *y = out->data + base, *go = gout->data + base;
            float *g = gin[0]->data + base;
            double s = 0.0;
            for (j = n - 1; j >= 0; j--) {
                double yj = y[j * inner];
                if (j + 1 < n) {
                    double step = yj == y[(j + 1) * inner] ? 1.0 : exp(yj - y[(j + 1) * inner]);
                    s = go[j * inner] + step * s;
                } else {
                    s = go[j * inner];
                }
                g[j * inner] = yj == -INFINITY ? 0.0f : (float)(exp((double)x[j * inner] - yj) * s);
            }
        }
    return AC_OK;
}

AcTensor *ac_logcumsumexp(const AcTensor *a, int dim)
{
    const char *op = "logcumsumexp";
    int64_t outer, n, inner, o, r, j;
    ScanCtx *ctx;
    AcTensor *out;
    if (tensor_check(op, a, "input") || scan_check(op, a, &dim)) return NULL;
    split_at(a, dim, &outer, &n, &inner);
    out = op_output(op, a->shape, a->ndim, &a, 1, logcumsumexp_backward, sizeof(ScanCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) ctx->dim = dim;
    for (o = 0; o < outer; o++)
        for (r = 0; r < inner; r++) {
            double acc = -INFINITY;
            for (j = 0; j < n; j++) {
                int64_t at = (o * n + j) * inner + r;
                acc = log_add_exp(acc, a->data[at]);
                out->data[at] = (float)acc;
            }
        }
    return out;
}
