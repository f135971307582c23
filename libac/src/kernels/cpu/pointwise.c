/*
 * cpu/pointwise.c - the CPU's kernels for ops/pointwise.c: the unary math and
 * activations named by AcPointwise, forward and backward, the bool tests, the
 * integer forms that keep their dtype, and the binary ops of AcPointwise2
 * (float and integer) over an AcBroadcast.
 *
 * The activations that training loops run (silu, leaky_relu, softplus, elu,
 * gelu tanh, mish, hardswish, ...) are loops of branch-free scalar formulas
 * (vecmath.h's exp, sigmoid and tanh, and log below) compiled per instruction
 * set (CPU_CLONES), so the compiler vectorises them; the rarer math calls libm
 * or runs in double (cpu/special_math.c). Every chunk's result
 * depends only on its values, so any thread count gives the same bits.
 */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu.h"
#include "kernels/vecmath.h"
#include "kernels/cpu/special_math.h"

#include <float.h>
#include <math.h>

#define PW_GRAIN 16384
#define PI_D 3.14159265358979323846

/* ---- branch-free scalar helpers ------------------------------------------- */

/* log1p(u) for u in [0, 1], branch-free and without a division: Cephes' logf
   polynomial on m, where 1 + u = 2^k (1 + m) with m in [sqrt(1/2) - 1, sqrt(2) - 1],
   m taken from u itself so that 1 + u is never rounded. */
static inline float log1p01_scalar(float u)
{
    const int low = u < 0.41421356f;
    const float m = select_float(low, u, (u - 1.0f) * 0.5f), k = select_float(low, 0.0f, 1.0f);
    const float z = m * m;
    float y = ((((((((7.0376836292e-2f * m - 1.1514610310e-1f) * m + 1.1676998740e-1f) * m -
                    1.2420140846e-1f) * m + 1.4249322787e-1f) * m - 1.6668057665e-1f) * m +
                 2.0000714765e-1f) * m - 2.4999993993e-1f) * m + 3.3333331174e-1f) * m * z;
    y += -2.12194440e-4f * k;
    y += -0.5f * z;
    return (m + y) + 0.693359375f * k;
}

/* log(1 + exp(x)), stable: max(x, 0) + log1p(exp(-|x|)). NaN stays NaN. */
static inline float softplus_scalar(float x)
{
    float pos = select_float(x > 0.0f, x, 0.0f);
    return select_float(x != x, x, pos + log1p01_scalar(exp_scalar(-fabsf(x))));
}

/* exp(x) - 1 for x <= 0 (the negative side of elu): exact near 0, -1 below -88. */
static inline float expm1_neg_scalar(float x)
{
    float n, r, p, q, s;
    x = select_float(x < -87.0f, -87.0f, x);
    x = select_float(x > 0.0f, 0.0f, x);
    n = (x * LOG2E + ROUNDER) - ROUNDER;
    r = (x - n * LN2_HI) - n * LN2_LO;
    p = ((((EXP_P0 * r + EXP_P1) * r + EXP_P2) * r + EXP_P3) * r + EXP_P4) * r + EXP_P5;
    q = p * (r * r) + r;   /* exp(r) - 1 */
    s = exp2_int(n);
    return s * q + (s - 1.0f);
}

/* ---- the activations that pay for SIMD ------------------------------------ */

/* silu through vecmath's sigmoid (hand-written per instruction set), a block at a
   time so the second pass reads what the first left in L1. */
#define PW_BLOCK 1024

CPU_CLONES static void silu_finish(const float *restrict x, float *restrict y, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) y[i] *= x[i];
}

CPU_CLONES static void silu_grad_finish(const float *restrict g, const float *restrict x,
                                        float *restrict s, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) s[i] = g[i] * (s[i] * (1.0f + x[i] * (1.0f - s[i])));
}

static void silu_loop(const float *x, float *y, int64_t n)
{
    int64_t b, len;
    for (b = 0; b < n; b += len) {
        len = n - b < PW_BLOCK ? n - b : PW_BLOCK;
        vec_sigmoid(x + b, y + b, len);
        silu_finish(x + b, y + b, len);
    }
}

static void silu_grad_loop(const float *g, const float *x, float *out, int64_t n)
{
    int64_t b, len;
    for (b = 0; b < n; b += len) {
        len = n - b < PW_BLOCK ? n - b : PW_BLOCK;
        vec_sigmoid(x + b, out + b, len);
        silu_grad_finish(g + b, x + b, out + b, len);
    }
}

CPU_CLONES static void leaky_loop(const float *restrict x, float *restrict y, int64_t n, float slope)
{
    int64_t i;
    for (i = 0; i < n; i++) y[i] = select_float(x[i] > 0.0f, x[i], x[i] * slope);
}

CPU_CLONES static void leaky_grad_loop(const float *restrict g, const float *restrict x,
                                       float *restrict out, int64_t n, float slope)
{
    int64_t i;
    for (i = 0; i < n; i++) out[i] = select_float(x[i] > 0.0f, g[i], g[i] * slope);
}

CPU_CLONES static void softplus_loop(const float *restrict x, float *restrict y, int64_t n,
                                     float beta, float threshold)
{
    const float inv_beta = 1.0f / beta;
    int64_t i;
    for (i = 0; i < n; i++) {
        float bx = x[i] * beta;
        y[i] = select_float(bx > threshold, x[i], softplus_scalar(bx) * inv_beta);
    }
}

CPU_CLONES static void softplus_grad_loop(const float *restrict g, const float *restrict x,
                                          float *restrict out, int64_t n, float beta,
                                          float threshold)
{
    int64_t i;
    for (i = 0; i < n; i++) {
        float bx = x[i] * beta;
        out[i] = select_float(bx > threshold, g[i], g[i] * sigmoid_scalar(bx));
    }
}

/* scale * x for x > 0, else scale * alpha * (exp(x * input_scale) - 1) */
CPU_CLONES static void elu_loop(const float *restrict x, float *restrict y, int64_t n, float alpha,
                                float scale, float input_scale)
{
    int64_t i;
    for (i = 0; i < n; i++) {
        float neg = alpha * expm1_neg_scalar(x[i] * input_scale);
        y[i] = scale * select_float(x[i] > 0.0f, x[i], select_float(x[i] != x[i], x[i], neg));
    }
}

CPU_CLONES static void elu_grad_loop(const float *restrict g, const float *restrict x,
                                     float *restrict out, int64_t n, float alpha, float scale,
                                     float input_scale)
{
    int64_t i;
    for (i = 0; i < n; i++) {
        float neg = alpha * input_scale * (expm1_neg_scalar(x[i] * input_scale) + 1.0f);
        out[i] = g[i] * scale * select_float(x[i] > 0.0f, 1.0f, neg);
    }
}

#define GELU_K 0.7978845608028654f   /* sqrt(2 / pi) */
#define GELU_C 0.044715f

/* 0.5 (1 + tanh(u)) is sigmoid(2u): no cancellation in the negative tail. */
CPU_CLONES static void gelu_tanh_loop(const float *restrict x, float *restrict y, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) {
        float v = x[i];
        y[i] = v * sigmoid_scalar(2.0f * GELU_K * (v + GELU_C * v * v * v));
    }
}

CPU_CLONES static void gelu_tanh_grad_loop(const float *restrict g, const float *restrict x,
                                           float *restrict out, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) {
        float v = x[i], s = sigmoid_scalar(2.0f * GELU_K * (v + GELU_C * v * v * v));
        float inner = 2.0f * GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        out[i] = g[i] * (s + v * s * (1.0f - s) * inner);
    }
}

CPU_CLONES static void mish_loop(const float *restrict x, float *restrict y, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) y[i] = x[i] * tanh_scalar(softplus_scalar(x[i]));
}

CPU_CLONES static void mish_grad_loop(const float *restrict g, const float *restrict x,
                                      float *restrict out, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) {
        float t = tanh_scalar(softplus_scalar(x[i]));
        out[i] = g[i] * (t + x[i] * sigmoid_scalar(x[i]) * (1.0f - t * t));
    }
}

CPU_CLONES static void hardswish_loop(const float *restrict x, float *restrict y, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) {
        float r = x[i] + 3.0f;
        r = select_float(r < 0.0f, 0.0f, r);
        r = select_float(r > 6.0f, 6.0f, r);
        y[i] = x[i] * r / 6.0f;
    }
}

CPU_CLONES static void hardswish_grad_loop(const float *restrict g, const float *restrict x,
                                           float *restrict out, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) {
        float mid = g[i] * (x[i] / 3.0f + 0.5f);
        out[i] = select_float(x[i] <= -3.0f, 0.0f, select_float(x[i] < 3.0f, mid, g[i]));
    }
}

CPU_CLONES static void logsigmoid_loop(const float *restrict x, float *restrict y, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) y[i] = -softplus_scalar(-x[i]);
}

CPU_CLONES static void logsigmoid_grad_loop(const float *restrict g, const float *restrict x,
                                            float *restrict out, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) out[i] = g[i] * sigmoid_scalar(-x[i]);
}

/* round half to even with decimals, as PyTorch: through x * 10^d in float */
static float round_decimals(float x, int decimals)
{
    float ten;
    if (decimals == 0) return nearbyintf(x);
    if (decimals > 0) {
        ten = powf(10.0f, (float)decimals);
        return nearbyintf(x * ten) / ten;
    }
    ten = powf(10.0f, (float)-decimals);
    return nearbyintf(x / ten) * ten;
}

static float sign_float(float v) { return (float)((0.0f < v) - (v < 0.0f)); }

/* ---- forward ------------------------------------------------------------- */

typedef struct {
    int op;
    const float *x, *g, *y;
    float *out;
    uint8_t *mask;
    float p[3];
} PwJob;

static void forward_chunk(const PwJob *job, int64_t begin, int64_t end)
{
    const float *x = job->x + begin, p0 = job->p[0], p1 = job->p[1], p2 = job->p[2];
    float *y = job->out + begin;
    const int64_t n = end - begin;
    int64_t i;
    switch (job->op) {
    case AC_PW_RSQRT: for (i = 0; i < n; i++) y[i] = 1.0f / sqrtf(x[i]); break;
    case AC_PW_SQUARE: for (i = 0; i < n; i++) y[i] = x[i] * x[i]; break;
    case AC_PW_RECIPROCAL: for (i = 0; i < n; i++) y[i] = 1.0f / x[i]; break;
    case AC_PW_ERF: for (i = 0; i < n; i++) y[i] = erff(x[i]); break;
    case AC_PW_ERFC: for (i = 0; i < n; i++) y[i] = erfcf(x[i]); break;
    case AC_PW_ERFINV: for (i = 0; i < n; i++) y[i] = (float)erfinv_double(x[i]); break;
    case AC_PW_EXPM1: for (i = 0; i < n; i++) y[i] = expm1f(x[i]); break;
    case AC_PW_EXP2: for (i = 0; i < n; i++) y[i] = exp2f(x[i]); break;
    case AC_PW_LOG2: for (i = 0; i < n; i++) y[i] = log2f(x[i]); break;
    case AC_PW_LOG10: for (i = 0; i < n; i++) y[i] = log10f(x[i]); break;
    case AC_PW_SIGN: for (i = 0; i < n; i++) y[i] = sign_float(x[i]); break;
    case AC_PW_FLOOR: for (i = 0; i < n; i++) y[i] = floorf(x[i]); break;
    case AC_PW_CEIL: for (i = 0; i < n; i++) y[i] = ceilf(x[i]); break;
    case AC_PW_ROUND: for (i = 0; i < n; i++) y[i] = round_decimals(x[i], (int)p0); break;
    case AC_PW_TRUNC: for (i = 0; i < n; i++) y[i] = truncf(x[i]); break;
    case AC_PW_FRAC: for (i = 0; i < n; i++) y[i] = x[i] - truncf(x[i]); break;
    case AC_PW_TAN: for (i = 0; i < n; i++) y[i] = tanf(x[i]); break;
    case AC_PW_ASIN: for (i = 0; i < n; i++) y[i] = asinf(x[i]); break;
    case AC_PW_ACOS: for (i = 0; i < n; i++) y[i] = acosf(x[i]); break;
    case AC_PW_ATAN: for (i = 0; i < n; i++) y[i] = atanf(x[i]); break;
    case AC_PW_SINH: for (i = 0; i < n; i++) y[i] = sinhf(x[i]); break;
    case AC_PW_COSH: for (i = 0; i < n; i++) y[i] = coshf(x[i]); break;
    case AC_PW_ASINH: for (i = 0; i < n; i++) y[i] = asinhf(x[i]); break;
    case AC_PW_ACOSH: for (i = 0; i < n; i++) y[i] = acoshf(x[i]); break;
    case AC_PW_ATANH: for (i = 0; i < n; i++) y[i] = atanhf(x[i]); break;
    case AC_PW_LOGIT:
        for (i = 0; i < n; i++) {
            float v = x[i];
            if (p0 >= 0.0f) v = v < p0 ? p0 : (v > 1.0f - p0 ? 1.0f - p0 : v);
            y[i] = logf(v / (1.0f - v));
        }
        break;
    case AC_PW_SINC: for (i = 0; i < n; i++) y[i] = (float)sinc_double(x[i]); break;
    case AC_PW_LGAMMA: for (i = 0; i < n; i++) y[i] = (float)lgamma(x[i]); break;
    case AC_PW_DIGAMMA: for (i = 0; i < n; i++) y[i] = (float)digamma_double(x[i]); break;
    case AC_PW_NAN_TO_NUM:
        for (i = 0; i < n; i++)
            y[i] = isnan(x[i]) ? p0 : x[i] == INFINITY ? p1 : x[i] == -INFINITY ? p2 : x[i];
        break;
    case AC_PW_ANGLE:
        for (i = 0; i < n; i++) y[i] = isnan(x[i]) ? x[i] : (x[i] < 0.0f ? (float)PI_D : 0.0f);
        break;
    case AC_PW_ENTR: for (i = 0; i < n; i++) y[i] = (float)entr_double(x[i]); break;
    case AC_PW_ERFCX: for (i = 0; i < n; i++) y[i] = (float)erfcx_double(x[i]); break;
    case AC_PW_NDTRI: for (i = 0; i < n; i++) y[i] = (float)ndtri_double(x[i]); break;
    case AC_PW_LOG_NDTR: for (i = 0; i < n; i++) y[i] = (float)log_ndtr_double(x[i]); break;
    case AC_PW_I0: for (i = 0; i < n; i++) y[i] = (float)bessel_i(0, x[i], 0); break;
    case AC_PW_I0E: for (i = 0; i < n; i++) y[i] = (float)bessel_i(0, x[i], 1); break;
    case AC_PW_I1: for (i = 0; i < n; i++) y[i] = (float)bessel_i(1, x[i], 0); break;
    case AC_PW_I1E: for (i = 0; i < n; i++) y[i] = (float)bessel_i(1, x[i], 1); break;
    case AC_PW_POLYGAMMA: for (i = 0; i < n; i++) y[i] = (float)polygamma_double((int)p0, x[i]); break;
    case AC_PW_SILU: silu_loop(x, y, n); break;
    case AC_PW_LEAKY_RELU: leaky_loop(x, y, n, p0); break;
    case AC_PW_SOFTPLUS: softplus_loop(x, y, n, p0, p1); break;
    case AC_PW_ELU: elu_loop(x, y, n, p0, p1, p2); break;
    case AC_PW_GELU_TANH: gelu_tanh_loop(x, y, n); break;
    case AC_PW_HARDTANH:
        for (i = 0; i < n; i++) y[i] = x[i] < p0 ? p0 : (x[i] > p1 ? p1 : x[i]);
        break;
    case AC_PW_MISH: mish_loop(x, y, n); break;
    case AC_PW_HARDSWISH: hardswish_loop(x, y, n); break;
    case AC_PW_HARDSIGMOID:
        for (i = 0; i < n; i++) {
            float r = x[i] + 3.0f;
            y[i] = (r < 0.0f ? 0.0f : (r > 6.0f ? 6.0f : r)) / 6.0f;
        }
        break;
    case AC_PW_HARDSHRINK:
        for (i = 0; i < n; i++) y[i] = (x[i] >= -p0 && x[i] <= p0) ? 0.0f : x[i];
        break;
    case AC_PW_SOFTSHRINK:
        for (i = 0; i < n; i++) y[i] = x[i] > p0 ? x[i] - p0 : (x[i] < -p0 ? x[i] + p0 : x[i] * 0.0f);
        break;
    case AC_PW_TANHSHRINK:
        vec_tanh(x, y, n);
        for (i = 0; i < n; i++) y[i] = x[i] - y[i];
        break;
    case AC_PW_SOFTSIGN: for (i = 0; i < n; i++) y[i] = x[i] / (1.0f + fabsf(x[i])); break;
    case AC_PW_LOGSIGMOID: logsigmoid_loop(x, y, n); break;
    case AC_PW_THRESHOLD: for (i = 0; i < n; i++) y[i] = x[i] <= p0 ? p1 : x[i]; break;
    default: break;
    }
}

static void forward_task(void *ctx, int64_t begin, int64_t end) { forward_chunk(ctx, begin, end); }

int cpu_pointwise(int op, const float *x, float *out, int64_t n, const float *p)
{
    PwJob job;
    job.op = op;
    job.x = x;
    job.out = out;
    job.p[0] = p[0];
    job.p[1] = p[1];
    job.p[2] = p[2];
    /* lgamma writes the global signgam: one thread */
    if (op == AC_PW_LGAMMA) forward_chunk(&job, 0, n);
    else parallel_for(n, PW_GRAIN, forward_task, &job);
    return AC_OK;
}

/* ---- backward: out = g * d op(x) / dx, from x and the forward's y --------- */

static void backward_chunk(const PwJob *job, int64_t begin, int64_t end)
{
    const float *x = job->x + begin, *y = job->y + begin, *g = job->g + begin;
    const float p0 = job->p[0], p1 = job->p[1], p2 = job->p[2];
    float *o = job->out + begin;
    const int64_t n = end - begin;
    int64_t i;
    switch (job->op) {
    case AC_PW_RSQRT: for (i = 0; i < n; i++) o[i] = -0.5f * g[i] * y[i] * y[i] * y[i]; break;
    case AC_PW_SQUARE: for (i = 0; i < n; i++) o[i] = 2.0f * x[i] * g[i]; break;
    case AC_PW_RECIPROCAL: for (i = 0; i < n; i++) o[i] = -g[i] * y[i] * y[i]; break;
    case AC_PW_ERF:
        for (i = 0; i < n; i++) o[i] = g[i] * 1.12837917f * expf(-x[i] * x[i]);
        break;
    case AC_PW_ERFC:
        for (i = 0; i < n; i++) o[i] = -g[i] * 1.12837917f * expf(-x[i] * x[i]);
        break;
    case AC_PW_ERFINV:
        for (i = 0; i < n; i++) o[i] = g[i] * 0.886226925f * expf(y[i] * y[i]);
        break;
    case AC_PW_EXPM1: for (i = 0; i < n; i++) o[i] = g[i] * (y[i] + 1.0f); break;
    case AC_PW_EXP2: for (i = 0; i < n; i++) o[i] = g[i] * y[i] * 0.693147181f; break;
    case AC_PW_LOG2: for (i = 0; i < n; i++) o[i] = g[i] / (x[i] * 0.693147181f); break;
    case AC_PW_LOG10: for (i = 0; i < n; i++) o[i] = g[i] / (x[i] * 2.30258509f); break;
    case AC_PW_SIGN: case AC_PW_FLOOR: case AC_PW_CEIL: case AC_PW_ROUND: case AC_PW_TRUNC:
        for (i = 0; i < n; i++) o[i] = 0.0f;
        break;
    case AC_PW_FRAC: for (i = 0; i < n; i++) o[i] = g[i]; break;
    case AC_PW_TAN: for (i = 0; i < n; i++) o[i] = g[i] * (1.0f + y[i] * y[i]); break;
    case AC_PW_ASIN: for (i = 0; i < n; i++) o[i] = g[i] / sqrtf(1.0f - x[i] * x[i]); break;
    case AC_PW_ACOS: for (i = 0; i < n; i++) o[i] = -g[i] / sqrtf(1.0f - x[i] * x[i]); break;
    case AC_PW_ATAN: for (i = 0; i < n; i++) o[i] = g[i] / (1.0f + x[i] * x[i]); break;
    case AC_PW_SINH: for (i = 0; i < n; i++) o[i] = g[i] * coshf(x[i]); break;
    case AC_PW_COSH: for (i = 0; i < n; i++) o[i] = g[i] * sinhf(x[i]); break;
    case AC_PW_ASINH: for (i = 0; i < n; i++) o[i] = g[i] / sqrtf(x[i] * x[i] + 1.0f); break;
    case AC_PW_ACOSH:
        for (i = 0; i < n; i++) o[i] = g[i] / sqrtf((x[i] - 1.0f) * (x[i] + 1.0f));
        break;
    case AC_PW_ATANH: for (i = 0; i < n; i++) o[i] = g[i] / (1.0f - x[i] * x[i]); break;
    case AC_PW_LOGIT:
        for (i = 0; i < n; i++) {
            const float v = x[i];
            if (p0 >= 0.0f && (v < p0 || v > 1.0f - p0)) o[i] = 0.0f;
            else o[i] = g[i] / (v * (1.0f - v));
        }
        break;
    case AC_PW_SINC:
        for (i = 0; i < n; i++) {
            double v = x[i], a = PI_D * v;
            o[i] = v == 0.0 ? 0.0f : (float)(g[i] * (cos(a) * a - sin(a)) / (a * v));
        }
        break;
    case AC_PW_LGAMMA: for (i = 0; i < n; i++) o[i] = g[i] * (float)digamma_double(x[i]); break;
    case AC_PW_DIGAMMA: for (i = 0; i < n; i++) o[i] = g[i] * (float)trigamma_double(x[i]); break;
    case AC_PW_NAN_TO_NUM: for (i = 0; i < n; i++) o[i] = isfinite(x[i]) ? g[i] : 0.0f; break;
    case AC_PW_ANGLE: for (i = 0; i < n; i++) o[i] = 0.0f; break;
    case AC_PW_ENTR: for (i = 0; i < n; i++) o[i] = -g[i] * (logf(x[i]) + 1.0f); break;
    case AC_PW_ERFCX:
        for (i = 0; i < n; i++) o[i] = g[i] * (2.0f * x[i] * y[i] - 1.12837917f);
        break;
    case AC_PW_NDTRI:
        for (i = 0; i < n; i++) o[i] = g[i] * (float)(2.5066282746310002 * exp(0.5 * (double)y[i] * y[i]));
        break;
    case AC_PW_LOG_NDTR:
        for (i = 0; i < n; i++)
            o[i] = g[i] * (float)(exp(-0.5 * (double)x[i] * x[i] - y[i]) / 2.5066282746310002);
        break;
    case AC_PW_I0: for (i = 0; i < n; i++) o[i] = g[i] * (float)bessel_i(1, x[i], 0); break;
    case AC_PW_I0E:
        for (i = 0; i < n; i++) o[i] = g[i] * (float)(bessel_i(1, x[i], 1) - (x[i] < 0 ? -1.0 : x[i] > 0 ? 1.0 : 0.0) * y[i]);
        break;
    case AC_PW_I1: case AC_PW_I1E:
        for (i = 0; i < n; i++) {
            const double v = x[i], scaled = job->op == AC_PW_I1E;
            double d;
            if (v == 0.0) d = 0.5;
            else d = bessel_i(0, v, (int)scaled) - y[i] * (scaled * (v < 0 ? -1.0 : 1.0) + 1.0 / v);
            o[i] = g[i] * (float)d;
        }
        break;
    case AC_PW_POLYGAMMA:
        for (i = 0; i < n; i++) o[i] = g[i] * (float)polygamma_double((int)p0 + 1, x[i]);
        break;
    case AC_PW_SILU: silu_grad_loop(g, x, o, n); break;
    case AC_PW_LEAKY_RELU: leaky_grad_loop(g, x, o, n, p0); break;
    case AC_PW_SOFTPLUS: softplus_grad_loop(g, x, o, n, p0, p1); break;
    case AC_PW_ELU: elu_grad_loop(g, x, o, n, p0, p1, p2); break;
    case AC_PW_GELU_TANH: gelu_tanh_grad_loop(g, x, o, n); break;
    case AC_PW_HARDTANH:
        for (i = 0; i < n; i++) o[i] = (x[i] <= p0 || x[i] >= p1) ? 0.0f : g[i];
        break;
    case AC_PW_MISH: mish_grad_loop(g, x, o, n); break;
    case AC_PW_HARDSWISH: hardswish_grad_loop(g, x, o, n); break;
    case AC_PW_HARDSIGMOID:
        for (i = 0; i < n; i++) o[i] = (x[i] > -3.0f && x[i] < 3.0f) ? g[i] / 6.0f : 0.0f;
        break;
    case AC_PW_HARDSHRINK:
        for (i = 0; i < n; i++) o[i] = (x[i] >= -p0 && x[i] <= p0) ? 0.0f : g[i];
        break;
    case AC_PW_SOFTSHRINK:
        for (i = 0; i < n; i++) o[i] = (x[i] >= -p0 && x[i] <= p0) ? 0.0f : g[i];
        break;
    case AC_PW_TANHSHRINK:
        vec_tanh(x, o, n);
        for (i = 0; i < n; i++) o[i] = g[i] * o[i] * o[i];
        break;
    case AC_PW_SOFTSIGN:
        for (i = 0; i < n; i++) {
            float d = 1.0f + fabsf(x[i]);
            o[i] = g[i] / (d * d);
        }
        break;
    case AC_PW_LOGSIGMOID: logsigmoid_grad_loop(g, x, o, n); break;
    case AC_PW_THRESHOLD: for (i = 0; i < n; i++) o[i] = x[i] <= p0 ? 0.0f : g[i]; break;
    default: break;
    }
    (void)p2;
}

static void backward_task(void *ctx, int64_t begin, int64_t end) { backward_chunk(ctx, begin, end); }

int cpu_pointwise_backward(int op, const float *g, const float *x, const float *y, float *out,
                           int64_t n, const float *p)
{
    PwJob job;
    job.op = op;
    job.g = g;
    job.x = x;
    job.y = y;
    job.out = out;
    job.p[0] = p[0];
    job.p[1] = p[1];
    job.p[2] = p[2];
    parallel_for(n, PW_GRAIN, backward_task, &job);
    return AC_OK;
}

/* ---- tests (bool results) and the integer forms --------------------------- */

int cpu_pointwise_test(int op, const AcTensor *a, AcTensor *out)
{
    uint8_t *o = data_u8(out);
    int64_t i;
    if (a->dtype != AC_FLOAT32) {   /* integers: finite, never NaN or infinite */
        for (i = 0; i < a->size; i++) {
            double v = elem_get(a, i);
            o[i] = (uint8_t)(op == AC_PW_ISFINITE ? 1 : op == AC_PW_SIGNBIT ? v < 0.0 : 0);
        }
        return AC_OK;
    }
    for (i = 0; i < a->size; i++) {
        const float v = a->data[i];
        int r;
        switch (op) {
        case AC_PW_ISNAN: r = isnan(v); break;
        case AC_PW_ISINF: r = isinf(v); break;
        case AC_PW_ISPOSINF: r = v == INFINITY; break;
        case AC_PW_ISNEGINF: r = v == -INFINITY; break;
        case AC_PW_ISFINITE: r = isfinite(v); break;
        default: r = signbit(v) != 0; break;
        }
        o[i] = (uint8_t)(r != 0);
    }
    return AC_OK;
}

static int64_t int_get(const AcTensor *t, int64_t i)
{
    return t->dtype == AC_INT64 ? data_i64(t)[i] : (int64_t)data_u8(t)[i];
}

static void int_set(AcTensor *t, int64_t i, int64_t v)
{
    if (t->dtype == AC_INT64) data_i64(t)[i] = v;
    else if (t->dtype == AC_BOOL) data_u8(t)[i] = (uint8_t)(v != 0);
    else data_u8(t)[i] = (uint8_t)(uint64_t)v;   /* uint8 wraps */
}

/* Products in uint64 wrap modulo 2^64 as two's complement int64 does, without
   signed overflow. */
static int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

int cpu_pointwise_integer(int op, const AcTensor *a, AcTensor *out, const float *p)
{
    /* hardtanh's bounds, threshold's threshold and value: integers, truncated as PyTorch */
    const int64_t lo = (int64_t)p[0], hi = (int64_t)p[1];
    int64_t i;
    for (i = 0; i < a->size; i++) {
        int64_t v = int_get(a, i);
        switch (op) {
        case AC_PW_SIGN: v = (0 < v) - (v < 0); break;
        case AC_PW_SQUARE: v = wrap_mul(v, v); break;
        case AC_PW_HARDTANH: v = v < lo ? lo : (v > hi ? hi : v); break;
        case AC_PW_THRESHOLD: v = v <= lo ? hi : v; break;
        default: break;   /* floor, ceil, round, trunc: the integer itself */
        }
        int_set(out, i, v);
    }
    return AC_OK;
}

/* ---- binary ops ------------------------------------------------------------ */

static void walk_next(const AcBroadcast *b, int64_t *index, int64_t *at)
{
    int d, k;
    for (d = b->ndim - 1; d >= 0; d--) {
        for (k = 0; k < 2; k++) at[k] += b->strides[k][d];
        if (++index[d] < b->shape[d]) return;
        for (k = 0; k < 2; k++) at[k] -= b->strides[k][d] * b->shape[d];
        index[d] = 0;
    }
}

static float binary_float(int op, float u, float v)
{
    switch (op) {
    case AC_PW2_ATAN2: return atan2f(u, v);
    case AC_PW2_HYPOT: return hypotf(u, v);
    case AC_PW2_FMOD: return fmodf(u, v);
    case AC_PW2_COPYSIGN: return copysignf(u, v);
    case AC_PW2_XLOGY:
        if (isnan(v)) return NAN;
        return u == 0.0f ? 0.0f : u * logf(v);
    case AC_PW2_LOGADDEXP: {
        float m = u > v ? u : v;
        if (isinf(m) && u == v) return u;   /* both -inf (or +inf) */
        if (isnan(u) || isnan(v)) return NAN;
        return m + log1pf(expf(-fabsf(u - v)));
    }
    case AC_PW2_LOGADDEXP2: {
        float m = u > v ? u : v;
        if (isinf(m) && u == v) return u;
        if (isnan(u) || isnan(v)) return NAN;
        return m + log1pf(exp2f(-fabsf(u - v))) / 0.693147181f;
    }
    case AC_PW2_MAXIMUM: return (isnan(u) || isnan(v)) ? NAN : (u > v ? u : v);
    case AC_PW2_MINIMUM: return (isnan(u) || isnan(v)) ? NAN : (u < v ? u : v);
    case AC_PW2_FMAX: return fmaxf(u, v);
    case AC_PW2_FMIN: return fminf(u, v);
    case AC_PW2_CLAMP_MIN: return (isnan(u) || isnan(v)) ? NAN : (u < v ? v : u);
    case AC_PW2_CLAMP_MAX: return (isnan(u) || isnan(v)) ? NAN : (u > v ? v : u);
    case AC_PW2_HEAVISIDE: return u == 0.0f ? v : (float)(u > 0.0f);
    case AC_PW2_XLOG1PY:
        if (isnan(v)) return NAN;
        return u == 0.0f ? 0.0f : u * log1pf(v);
    case AC_PW2_ZETA: return (float)zeta_double(u, v);
    default: return nextafterf(u, v);
    }
}

/* The integer forms: AC_ERR_ARG for fmod by zero (PyTorch's ZeroDivisionError). */
static int binary_int(int op, int64_t u, int64_t v, int64_t *r)
{
    switch (op) {
    case AC_PW2_MAXIMUM: case AC_PW2_FMAX: case AC_PW2_CLAMP_MIN: *r = u > v ? u : v; break;
    case AC_PW2_MINIMUM: case AC_PW2_FMIN: case AC_PW2_CLAMP_MAX: *r = u < v ? u : v; break;
    case AC_PW2_FMOD:
        if (v == 0) return -1;
        *r = (v == -1) ? 0 : u % v;   /* INT64_MIN % -1 would trap */
        break;
    case AC_PW2_GCD: case AC_PW2_LCM: {
        uint64_t x = u < 0 ? 0 - (uint64_t)u : (uint64_t)u, y = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
        uint64_t m = x, n = y, t;
        while (n) {
            t = m % n;
            m = n;
            n = t;
        }
        /* lcm = |u / gcd * v|, wrapping past int64 as PyTorch's does */
        *r = op == AC_PW2_GCD ? (int64_t)m : (m == 0 ? 0 : (int64_t)(x / m * y));
        break;
    }
    default: *r = u == 0 ? v : (u > 0); break;   /* heaviside */
    }
    return 0;
}

int cpu_pointwise2(int op, const AcTensor *a, const AcTensor *b, AcTensor *out,
                   const AcBroadcast *plan)
{
    int64_t index[AC_MAX_DIMS] = {0}, at[2] = {0, 0}, i;
    if (out->dtype == AC_FLOAT32) {
        if (a->size == out->size && b->size == out->size) {
            for (i = 0; i < out->size; i++) out->data[i] = binary_float(op, a->data[i], b->data[i]);
            return AC_OK;
        }
        for (i = 0; i < out->size; i++) {
            out->data[i] = binary_float(op, a->data[at[0]], b->data[at[1]]);
            walk_next(plan, index, at);
        }
        return AC_OK;
    }
    for (i = 0; i < out->size; i++) {
        int64_t r;
        if (binary_int(op, int_get(a, at[0]), int_get(b, at[1]), &r))
            return error_set(AC_ERR_ARG, "fmod: ZeroDivisionError (an integer divided by zero)");
        int_set(out, i, r);
        walk_next(plan, index, at);
    }
    return AC_OK;
}

/* d op / du and d op / dv at (u, v), given the result r. */
static void binary_grads(int op, float u, float v, float r, float *du, float *dv)
{
    switch (op) {
    case AC_PW2_ATAN2: {
        float d = u * u + v * v;
        *du = v / d;
        *dv = -u / d;
        break;
    }
    case AC_PW2_HYPOT: *du = u / r; *dv = v / r; break;
    case AC_PW2_FMOD: *du = 1.0f; *dv = -truncf(u / v); break;
    case AC_PW2_COPYSIGN: *du = u == 0.0f ? 0.0f : r / u; *dv = 0.0f; break;
    case AC_PW2_XLOGY:
        *du = (u == 0.0f && v <= 0.0f) ? 0.0f : logf(v);   /* as PyTorch */
        *dv = u / v;
        break;
    case AC_PW2_LOGADDEXP:
        *du = 1.0f / (1.0f + expf(v - u));
        *dv = 1.0f / (1.0f + expf(u - v));
        break;
    case AC_PW2_LOGADDEXP2:
        *du = 1.0f / (1.0f + exp2f(v - u));
        *dv = 1.0f / (1.0f + exp2f(u - v));
        break;
    case AC_PW2_MAXIMUM: case AC_PW2_MINIMUM: {
        /* a tie splits the gradient; a NaN sends it to both, as PyTorch */
        int u_loses = op == AC_PW2_MAXIMUM ? u < v : u > v, v_loses = op == AC_PW2_MAXIMUM ? u > v : u < v;
        *du = u == v ? 0.5f : (u_loses ? 0.0f : 1.0f);
        *dv = u == v ? 0.5f : (v_loses ? 0.0f : 1.0f);
        break;
    }
    case AC_PW2_FMAX: case AC_PW2_FMIN: {
        int first = (op == AC_PW2_FMAX ? u >= v : u <= v) || isnan(v);
        *du = first ? 1.0f : 0.0f;
        *dv = first ? 0.0f : 1.0f;
        break;
    }
    case AC_PW2_XLOG1PY:
        *du = (u == 0.0f && v <= -1.0f) ? 0.0f : log1pf(v);
        *dv = u / (1.0f + v);
        break;
    case AC_PW2_CLAMP_MIN: *du = u >= v ? 1.0f : 0.0f; *dv = u >= v ? 0.0f : 1.0f; break;
    case AC_PW2_CLAMP_MAX: *du = u <= v ? 1.0f : 0.0f; *dv = u <= v ? 0.0f : 1.0f; break;
    default: *du = *dv = 0.0f; break;
    }
}

int cpu_pointwise2_backward(int op, const AcTensor *a, const AcTensor *b, const AcTensor *out,
                            const AcTensor *gout, AcTensor *ga, AcTensor *gb,
                            const AcBroadcast *plan)
{
    int64_t index[AC_MAX_DIMS] = {0}, at[2] = {0, 0}, i;
    for (i = 0; i < out->size; i++) {
        float du, dv, g = gout->data[i];
        binary_grads(op, a->data[at[0]], b->data[at[1]], out->data[i], &du, &dv);
        if (ga) ga->data[i] = g * du;
        if (gb) gb->data[i] = g * dv;
        walk_next(plan, index, at);
    }
    return AC_OK;
}
