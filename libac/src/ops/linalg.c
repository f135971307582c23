/*
 * linalg.c - determinants and inverses of square float32 matrices (batches
 * (..., n, n)) by LU factorisation with partial pivoting, in double, and their
 * backward.
 *
 * Meant for the small matrices models carry (a few dozen rows): one matrix at
 * a time, O(n^3) plain loops, no blocking. det's gradient is det * A^-T, and 0
 * where the LU finds A exactly singular, as PyTorch's is (the adjugate would be
 * the derivative there); inv's is -A^-T G A^-T.
 *
 * Not here: products (matmul.c), norms (Python, aicraft/linalg.py).
 */
#include "internal.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

/* LU of the n x n row-major m in place (L unit lower, U upper), the row
   permutation in perm; returns the determinant (0 for a singular m). */
static double lu_factor(double *m, int64_t *perm, int64_t n)
{
    double det = 1.0;
    int64_t i, j, k;
    for (i = 0; i < n; i++) perm[i] = i;
    for (k = 0; k < n; k++) {
        int64_t p = k;
        double best = fabs(m[k * n + k]);
        for (i = k + 1; i < n; i++)
            if (fabs(m[i * n + k]) > best) {
                best = fabs(m[i * n + k]);
                p = i;
            }
        if (best == 0.0) return 0.0;
        if (p != k) {
            int64_t t = perm[k];
            perm[k] = perm[p];
            perm[p] = t;
            for (j = 0; j < n; j++) {
                double u = m[k * n + j];
                m[k * n + j] = m[p * n + j];
                m[p * n + j] = u;
            }
            det = -det;
        }
        det *= m[k * n + k];
        for (i = k + 1; i < n; i++) {
            double f = m[i * n + k] /= m[k * n + k];
            for (j = k + 1; j < n; j++) m[i * n + j] -= f * m[k * n + j];
        }
    }
    return det;
}

/* inv := the inverse of the matrix lu_factor left in m and perm (nonsingular). */
static void lu_inverse(const double *m, const int64_t *perm, int64_t n, double *inv)
{
    int64_t i, j, c;
    for (c = 0; c < n; c++) {          /* column c: solve L U x = P e_c */
        double *x = inv + c * n;       /* written as row c, transposed below */
        for (i = 0; i < n; i++) {
            double s = perm[i] == c ? 1.0 : 0.0;
            for (j = 0; j < i; j++) s -= m[i * n + j] * x[j];
            x[i] = s;
        }
        for (i = n - 1; i >= 0; i--) {
            double s = x[i];
            for (j = i + 1; j < n; j++) s -= m[i * n + j] * x[j];
            x[i] = s / m[i * n + i];
        }
    }
    for (i = 0; i < n; i++)            /* rows were columns */
        for (j = i + 1; j < n; j++) {
            double u = inv[i * n + j];
            inv[i * n + j] = inv[j * n + i];
            inv[j * n + i] = u;
        }
}

static int square_check(const char *op, const AcTensor *a, int64_t *n, int64_t *batches)
{
    if (tensor_check(op, a, "input") || cpu_only(op, &a, 1)) return -1;
    if (a->ndim < 2 || a->shape[a->ndim - 1] != a->shape[a->ndim - 2])
        return error_set(AC_ERR_SHAPE, "%s: A must be a batch of square matrices (..., n, n), got %s", op,
                         tensor_shape_str(a));
    *n = a->shape[a->ndim - 1];
    *batches = *n > 0 ? a->size / (*n * *n) : 1;
    if (*n == 0) {
        int d;
        *batches = 1;
        for (d = 0; d < a->ndim - 2; d++) *batches *= a->shape[d];
    }
    return 0;
}

/* ---- det ------------------------------------------------------------------------ */

static int det_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *a = node->inputs[0];
    int64_t n = a->shape[a->ndim - 1], b, batches = n > 0 ? a->size / (n * n) : 0, i;
    size_t bytes = (size_t)(2 * n * n + 1) * sizeof(double) + (size_t)(n + 1) * sizeof(int64_t);
    double *m, *inv;
    int64_t *perm;
    gin[0] = tensor_alloc_like("det", a);
    if (!gin[0]) return ac_last_error_code();
    m = scratch_alloc(bytes);
    if (!m) return ac_last_error_code();
    inv = m + n * n;
    perm = (int64_t *)(void *)(inv + n * n + 1);
    for (b = 0; b < batches; b++) {
        const float *x = a->data + b * n * n;
        float *g = gin[0]->data + b * n * n;
        double det, go = gout->data[b];
        for (i = 0; i < n * n; i++) m[i] = x[i];
        det = lu_factor(m, perm, n);
        if (det != 0.0 && isfinite(det)) {
            int64_t r, c;
            lu_inverse(m, perm, n, inv);
            for (r = 0; r < n; r++)                 /* d det / dA = det * A^-T */
                for (c = 0; c < n; c++) g[r * n + c] = (float)(go * det * inv[c * n + r]);
        } else {      /* exactly singular: 0, as PyTorch gives (not the adjugate) */
            for (i = 0; i < n * n; i++) g[i] = 0.0f;
        }
    }
    scratch_free(m, bytes);
    return AC_OK;
}

AcTensor *ac_det(const AcTensor *a)
{
    const char *op = "det";
    int64_t n, batches, b, i, *perm;
    size_t bytes;
    double *m;
    AcTensor *out;
    if (square_check(op, a, &n, &batches)) return NULL;
    out = op_output(op, a->shape, a->ndim - 2, &a, 1, det_backward, 0);
    if (!out) return NULL;
    bytes = (size_t)(n * n + 1) * sizeof(double) + (size_t)(n + 1) * sizeof(int64_t);
    m = scratch_alloc(bytes);
    if (!m) {
        ac_tensor_free(out);
        return NULL;
    }
    perm = (int64_t *)(void *)(m + n * n + 1);
    for (b = 0; b < batches; b++) {
        for (i = 0; i < n * n; i++) m[i] = a->data[b * n * n + i];
        out->data[b] = (float)lu_factor(m, perm, n);
    }
    scratch_free(m, bytes);
    return out;
}

/* ---- inv ------------------------------------------------------------------------ */

/* gin = -Y^T G Y^T per matrix, Y = the output (A^-1). */
static int inv_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *y = node->output;
    int64_t n = y->shape[y->ndim - 1], b, batches = n > 0 ? y->size / (n * n) : 0, r, c, k;
    double *t;
    gin[0] = tensor_alloc_like("inv", y);
    if (!gin[0]) return ac_last_error_code();
    t = scratch_alloc((size_t)(n * n + 1) * sizeof(double));
    if (!t) return ac_last_error_code();
    for (b = 0; b < batches; b++) {
        const float *yb = y->data + b * n * n, *g = gout->data + b * n * n;
        float *out = gin[0]->data + b * n * n;
        for (r = 0; r < n; r++)             /* t = Y^T G */
            for (c = 0; c < n; c++) {
                double s = 0.0;
                for (k = 0; k < n; k++) s += (double)yb[k * n + r] * g[k * n + c];
                t[r * n + c] = s;
            }
        for (r = 0; r < n; r++)             /* out = -t Y^T */
            for (c = 0; c < n; c++) {
                double s = 0.0;
                for (k = 0; k < n; k++) s += t[r * n + k] * yb[c * n + k];
                out[r * n + c] = (float)-s;
            }
    }
    scratch_free(t, (size_t)(n * n + 1) * sizeof(double));
    return AC_OK;
}

AcTensor *ac_inv(const AcTensor *a)
{
    const char *op = "inv";
    int64_t n, batches, b, i, *perm;
    size_t bytes;
    double *m, *inv;
    AcTensor *out;
    if (square_check(op, a, &n, &batches)) return NULL;
    bytes = (size_t)(2 * n * n + 1) * sizeof(double) + (size_t)(n + 1) * sizeof(int64_t);
    m = scratch_alloc(bytes);
    if (!m) return NULL;
    inv = m + n * n;
    perm = (int64_t *)(void *)(inv + n * n + 1);
    out = op_output(op, a->shape, a->ndim, &a, 1, inv_backward, 0);
    for (b = 0; out && b < batches; b++) {
        for (i = 0; i < n * n; i++) m[i] = a->data[b * n * n + i];
        if (lu_factor(m, perm, n) == 0.0) {
            ac_tensor_free(out);
            out = NULL;
            error_set(AC_ERR_ARG, "%s: the matrix %lld of %s is singular (it has no inverse)", op,
                      (long long)b, tensor_shape_str(a));
            break;
        }
        lu_inverse(m, perm, n, inv);
        for (i = 0; i < n * n; i++) out->data[b * n * n + i] = (float)inv[i];
    }
    scratch_free(m, bytes);
    return out;
}

/* ---- singular values: matrix norms 2, -2 and nuclear ------------------------------- */

/* One-sided Jacobi SVD of the rows x cols row-major a (rows >= cols), in double: on
   return w's columns are U scaled by the singular values s (cols of them, unsorted)
   and v (cols x cols) holds V. */
static void jacobi_svd(const float *a, int64_t rows, int64_t cols, int transposed, double *w, double *v,
                       double *s)
{
    int64_t i, j, k, sweep;
    for (i = 0; i < rows; i++)
        for (j = 0; j < cols; j++) w[i * cols + j] = transposed ? a[j * rows + i] : a[i * cols + j];
    for (i = 0; i < cols * cols; i++) v[i] = 0.0;
    for (i = 0; i < cols; i++) v[i * cols + i] = 1.0;
    for (sweep = 0; sweep < 60; sweep++) {
        double off = 0.0;
        for (j = 0; j < cols; j++)
            for (k = j + 1; k < cols; k++) {
                double alpha = 0.0, beta = 0.0, gamma = 0.0, zeta, t, c, sn;
                for (i = 0; i < rows; i++) {
                    double x = w[i * cols + j], y = w[i * cols + k];
                    alpha += x * x;
                    beta += y * y;
                    gamma += x * y;
                }
                if (gamma == 0.0 || fabs(gamma) <= 1e-15 * sqrt(alpha * beta)) continue;
                off = fmax(off, fabs(gamma) / sqrt(alpha * beta));
                zeta = (beta - alpha) / (2.0 * gamma);
                t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1.0 + zeta * zeta));
                c = 1.0 / sqrt(1.0 + t * t);
                sn = c * t;
                for (i = 0; i < rows; i++) {
                    double x = w[i * cols + j], y = w[i * cols + k];
                    w[i * cols + j] = c * x - sn * y;
                    w[i * cols + k] = sn * x + c * y;
                }
                for (i = 0; i < cols; i++) {
                    double x = v[i * cols + j], y = v[i * cols + k];
                    v[i * cols + j] = c * x - sn * y;
                    v[i * cols + k] = sn * x + c * y;
                }
            }
        if (off <= 1e-15) break;
    }
    for (j = 0; j < cols; j++) {
        double norm = 0.0;
        for (i = 0; i < rows; i++) norm += w[i * cols + j] * w[i * cols + j];
        s[j] = sqrt(norm);
    }
}

typedef struct {
    int kind;     /* 0: nuclear, 1: largest (ord 2), 2: smallest (ord -2) */
} SvdNormCtx;

/* The norm of one matrix, and when g is not NULL its gradient times go into g
   (rows x cols of the input's layout): U_r V_r^T for the nuclear norm (over the
   nonzero singular values), u v^T of the singular value picked for 2 and -2. */
static double svd_norm(const float *a, int64_t m, int64_t n, int kind, double *scratch, float *g, double go)
{
    int transposed = m < n;
    int64_t rows = transposed ? n : m, cols = transposed ? m : n, i, j, k, pick = 0;
    double *w = scratch, *v = w + rows * cols, *s = v + cols * cols, value = 0.0;
    jacobi_svd(a, rows, cols, transposed, w, v, s);
    for (j = 0; j < cols; j++) {
        if (kind == 0) value += s[j];
        else if ((kind == 1 && s[j] > s[pick]) || (kind == 2 && s[j] < s[pick])) pick = j;
    }
    if (kind != 0) value = cols > 0 ? s[pick] : 0.0;
    if (!g) return value;
    for (i = 0; i < rows; i++)
        for (k = 0; k < cols; k++) {
            double sum = 0.0;    /* sum over the chosen j of u[i][j] v[k][j] */
            for (j = 0; j < cols; j++) {
                if (s[j] == 0.0 || (kind != 0 && j != pick)) continue;
                sum += w[i * cols + j] / s[j] * v[k * cols + j];
            }
            if (transposed) g[k * rows + i] = (float)(go * sum);
            else g[i * cols + k] = (float)(go * sum);
        }
    return value;
}

static int svd_norm_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const SvdNormCtx *ctx = node->context;
    const AcTensor *a = node->inputs[0];
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], b, batches = m * n > 0 ? a->size / (m * n) : 0;
    int64_t big = m > n ? m : n, small = m > n ? n : m;
    size_t bytes = (size_t)(big * small + small * small + small + 1) * sizeof(double);
    double *scratch;
    gin[0] = tensor_alloc_like("matrix_norm", a);
    if (!gin[0]) return ac_last_error_code();
    if (a->size == 0) return AC_OK;
    scratch = scratch_alloc(bytes);
    if (!scratch) return ac_last_error_code();
    for (b = 0; b < batches; b++)
        svd_norm(a->data + b * m * n, m, n, ctx->kind, scratch, gin[0]->data + b * m * n, gout->data[b]);
    scratch_free(scratch, bytes);
    return AC_OK;
}

AcTensor *ac_svd_norm(const AcTensor *a, int kind)
{
    const char *op = "matrix_norm";
    int64_t m, n, b, batches, big, small;
    size_t bytes;
    double *scratch;
    SvdNormCtx *ctx;
    AcTensor *out;
    if (tensor_check(op, a, "input") || cpu_only(op, &a, 1)) return NULL;
    if (kind < 0 || kind > 2) return error_null(AC_ERR_ARG, "%s: kind %d is not 0, 1 or 2", op, kind);
    if (a->ndim < 2) return error_null(AC_ERR_SHAPE, "%s: input %s must have 2 dims or more", op, tensor_shape_str(a));
    m = a->shape[a->ndim - 2];
    n = a->shape[a->ndim - 1];
    if (kind != 0 && m * n == 0)
        return error_null(AC_ERR_SHAPE, "%s: the 2-norms of empty matrices %s are not defined", op,
                          tensor_shape_str(a));
    out = op_output(op, a->shape, a->ndim - 2, &a, 1, svd_norm_backward, sizeof(SvdNormCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) ctx->kind = kind;
    if (m * n == 0) {
        for (b = 0; b < out->size; b++) out->data[b] = 0.0f;
        return out;
    }
    batches = a->size / (m * n);
    big = m > n ? m : n;
    small = m > n ? n : m;
    bytes = (size_t)(big * small + small * small + small + 1) * sizeof(double);
    scratch = scratch_alloc(bytes);
    if (!scratch) {
        ac_tensor_free(out);
        return NULL;
    }
    for (b = 0; b < batches; b++) out->data[b] = (float)svd_norm(a->data + b * m * n, m, n, kind, scratch, NULL, 0.0);
    scratch_free(scratch, bytes);
    return out;
}

/* ---- singular values ---------------------------------------------------------------- */

/* The k = min(m, n) singular values of one matrix, largest first, into s_out; with
   g != NULL, U diag(gs) V^T into g (the gradient for the gradient gs of the values). */
static void singular_values(const float *a, int64_t m, int64_t n, double *scratch, float *s_out,
                            const float *gs, float *g)
{
    int transposed = m < n;
    int64_t rows = transposed ? n : m, cols = transposed ? m : n, i, j, k;
    double *w = scratch, *v = w + rows * cols, *s = v + cols * cols;
    int64_t *order = (int64_t *)(void *)(s + cols + 1);
    jacobi_svd(a, rows, cols, transposed, w, v, s);
    for (j = 0; j < cols; j++) {           /* order: positions by value, largest first */
        int64_t at = j;
        while (at > 0 && s[order[at - 1]] < s[j]) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = j;
    }
    if (s_out)
        for (j = 0; j < cols; j++) s_out[j] = (float)s[order[j]];
    if (!g) return;
    for (i = 0; i < rows; i++)
        for (k = 0; k < cols; k++) {
            double sum = 0.0;
            for (j = 0; j < cols; j++) {
                int64_t c = order[j];
                if (s[c] > 0.0) sum += gs[j] * (w[i * cols + c] / s[c]) * v[k * cols + c];
            }
            if (transposed) g[k * rows + i] = (float)sum;
            else g[i * cols + k] = (float)sum;
        }
}

static size_t svdvals_scratch(int64_t m, int64_t n)
{
    int64_t big = m > n ? m : n, small = m > n ? n : m;
    return (size_t)(big * small + small * small + small + 1) * sizeof(double) + (size_t)(small + 1) * sizeof(int64_t);
}

static int svdvals_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *a = node->inputs[0];
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = m < n ? m : n, b;
    int64_t batches = m * n > 0 ? a->size / (m * n) : 0;
    size_t bytes = svdvals_scratch(m, n);
    double *scratch;
    gin[0] = tensor_alloc_like("svdvals", a);
    if (!gin[0]) return ac_last_error_code();
    if (a->size == 0) return AC_OK;
    scratch = scratch_alloc(bytes);
    if (!scratch) return ac_last_error_code();
    for (b = 0; b < batches; b++)
        singular_values(a->data + b * m * n, m, n, scratch, NULL, gout->data + b * k, gin[0]->data + b * m * n);
    scratch_free(scratch, bytes);
    return AC_OK;
}

AcTensor *ac_svdvals(const AcTensor *a)
{
    const char *op = "svdvals";
    int64_t shape[AC_MAX_DIMS], m, n, k, b, batches;
    size_t bytes;
    double *scratch;
    AcTensor *out;
    if (tensor_check(op, a, "input") || cpu_only(op, &a, 1)) return NULL;
    if (a->ndim < 2) return error_null(AC_ERR_SHAPE, "%s: input %s must have 2 dims or more", op, tensor_shape_str(a));
    m = a->shape[a->ndim - 2];
    n = a->shape[a->ndim - 1];
    k = m < n ? m : n;
    memcpy(shape, a->shape, sizeof shape);
    shape[a->ndim - 2] = k;
    out = op_output(op, shape, a->ndim - 1, &a, 1, svdvals_backward, 0);
    if (!out || k == 0) return out;
    batches = a->size / (m * n);
    bytes = svdvals_scratch(m, n);
    scratch = scratch_alloc(bytes);
    if (!scratch) {
        ac_tensor_free(out);
        return NULL;
    }
    for (b = 0; b < batches; b++) singular_values(a->data + b * m * n, m, n, scratch, out->data + b * k, NULL, NULL);
    scratch_free(scratch, bytes);
    return out;
}

/* ---- Cholesky ------------------------------------------------------------------------ */

/*
 * A = L L^T. Backward (Murray 2016, as PyTorch's): P = tril(L^T G) with its strict
 * lower part mirrored and halved, P = (P + tril(P, -1)^T) / 2, then
 * gA = L^-T P L^-1 by two triangular solves.
 */
static int cholesky_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *l = node->output;
    int64_t n = l->shape[l->ndim - 1], b, batches = n > 0 ? l->size / (n * n) : 0, i, j, k;
    double *p;
    gin[0] = tensor_alloc_like("cholesky", l);
    if (!gin[0]) return ac_last_error_code();
    p = scratch_alloc((size_t)(n * n + 1) * sizeof(double));
    if (!p) return ac_last_error_code();
    for (b = 0; b < batches; b++) {
        const float *lb = l->data + b * n * n, *g = gout->data + b * n * n;
        float *out = gin[0]->data + b * n * n;
        for (i = 0; i < n; i++)                  /* P = tril(L^T G) */
            for (j = 0; j < n; j++) {
                double s = 0.0;
                if (j <= i)
                    for (k = i; k < n; k++) s += (double)lb[k * n + i] * g[k * n + j];
                p[i * n + j] = s;
            }
        for (i = 0; i < n; i++) {                /* symmetric, halved */
            p[i * n + i] *= 0.5;
            for (j = 0; j < i; j++) {
                p[i * n + j] *= 0.5;
                p[j * n + i] = p[i * n + j];
            }
        }
        for (j = 0; j < n; j++)                  /* P := L^-T P: L^T is upper, back-substitute */
            for (i = n - 1; i >= 0; i--) {
                double s = p[i * n + j];
                for (k = i + 1; k < n; k++) s -= (double)lb[k * n + i] * p[k * n + j];
                p[i * n + j] = s / lb[i * n + i];
            }
        for (i = 0; i < n; i++)                  /* P := P L^-1: row by row, y L = x */
            for (j = n - 1; j >= 0; j--) {
                double s = p[i * n + j];
                for (k = j + 1; k < n; k++) s -= p[i * n + k] * lb[k * n + j];
                p[i * n + j] = s / lb[j * n + j];
            }
        for (i = 0; i < n * n; i++) out[i] = (float)p[i];
    }
    scratch_free(p, (size_t)(n * n + 1) * sizeof(double));
    return AC_OK;
}

AcTensor *ac_cholesky(const AcTensor *a)
{
    const char *op = "cholesky";
    int64_t n, batches, b, i, j, k;
    double *m;
    AcTensor *out;
    if (square_check(op, a, &n, &batches)) return NULL;
    m = scratch_alloc((size_t)(n * n + 1) * sizeof(double));
    if (!m) return NULL;
    out = op_output(op, a->shape, a->ndim, &a, 1, cholesky_backward, 0);
    for (b = 0; out && b < batches; b++) {
        const float *x = a->data + b * n * n;
        for (i = 0; i < n * n; i++) m[i] = 0.0;
        for (j = 0; j < n && out; j++) {         /* the lower triangle of A only, as PyTorch */
            double d = x[j * n + j];
            for (k = 0; k < j; k++) d -= m[j * n + k] * m[j * n + k];
            if (!(d > 0.0)) {
                ac_tensor_free(out);
                out = NULL;
                error_set(AC_ERR_ARG, "%s: the matrix %lld of %s is not positive-definite (leading minor "
                          "of order %lld)", op, (long long)b, tensor_shape_str(a), (long long)(j + 1));
                break;
            }
            m[j * n + j] = sqrt(d);
            for (i = j + 1; i < n; i++) {
                double s = x[i * n + j];
                for (k = 0; k < j; k++) s -= m[i * n + k] * m[j * n + k];
                m[i * n + j] = s / m[j * n + j];
            }
        }
        for (i = 0; out && i < n * n; i++) out->data[b * n * n + i] = (float)m[i];
    }
    scratch_free(m, (size_t)(n * n + 1) * sizeof(double));
    return out;
}

/* ---- eigenvalues of symmetric matrices ------------------------------------------------ */

/* Cyclic Jacobi on the symmetric n x n m (destroyed): the eigenvalues, ascending, into w
   and their eigenvectors as the columns of v (n x n), in double. */
static void symmetric_eigen(double *m, int64_t n, double *w, double *v, int64_t *order)
{
    int64_t p, q, k, sweep, i;
    for (i = 0; i < n * n; i++) v[i] = 0.0;
    for (i = 0; i < n; i++) v[i * n + i] = 1.0;
    for (sweep = 0; sweep < 100; sweep++) {
        double off = 0.0, scale = 0.0;
        for (p = 0; p < n; p++)
            for (q = 0; q < n; q++) {
                if (p != q) off += m[p * n + q] * m[p * n + q];
                scale += m[p * n + q] * m[p * n + q];
            }
        if (off <= 1e-30 * scale || off == 0.0) break;
        for (p = 0; p < n; p++)
            for (q = p + 1; q < n; q++) {
                double apq = m[p * n + q], theta, t, c, s;
                if (apq == 0.0) continue;
                theta = (m[q * n + q] - m[p * n + p]) / (2.0 * apq);
                t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
                c = 1.0 / sqrt(t * t + 1.0);
                s = t * c;
                for (k = 0; k < n; k++) {          /* columns p, q of m */
                    double x = m[k * n + p], y = m[k * n + q];
                    m[k * n + p] = c * x - s * y;
                    m[k * n + q] = s * x + c * y;
                }
                for (k = 0; k < n; k++) {          /* rows p, q of m */
                    double x = m[p * n + k], y = m[q * n + k];
                    m[p * n + k] = c * x - s * y;
                    m[q * n + k] = s * x + c * y;
                }
                for (k = 0; k < n; k++) {
                    double x = v[k * n + p], y = v[k * n + q];
                    v[k * n + p] = c * x - s * y;
                    v[k * n + q] = s * x + c * y;
                }
            }
    }
    for (p = 0; p < n; p++) {                       /* ascending, by insertion */
        int64_t at = p;
        while (at > 0 && m[order[at - 1] * n + order[at - 1]] > m[p * n + p]) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = p;
    }
    for (p = 0; p < n; p++) w[p] = m[order[p] * n + order[p]];
}

static size_t eigen_scratch(int64_t n)
{
    return (size_t)(2 * n * n + n + 1) * sizeof(double) + (size_t)(n + 1) * sizeof(int64_t);
}

/* One matrix: its lower triangle mirrored into m, the eigen decomposition, and the
   eigenvalues (w_out) or the gradient V diag(g) V^T (g). */
static void eigvalsh_one(const float *a, int64_t n, double *scratch, float *w_out, const float *gw, float *g)
{
    double *m = scratch, *v = m + n * n, *w = v + n * n;
    int64_t *order = (int64_t *)(void *)(w + n + 1), i, j, k;
    for (i = 0; i < n; i++)
        for (j = 0; j <= i; j++) m[i * n + j] = m[j * n + i] = a[i * n + j];
    symmetric_eigen(m, n, w, v, order);
    if (w_out)
        for (i = 0; i < n; i++) w_out[i] = (float)w[i];
    if (!g) return;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++) {
            double s = 0.0;
            for (k = 0; k < n; k++) s += v[i * n + order[k]] * gw[k] * v[j * n + order[k]];
            g[i * n + j] = (float)s;
        }
}

static int eigvalsh_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *a = node->inputs[0];
    int64_t n = a->shape[a->ndim - 1], b, batches = n > 0 ? a->size / (n * n) : 0;
    double *scratch;
    gin[0] = tensor_alloc_like("eigvalsh", a);
    if (!gin[0]) return ac_last_error_code();
    scratch = scratch_alloc(eigen_scratch(n));
    if (!scratch) return ac_last_error_code();
    for (b = 0; b < batches; b++)
        eigvalsh_one(a->data + b * n * n, n, scratch, NULL, gout->data + b * n, gin[0]->data + b * n * n);
    scratch_free(scratch, eigen_scratch(n));
    return AC_OK;
}

AcTensor *ac_eigvalsh(const AcTensor *a)
{
    const char *op = "eigvalsh";
    int64_t n, batches, b;
    double *scratch;
    AcTensor *out;
    if (square_check(op, a, &n, &batches)) return NULL;
    out = op_output(op, a->shape, a->ndim - 1, &a, 1, eigvalsh_backward, 0);
    if (!out || n == 0) return out;
    scratch = scratch_alloc(eigen_scratch(n));
    if (!scratch) {
        ac_tensor_free(out);
        return NULL;
    }
    for (b = 0; b < batches; b++) eigvalsh_one(a->data + b * n * n, n, scratch, out->data + b * n, NULL, NULL);
    scratch_free(scratch, eigen_scratch(n));
    return out;
}

/* ---- matrix exponential ---------------------------------------------------------------- */

/* e := exp(m) of the n x n m, in double: scaled to a 1-norm <= 1/2, a degree-18 Taylor
   polynomial by Horner, squared back. t1 and t2 are n x n scratch. */
static void expm_double(const double *m, int64_t n, double *e, double *t1, double *t2)
{
    double norm = 0.0, scale;
    int64_t i, j, k, squarings = 0, term;
    for (j = 0; j < n; j++) {
        double col = 0.0;
        for (i = 0; i < n; i++) col += fabs(m[i * n + j]);
        if (col > norm) norm = col;
    }
    while (norm > 0.5 && squarings < 1000) {
        norm *= 0.5;
        squarings++;
    }
    scale = ldexp(1.0, (int)-squarings);
    for (i = 0; i < n * n; i++) e[i] = 0.0;
    for (i = 0; i < n; i++) e[i * n + i] = 1.0;
    for (term = 18; term >= 1; term--) {          /* e = I + (m scale / term) e */
        for (i = 0; i < n; i++)
            for (j = 0; j < n; j++) {
                double s = 0.0;
                for (k = 0; k < n; k++) s += m[i * n + k] * e[k * n + j];
                t1[i * n + j] = s * scale / (double)term + (i == j ? 1.0 : 0.0);
            }
        memcpy(e, t1, (size_t)(n * n) * sizeof(double));
    }
    for (; squarings > 0; squarings--) {
        for (i = 0; i < n; i++)
            for (j = 0; j < n; j++) {
                double s = 0.0;
                for (k = 0; k < n; k++) s += e[i * n + k] * e[k * n + j];
                t2[i * n + j] = s;
            }
        memcpy(e, t2, (size_t)(n * n) * sizeof(double));
    }
}

/* The gradient of exp at A for G: the top right block of exp([[A^T, G], [0, A^T]]). */
static int matrix_exp_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *a = node->inputs[0];
    int64_t n = a->shape[a->ndim - 1], b, batches = n > 0 ? a->size / (n * n) : 0, i, j, w = 2 * n;
    size_t bytes = (size_t)(4 * w * w + 1) * sizeof(double);
    double *m;
    gin[0] = tensor_alloc_like("matrix_exp", a);
    if (!gin[0]) return ac_last_error_code();
    m = scratch_alloc(bytes);
    if (!m) return ac_last_error_code();
    for (b = 0; b < batches; b++) {
        const float *x = a->data + b * n * n, *g = gout->data + b * n * n;
        double *e = m + w * w;
        for (i = 0; i < w * w; i++) m[i] = 0.0;
        for (i = 0; i < n; i++)
            for (j = 0; j < n; j++) {
                m[i * w + j] = m[(i + n) * w + j + n] = x[j * n + i];
                m[i * w + j + n] = g[i * n + j];
            }
        expm_double(m, w, e, e + w * w, e + 2 * w * w);
        for (i = 0; i < n; i++)
            for (j = 0; j < n; j++) gin[0]->data[b * n * n + i * n + j] = (float)e[i * w + j + n];
    }
    scratch_free(m, bytes);
    return AC_OK;
}

AcTensor *ac_matrix_exp(const AcTensor *a)
{
    const char *op = "matrix_exp";
    int64_t n, batches, b, i;
    size_t bytes;
    double *m;
    AcTensor *out;
    if (square_check(op, a, &n, &batches)) return NULL;
    out = op_output(op, a->shape, a->ndim, &a, 1, matrix_exp_backward, 0);
    if (!out || n == 0) return out;
    bytes = (size_t)(4 * n * n + 1) * sizeof(double);
    m = scratch_alloc(bytes);
    if (!m) {
        ac_tensor_free(out);
        return NULL;
    }
    for (b = 0; b < batches; b++) {
        for (i = 0; i < n * n; i++) m[i] = a->data[b * n * n + i];
        expm_double(m, n, m + n * n, m + 2 * n * n, m + 3 * n * n);
        for (i = 0; i < n * n; i++) out->data[b * n * n + i] = (float)m[n * n + i];
    }
    scratch_free(m, bytes);
    return out;
}
