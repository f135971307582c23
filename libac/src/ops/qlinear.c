/*
 * qlinear.c - the int8 Linear layer for inference (ac_qlinear_*): its packed
 * block, the quantization of weights and inputs, and the forward pass that
 * splits the output columns among threads and turns the kernels' exact int32
 * sums into floats.
 *
 * The block is one root allocation: this header, the int8 weight (out, in)
 * row-major with QGEMM_SLACK zero bytes after it, the scales, the bias. It is
 * reference counted: the caller's reference and one per tensor that views
 * its weight, scales or bias.
 *
 * Quantization and the float steps after the sums are plain C shared by every
 * kernel set, so the sets differ only in how they add exact integers.
 *
 * Not here: the kernels (kernels/qgemm*.c), the recurrent layers (qrnn.c).
 */
#include "qlinear.h"
#include "kernels/cpu.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

/* In features past this could overflow the kernels' int32 sums (255 * 128 * k). */
#define QLINEAR_MAX_IN 65536
/* Output columns per task, and the multiply-adds below which one thread does all. */
#define QLINEAR_COLUMNS 16
/* Rows per kernel call within a task. */
#define QLINEAR_ROWS 64
#define QLINEAR_PARALLEL_WORK 524288
/* Below this many in features the portable kernel is the fastest. */
#define QLINEAR_SIMD_MIN_IN 16
/* Batches of at least this many rows with fewer in features than this run from
   panels packed per call (qgemm.h): under one 64-byte piece of k the row
   kernels' vectors are partly empty and their lane sums cost as much as the
   products (measured: 64 rows, 128 outputs). */
#define QLINEAR_PANEL_MIN_ROWS 8
#define QLINEAR_PANEL_BELOW_IN 64

static size_t round_up64(size_t n) { return (n + 63) & ~(size_t)63; }

/* The quantizing and dequantizing loops are CPU_CLONES: their steps are exact or
   correctly rounded (no contraction), so each clone gives the same bits. */

/* Round half to even for |v| <= 2^22, as rint does, in two float steps the
   compiler vectorises (no -ffast-math, so they are kept): near 1.5 * 2^23
   floats are one apart. */
static inline float round_even(float v)
{
    const float magic = 12582912.0f;
    return (v + magic) - magic;
}

/* qlinear.h: the scale is max|x| / 127. A row with max|x| < 2^-120 (where
   127 / max|x| could overflow) quantizes to 0 with scale 0; one holding inf or
   NaN to 0 with scale NaN. */
static inline float quantize_row(const float *restrict x, int64_t k, int64_t ld, int plus_128,
                                 uint8_t *restrict dst)
{
    const int offset = plus_128 ? 128 : 0;
    uint32_t top = 0;   /* the largest |x| as bits: for floats >= 0 (and NaN above inf) the integer order */
    float amax, inv;
    int64_t p;
    for (p = 0; p < k; p++) {
        uint32_t bits;
        memcpy(&bits, x + p, sizeof bits);
        bits &= 0x7fffffffu;
        top = bits > top ? bits : top;
    }
    memcpy(&amax, &top, sizeof amax);
    if (top >= 0x7f800000u || amax < 0x1p-120f) {
        for (p = 0; p < k; p++) dst[p] = (uint8_t)offset;
        for (; p < ld; p++) dst[p] = 0;
        return top < 0x7f800000u ? 0.0f : NAN;
    }
    inv = 127.0f / amax;
    for (p = 0; p < k; p++) {
        float v = round_even(x[p] * inv);
        v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
        dst[p] = (uint8_t)((int)v + offset);
    }
    for (; p < ld; p++) dst[p] = 0;
    return amax / 127.0f;
}

/* One call for all rows: the CPU's clone is picked once, not per row. */
CPU_CLONES void qlinear_quantize_rows(const float *x, int64_t m, int64_t k, int64_t ld, int plus_128,
                                           uint8_t *dst, float *scales)
{
    int64_t i;
    for (i = 0; i < m; i++) scales[i] = quantize_row(x + i * k, k, ld, plus_128, dst + i * ld);
}

/* ---- the block ------------------------------------------------------------ */

static AcQLinear *qlinear_alloc(const char *op, int64_t out, int64_t in, int has_bias)
{
    size_t head = round_up64(sizeof(AcQLinear));
    size_t weight = round_up64((size_t)(out * in) + QGEMM_SLACK);
    size_t floats = round_up64((size_t)out * sizeof(float));
    size_t bytes = head + weight + floats * (has_bias ? 2 : 1);
    char *block;
    AcQLinear *q;
    if (in > QLINEAR_MAX_IN)
        return error_null(AC_ERR_SHAPE, "%s: %lld in features; at most %d (int32 sums)", op,
                          (long long)in, QLINEAR_MAX_IN);
    block = root_alloc(bytes);
    if (!block) return NULL;
    memset(block, 0, bytes);
    q = (AcQLinear *)(void *)block;
    q->refs = 1;
    q->has_bias = has_bias;
    q->in = in;
    q->out = out;
    q->bytes = bytes;
    q->weight = (int8_t *)(void *)(block + head);
    q->scale = (float *)(void *)(block + head + weight);
    q->bias = has_bias ? (float *)(void *)(block + head + weight + floats) : NULL;
    return q;
}

static void qlinear_release(void *ctx)
{
    AcQLinear *q = ctx;
    if (__atomic_sub_fetch(&q->refs, 1, __ATOMIC_ACQ_REL) == 0) root_free(q, q->bytes);
}

int qlinear_check(const char *op, const AcQLinear *q, const char *what)
{
    if (!q) return error_set(AC_ERR_ARG, "%s: %s is NULL", op, what);
    return AC_OK;
}

static int check_matrix(const char *op, const AcTensor *t, int dtype, const char *what)
{
    if (!t) return error_set(AC_ERR_ARG, "%s: %s is NULL", op, what);
    if (t->dtype != dtype)
        return error_set(AC_ERR_DTYPE, "%s: %s is %s, not %s", op, what, ac_dtype_name(t->dtype),
                         ac_dtype_name(dtype));
    if (t->ndim != 2)
        return error_set(AC_ERR_SHAPE, "%s: %s %s must be 2-d (out_features, in_features)", op,
                         what, tensor_shape_str(t));
    return AC_OK;
}

static int check_vector(const char *op, const AcTensor *t, int64_t out, const char *what)
{
    if (tensor_check(op, t, what)) return ac_last_error_code();
    if (t->ndim != 1 || t->shape[0] != out)
        return error_set(AC_ERR_SHAPE, "%s: %s %s must be (%lld,), one per output row", op, what,
                         tensor_shape_str(t), (long long)out);
    return AC_OK;
}

AcQLinear *ac_qlinear_pack(const AcTensor *weight, const AcTensor *bias)
{
    const char *op = "qlinear_pack";
    AcQLinear *q;
    if (check_matrix(op, weight, AC_FLOAT32, "weight") ||
        (bias && check_vector(op, bias, weight->shape[0], "bias")) ||
        cpu_only(op, (const AcTensor *[]){weight, bias}, 2))
        return NULL;
    q = qlinear_alloc(op, weight->shape[0], weight->shape[1], bias != NULL);
    if (!q) return NULL;
    qlinear_quantize_rows(weight->data, q->out, q->in, q->in, 0, (uint8_t *)q->weight, q->scale);
    if (bias) memcpy(q->bias, bias->data, (size_t)q->out * sizeof(float));
    return q;
}

AcQLinear *ac_qlinear_new(const AcTensor *qweight, const AcTensor *scale, const AcTensor *bias)
{
    const char *op = "qlinear_new";
    AcQLinear *q;
    if (check_matrix(op, qweight, AC_INT8, "qweight") ||
        check_vector(op, scale, qweight->shape[0], "scale") ||
        (bias && check_vector(op, bias, qweight->shape[0], "bias")) ||
        cpu_only(op, (const AcTensor *[]){qweight, scale, bias}, 3))
        return NULL;
    q = qlinear_alloc(op, qweight->shape[0], qweight->shape[1], bias != NULL);
    if (!q) return NULL;
    memcpy(q->weight, qweight->data, (size_t)(q->out * q->in));
    memcpy(q->scale, scale->data, (size_t)q->out * sizeof(float));
    if (bias) memcpy(q->bias, bias->data, (size_t)q->out * sizeof(float));
    return q;
}

int ac_qlinear_free(AcQLinear *q)
{
    if (q) qlinear_release(q);
    return AC_OK;
}

int64_t ac_qlinear_in_features(const AcQLinear *q)
{
    return qlinear_check("qlinear_in_features", q, "layer") ? ac_last_error_code() : q->in;
}

int64_t ac_qlinear_out_features(const AcQLinear *q)
{
    return qlinear_check("qlinear_out_features", q, "layer") ? ac_last_error_code() : q->out;
}

int ac_qlinear_has_bias(const AcQLinear *q)
{
    return qlinear_check("qlinear_has_bias", q, "layer") ? ac_last_error_code() : q->has_bias;
}

int64_t ac_qlinear_nbytes(const AcQLinear *q)
{
    return qlinear_check("qlinear_nbytes", q, "layer") ? ac_last_error_code() : (int64_t)q->bytes;
}

/* A root tensor viewing part of q's block, holding a reference to q. */
static AcTensor *qlinear_view(AcQLinear *q, void *data, const int64_t *shape, int ndim, int dtype)
{
    AcTensor *t;
    __atomic_add_fetch(&q->refs, 1, __ATOMIC_ACQ_REL);
    t = ac_tensor_from_external(data, shape, ndim, dtype, qlinear_release, q);
    if (!t) __atomic_sub_fetch(&q->refs, 1, __ATOMIC_ACQ_REL);
    return t;
}

AcTensor *ac_qlinear_weight(AcQLinear *q)
{
    int64_t shape[2];
    if (qlinear_check("qlinear_weight", q, "layer")) return NULL;
    shape[0] = q->out;
    shape[1] = q->in;
    return qlinear_view(q, q->weight, shape, 2, AC_INT8);
}

AcTensor *ac_qlinear_scale(AcQLinear *q)
{
    if (qlinear_check("qlinear_scale", q, "layer")) return NULL;
    return qlinear_view(q, q->scale, &q->out, 1, AC_FLOAT32);
}

AcTensor *ac_qlinear_bias(AcQLinear *q)
{
    if (qlinear_check("qlinear_bias", q, "layer")) return NULL;
    if (!q->has_bias) return error_null(AC_ERR_STATE, "qlinear_bias: the layer has no bias");
    return qlinear_view(q, q->bias, &q->out, 1, AC_FLOAT32);
}

const char *ac_qlinear_kernels(void) { return qgemm_kernels()->name; }

/* ---- forward -------------------------------------------------------------- */

const QGemmKernels *qlinear_kernels(const AcQLinear *q)
{
    /* A few features fill a fraction of a vector, and summing it across costs more
       than the plain loop's few products (the same sums, so the same results). */
    return q->in < QLINEAR_SIMD_MIN_IN ? &qgemm_generic_kernels : qgemm_kernels();
}

typedef struct {
    const AcQLinear *q;
    const QGemmKernels *kern;
    const QPanels *panels;   /* or NULL */
    const uint8_t *qx;       /* m quantized rows, ld_x bytes apart */
    int64_t ld_x, m;
    const float *sx;         /* their scales */
    int32_t *sums;           /* (m, out) */
    float *y;                /* (m, out), or NULL for the sums alone */
} Forward;

/* y = the sums as floats (sum * (sx * scale) + bias), rows [i0, i1), columns
   [j0, j1); compiled for each set like the quantizing loop (no contraction). */
CPU_CLONES static void dequantize(const AcQLinear *q, const int32_t *sums, const float *sx, int64_t i0,
                                       int64_t i1, int64_t j0, int64_t j1, float *y)
{
    const float *restrict scale = q->scale, *restrict bias = q->bias;
    int64_t i, j;
    for (i = i0; i < i1; i++) {
        const int32_t *restrict s = sums + i * q->out;
        float *restrict yi = y + i * q->out;
        const float si = sx[i];
        if (bias)
            for (j = j0; j < j1; j++) yi[j] = (float)s[j] * (si * scale[j]) + bias[j];
        else
            for (j = j0; j < j1; j++) yi[j] = (float)s[j] * (si * scale[j]);
    }
}

/* Output columns [begin, end) * QLINEAR_COLUMNS, QLINEAR_ROWS rows at a time
   (their sums stay in L1 for the floats): the sums, then the floats. */
static void forward_task(void *ctx, int64_t begin, int64_t end)
{
    const Forward *f = ctx;
    const AcQLinear *q = f->q;
    int64_t j0 = begin * QLINEAR_COLUMNS, j1 = end * QLINEAR_COLUMNS, i0;
    QDotJob job;
    if (j1 > q->out) j1 = q->out;
    job.n = j1 - j0;
    job.k = q->in;
    job.ld_x = f->ld_x;
    job.w = q->weight + j0 * q->in;
    job.ld_out = q->out;
    job.panels = f->panels ? f->panels->w + j0 * f->panels->depth : NULL;
    job.sums = f->panels ? f->panels->sums + j0 : NULL;
    job.depth = f->panels ? f->panels->depth : 0;
    for (i0 = 0; i0 < f->m; i0 += QLINEAR_ROWS) {
        const int64_t i1 = i0 + QLINEAR_ROWS < f->m ? i0 + QLINEAR_ROWS : f->m;
        job.m = i1 - i0;
        job.x = f->qx + i0 * f->ld_x;
        job.out = f->sums + i0 * q->out + j0;
        if (job.panels && f->kern->dot_panels) f->kern->dot_panels(&job);
        else f->kern->dot(&job);
        if (f->y) dequantize(q, f->sums, f->sx, i0, i1, j0, j1, f->y);
    }
}

static void run_forward(const Forward *f)
{
    const AcQLinear *q = f->q;
    int64_t blocks = (q->out + QLINEAR_COLUMNS - 1) / QLINEAR_COLUMNS;
    int64_t work = f->m * QLINEAR_COLUMNS * (q->in > 0 ? q->in : 1);
    parallel_for(blocks, (QLINEAR_PARALLEL_WORK + work - 1) / work, forward_task, (void *)f);
}

void qlinear_sums(const AcQLinear *q, const QGemmKernels *kern, const QPanels *panels,
                  const uint8_t *qx, int64_t ld_x, int64_t m, int32_t *sums)
{
    Forward f;
    if (m == 0 || q->out == 0) return;
    f.q = q;
    f.kern = kern;
    f.panels = panels;
    f.qx = qx;
    f.ld_x = ld_x;
    f.m = m;
    f.sx = NULL;
    f.sums = sums;
    f.y = NULL;
    run_forward(&f);
}

typedef struct {
    const AcQLinear *q;
    const float *x;
    float *y;
} OneFeature;

/* One in feature (a univariate series): each row quantizes to one byte, and
   one pass per row makes its outputs, with the general path's arithmetic (the
   product is its exact sum). Rows [begin, end). */
CPU_CLONES static void one_feature_rows(const AcQLinear *q, const float *x, int64_t begin,
                                             int64_t end, float *y)
{
    const int8_t *restrict w = q->weight;
    const float *restrict scale = q->scale, *restrict bias = q->bias;
    const int64_t n = q->out;
    int64_t i, j;
    for (i = begin; i < end; i++) {
        uint8_t byte;
        const float sx = quantize_row(x + i, 1, 1, 0, &byte);
        const int32_t xi = (int8_t)byte;
        float *restrict yi = y + i * n;
        if (bias)
            for (j = 0; j < n; j++) yi[j] = (float)(xi * (int32_t)w[j]) * (sx * scale[j]) + bias[j];
        else
            for (j = 0; j < n; j++) yi[j] = (float)(xi * (int32_t)w[j]) * (sx * scale[j]);
    }
}

static void one_feature_task(void *ctx, int64_t begin, int64_t end)
{
    const OneFeature *f = ctx;
    one_feature_rows(f->q, f->x, begin, end, f->y);
}

int qlinear_rows(const AcQLinear *q, const float *x, int64_t m, float *y)
{
    Forward f;
    OneFeature one;
    QPanels panels;
    const QGemmKernels *kern;
    int use_panels;
    int64_t ld_x = (int64_t)round_up64((size_t)q->in);
    size_t qx_bytes = round_up64((size_t)(m * ld_x)), sx_bytes = round_up64((size_t)m * sizeof(float));
    size_t sums_bytes = round_up64((size_t)(m * q->out) * sizeof(int32_t));
    size_t bytes = qx_bytes + sx_bytes + sums_bytes;
    char *scratch;
    float *sx;
    if (m == 0 || q->out == 0) return AC_OK;
    if (q->in == 1) {
        one.q = q;
        one.x = x;
        one.y = y;
        parallel_for(m, (QLINEAR_PARALLEL_WORK + q->out - 1) / q->out, one_feature_task, &one);
        return AC_OK;
    }
    kern = qgemm_kernels();
    use_panels = kern->dot_panels && m >= QLINEAR_PANEL_MIN_ROWS && q->in < QLINEAR_PANEL_BELOW_IN;
    if (use_panels) bytes += qgemm_panels_bytes(q->out, q->in);
    else kern = qlinear_kernels(q);
    scratch = scratch_alloc(bytes);
    if (!scratch) return ac_last_error_code();
    sx = (float *)(void *)(scratch + qx_bytes);
    /* A short k: packing w costs less than the lane sums it saves (the same sums). */
    if (use_panels)
        qgemm_pack_panels(q->weight, q->out, q->in, scratch + qx_bytes + sx_bytes + sums_bytes, &panels);
    f.q = q;
    f.kern = kern;
    f.panels = use_panels ? &panels : NULL;
    f.qx = (const uint8_t *)scratch;
    f.ld_x = ld_x;
    f.m = m;
    f.sx = sx;
    f.sums = (int32_t *)(void *)(scratch + qx_bytes + sx_bytes);
    f.y = y;
    qlinear_quantize_rows(x, m, q->in, ld_x, f.kern->x_plus_128, (uint8_t *)scratch, sx);
    run_forward(&f);
    scratch_free(scratch, bytes);
    return AC_OK;
}

AcTensor *ac_qlinear_forward(const AcQLinear *q, const AcTensor *x)
{
    const char *op = "qlinear_forward";
    int64_t rows;
    AcTensor *out;
    if (qlinear_check(op, q, "layer")) return NULL;
    out = inference_output(op, x, q->in, q->out, "an int8 layer", &rows);
    if (out && qlinear_rows(q, x->data, rows, out->data)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}
