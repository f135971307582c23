/*
 * cpu/elementwise.c - the CPU's kernels for elementwise.c: one function per
 * op over an AcMap (kernels.h).
 *
 * map_walk goes through the output in runs along the innermost dim and hands
 * each run to the op's run function. The run loops are static inline with the
 * op's math passed as a constant function, so each op gets its own copy with
 * the math inlined, specialised for how its operands step (binary_run's three
 * cases): the compiler vectorises them. exp runs in the vectorised kernel
 * (kernels/vecmath.c).
 */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/vecmath.h"

#include <math.h>

#define MAP_GRAIN 16384

/* One run of n outputs; x[k] steps by step[k] (0 or 1). */
typedef void (*RunFn)(const AcMap *m, const float *const *x, const int64_t *step,
                      float *restrict out, int64_t n);

typedef struct {
    const AcMap *map;
    RunFn run;
} MapWalk;

/* Outputs [begin, end): find where begin sits, then go run by run. */
static void map_chunk(void *ctx, int64_t begin, int64_t end)
{
    const AcMap *m = ((const MapWalk *)ctx)->map;
    const RunFn run = ((const MapWalk *)ctx)->run;
    const int last = m->ndim - 1;
    int64_t index[AC_MAX_DIMS], offset[AC_MAP_MAX_IN], step[AC_MAP_MAX_IN], rest = begin, pos = begin;
    const float *x[AC_MAP_MAX_IN];
    int d, k;
    for (k = 0; k < m->n_in; k++) {
        offset[k] = 0;
        step[k] = m->strides[k][last];
    }
    for (d = last; d >= 0; d--) {
        index[d] = rest % m->shape[d];
        rest /= m->shape[d];
        for (k = 0; k < m->n_in; k++) offset[k] += index[d] * m->strides[k][d];
    }
    while (pos < end) {
        int64_t n = m->shape[last] - index[last];
        if (n > end - pos) n = end - pos;
        for (k = 0; k < m->n_in; k++) x[k] = m->in[k] + offset[k];
        run(m, x, step, m->out + pos, n);
        pos += n;
        index[last] += n;
        for (k = 0; k < m->n_in; k++) offset[k] += n * step[k];
        for (d = last; d > 0 && index[d] == m->shape[d]; d--) {
            index[d] = 0;
            index[d - 1]++;
            for (k = 0; k < m->n_in; k++)
                offset[k] += m->strides[k][d - 1] - m->shape[d] * m->strides[k][d];
        }
    }
}

static int map_walk(const AcMap *m, RunFn run)
{
    MapWalk walk;
    if (m->ndim == 1 && m->size <= MAP_GRAIN) {   /* one run, as map_chunk would make it */
        int64_t step[AC_MAP_MAX_IN];
        int k;
        for (k = 0; k < m->n_in; k++) step[k] = m->strides[k][0];
        run(m, m->in, step, m->out, m->size);
        return AC_OK;
    }
    walk.map = m;
    walk.run = run;
    parallel_for(m->size, MAP_GRAIN, map_chunk, &walk);
    return AC_OK;
}

/* ---- the run loops -------------------------------------------------------- */

typedef float (*Binary)(float u, float v);
typedef float (*Scalar)(float u, float p0, float p1);

/* out = f(u, v), specialised for the three ways the operands can step. */
static inline void binary_run(Binary f, const float *const *x, const int64_t *step,
                              float *restrict out, int64_t n)
{
    const float *restrict a = x[0], *restrict b = x[1];
    int64_t i;
    if (step[0] && step[1]) {
        for (i = 0; i < n; i++) out[i] = f(a[i], b[i]);
    } else if (step[0]) {
        const float v = b[0];
        for (i = 0; i < n; i++) out[i] = f(a[i], v);
    } else {
        const float u = a[0];
        for (i = 0; i < n; i++) out[i] = f(u, b[i]);
    }
}

/* out = f(u, p0, p1): a unary form runs flat, every step 1. */
static inline void scalar_run(Scalar f, const AcMap *m, const float *restrict a,
                              float *restrict out, int64_t n)
{
    const float p0 = m->p0, p1 = m->p1;
    int64_t i;
    for (i = 0; i < n; i++) out[i] = f(a[i], p0, p1);
}

/* The run function and the table entry of a binary op f. */
#define BINARY_KERNEL(name, f)                                                           \
    static void name##_run(const AcMap *m, const float *const *x, const int64_t *step,   \
                           float *restrict out, int64_t n)                               \
    {                                                                                    \
        (void)m;                                                                         \
        binary_run(f, x, step, out, n);                                                  \
    }                                                                                    \
    int cpu_##name(const AcMap *m) { return map_walk(m, name##_run); }

/* The same for a unary form or a unary backward (u grad_out, v the saved
   tensor, p0 and p1 the scalars): every operand has the output's shape. */
#define SCALAR_KERNEL(name, f)                                                           \
    static void name##_run(const AcMap *m, const float *const *x, const int64_t *step,   \
                           float *restrict out, int64_t n)                               \
    {                                                                                    \
        (void)step;                                                                      \
        scalar_run(f, m, x[0], out, n);                                                  \
    }                                                                                    \
    int cpu_##name(const AcMap *m) { return map_walk(m, name##_run); }
#define GRAD_KERNEL(name, f)                                                             \
    static void name##_run(const AcMap *m, const float *const *x, const int64_t *step,   \
                           float *restrict out, int64_t n)                               \
    {                                                                                    \
        const float *restrict g = x[0], *restrict v = x[1];                             \
        const float p0 = m->p0, p1 = m->p1;                                              \
        int64_t i;                                                                       \
        (void)step;                                                                      \
        for (i = 0; i < n; i++) out[i] = f(g[i], v[i], p0, p1);                          \
    }                                                                                    \
    int cpu_##name(const AcMap *m) { return map_walk(m, name##_run); }

/* ---- binary ops ----------------------------------------------------------- */

static inline float add_f(float u, float v) { return u + v; }
static inline float sub_f(float u, float v) { return u - v; }
static inline float mul_f(float u, float v) { return u * v; }
static inline float div_f(float u, float v) { return u / v; }
static inline float pow_f(float u, float v) { return powf(u, v); }

BINARY_KERNEL(add, add_f)
BINARY_KERNEL(sub, sub_f)
BINARY_KERNEL(mul, mul_f)
BINARY_KERNEL(div, div_f)
BINARY_KERNEL(pow, pow_f)

/* Binary backward: in[0] (grad_out) and in[1] for div/pow_exp have the
   output's shape; the others may be broadcast. */
static void div_backward_b_run(const AcMap *m, const float *const *x, const int64_t *step,
                               float *restrict out, int64_t n)
{
    int64_t i;
    (void)m;
    for (i = 0; i < n; i++) out[i] = -(x[0][i] * x[1][i]) / x[2][i * step[2]];
}

int cpu_div_backward_b(const AcMap *m) { return map_walk(m, div_backward_b_run); }

static void pow_backward_base_run(const AcMap *m, const float *const *x, const int64_t *step,
                                  float *restrict out, int64_t n)
{
    int64_t i;
    (void)m;
    for (i = 0; i < n; i++) {
        const float g = x[0][i], a = x[1][i * step[1]], b = x[2][i * step[2]];
        out[i] = g * (b == 0.0f ? 0.0f : b * powf(a, b - 1.0f));
    }
}

int cpu_pow_backward_base(const AcMap *m) { return map_walk(m, pow_backward_base_run); }

/* PyTorch's rule: a zero base with a non-negative exponent has no slope in b. */
static void pow_backward_exp_run(const AcMap *m, const float *const *x, const int64_t *step,
                                 float *restrict out, int64_t n)
{
    int64_t i;
    (void)m;
    for (i = 0; i < n; i++) {
        const float g = x[0][i], y = x[1][i], a = x[2][i * step[2]], b = x[3][i * step[3]];
        out[i] = g * (a == 0.0f && b >= 0.0f ? 0.0f : y * logf(a));
    }
}

int cpu_pow_backward_exp(const AcMap *m) { return map_walk(m, pow_backward_exp_run); }

/* ---- unary ops and scalar forms ------------------------------------------- */

/* min(max(u, lo), hi), written so that NaN passes through and lo > hi gives hi, as PyTorch. */
static inline float clamp_f(float u, float lo, float hi)
{
    float low_clamped = u < lo ? lo : u;
    return low_clamped > hi ? hi : low_clamped;
}

static inline float add_scalar_f(float u, float p0, float p1) { (void)p1; return u + p0; }
static inline float mul_scalar_f(float u, float p0, float p1) { (void)p1; return u * p0; }
static inline float rsub_scalar_f(float u, float p0, float p1) { (void)p1; return p0 - u; }
static inline float div_scalar_f(float u, float p0, float p1) { (void)p1; return u / p0; }
static inline float rdiv_scalar_f(float u, float p0, float p1) { (void)p1; return p0 / u; }
static inline float neg_f(float u, float p0, float p1) { (void)p0; (void)p1; return -u; }
static inline float log_f(float u, float p0, float p1) { (void)p0; (void)p1; return logf(u); }
static inline float log1p_f(float u, float p0, float p1) { (void)p0; (void)p1; return log1pf(u); }
static inline float sqrt_f(float u, float p0, float p1) { (void)p0; (void)p1; return sqrtf(u); }
static inline float abs_f(float u, float p0, float p1) { (void)p0; (void)p1; return fabsf(u); }
static inline float sin_f(float u, float p0, float p1) { (void)p0; (void)p1; return sinf(u); }
static inline float cos_f(float u, float p0, float p1) { (void)p0; (void)p1; return cosf(u); }

SCALAR_KERNEL(add_scalar, add_scalar_f)
SCALAR_KERNEL(mul_scalar, mul_scalar_f)
SCALAR_KERNEL(rsub_scalar, rsub_scalar_f)
SCALAR_KERNEL(div_scalar, div_scalar_f)
SCALAR_KERNEL(rdiv_scalar, rdiv_scalar_f)
SCALAR_KERNEL(clamp, clamp_f)
SCALAR_KERNEL(neg, neg_f)
SCALAR_KERNEL(log, log_f)
SCALAR_KERNEL(log1p, log1p_f)
SCALAR_KERNEL(sqrt, sqrt_f)
SCALAR_KERNEL(abs, abs_f)
SCALAR_KERNEL(sin, sin_f)
SCALAR_KERNEL(cos, cos_f)

static void exp_run(const AcMap *m, const float *const *x, const int64_t *step,
                    float *restrict out, int64_t n)
{
    (void)m;
    (void)step;
    vec_exp(x[0], out, n);
}

int cpu_exp(const AcMap *m) { return map_walk(m, exp_run); }

/* ---- unary backward: g is grad_out, v the saved input or output ----------- */

static inline float rdiv_scalar_backward_f(float g, float v, float p0, float p1)
{
    (void)p1;
    return -g * p0 / (v * v);
}


static inline float clamp_backward_f(float g, float v, float p0, float p1)
{
    return v >= p0 && v <= p1 ? g : 0.0f;
}

static inline float log1p_backward_f(float g, float v, float p0, float p1)
{
    (void)p0;
    (void)p1;
    return g / (1.0f + v);
}

static inline float sqrt_backward_f(float g, float v, float p0, float p1)
{
    (void)p0;
    (void)p1;
    return g / (2.0f * v);
}

static inline float abs_backward_f(float g, float v, float p0, float p1)
{
    (void)p0;
    (void)p1;
    return g * (v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f));
}

static inline float sin_backward_f(float g, float v, float p0, float p1)
{
    (void)p0;
    (void)p1;
    return g * cosf(v);
}

static inline float cos_backward_f(float g, float v, float p0, float p1)
{
    (void)p0;
    (void)p1;
    return -g * sinf(v);
}

GRAD_KERNEL(rdiv_scalar_backward, rdiv_scalar_backward_f)
GRAD_KERNEL(clamp_backward, clamp_backward_f)
GRAD_KERNEL(log1p_backward, log1p_backward_f)
GRAD_KERNEL(sqrt_backward, sqrt_backward_f)
GRAD_KERNEL(abs_backward, abs_backward_f)
GRAD_KERNEL(sin_backward, sin_backward_f)
GRAD_KERNEL(cos_backward, cos_backward_f)

/* ---- pow with a scalar exponent -------------------------------------------
   The exponents code writes most are done as the multiplications (or sqrt,
   reciprocal) they stand for, as torch does, so x ** 2 costs what x * x does;
   whole exponents up to POW_UNROLL in size by repeated multiplication (a
   vectorised loop per exponent); the rest by powf. */

#define POW_UNROLL 8

/* u ** n for a whole n in [1, POW_UNROLL], by squaring: at most 4 products. */
static inline float pow_whole(float u, int n)
{
    const float u2 = u * u, u4 = u2 * u2;
    switch (n) {
    case 1: return u;
    case 2: return u2;
    case 3: return u2 * u;
    case 4: return u4;
    case 5: return u4 * u;
    case 6: return u4 * u2;
    case 7: return u4 * u2 * u;
    default: return u4 * u4;
    }
}

/* How p is done: 1..POW_UNROLL or -1..-POW_UNROLL for a whole p, 0 for
   anything else. */
static int pow_whole_exponent(float p)
{
    return p == floorf(p) && fabsf(p) >= 1.0f && fabsf(p) <= (float)POW_UNROLL ? (int)p : 0;
}

/* out = a ** p over n elements. */
static void pow_values(const float *restrict a, float p, float *restrict out, int64_t n)
{
    const int whole = pow_whole_exponent(p);
    int64_t i;
    if (p == 0.5f) {
        for (i = 0; i < n; i++) out[i] = sqrtf(a[i]);
    } else if (p == -0.5f) {
        for (i = 0; i < n; i++) out[i] = 1.0f / sqrtf(a[i]);
    } else if (p == 0.0f) {
        for (i = 0; i < n; i++) out[i] = 1.0f;
    } else if (whole > 0) {
        switch (whole) {   /* one loop per exponent, each vectorised with its products inlined */
        case 1: for (i = 0; i < n; i++) out[i] = a[i]; break;
        case 2: for (i = 0; i < n; i++) out[i] = pow_whole(a[i], 2); break;
        case 3: for (i = 0; i < n; i++) out[i] = pow_whole(a[i], 3); break;
        case 4: for (i = 0; i < n; i++) out[i] = pow_whole(a[i], 4); break;
        default: for (i = 0; i < n; i++) out[i] = pow_whole(a[i], whole); break;
        }
    } else if (whole < 0) {
        switch (whole) {
        case -1: for (i = 0; i < n; i++) out[i] = 1.0f / a[i]; break;
        case -2: for (i = 0; i < n; i++) out[i] = 1.0f / pow_whole(a[i], 2); break;
        default: for (i = 0; i < n; i++) out[i] = 1.0f / pow_whole(a[i], -whole); break;
        }
    } else {
        for (i = 0; i < n; i++) out[i] = powf(a[i], p);
    }
}

static void pow_scalar_run(const AcMap *m, const float *const *x, const int64_t *step,
                           float *restrict out, int64_t n)
{
    (void)step;
    pow_values(x[0], m->p0, out, n);
}

int cpu_pow_scalar(const AcMap *m) { return map_walk(m, pow_scalar_run); }

/* g * p * a ** (p - 1), the power done as pow_values does it (p != 0: the op
   fills zeros itself for p == 0). */
static void pow_scalar_backward_run(const AcMap *m, const float *const *x, const int64_t *step,
                                    float *restrict out, int64_t n)
{
    const float *restrict g = x[0], *restrict a = x[1];
    const float p = m->p0;
    int64_t i;
    (void)step;
    if (p == 1.0f) {
        for (i = 0; i < n; i++) out[i] = g[i];
    } else if (p == 2.0f) {
        for (i = 0; i < n; i++) out[i] = g[i] * (2.0f * a[i]);
    } else if (p == 0.5f) {
        for (i = 0; i < n; i++) out[i] = g[i] * (0.5f / sqrtf(a[i]));
    } else if (p == -1.0f) {
        for (i = 0; i < n; i++) out[i] = g[i] * (-1.0f / (a[i] * a[i]));
    } else {
        pow_values(a, p - 1.0f, out, n);
        for (i = 0; i < n; i++) out[i] = g[i] * (p * out[i]);
    }
}

int cpu_pow_scalar_backward(const AcMap *m) { return map_walk(m, pow_scalar_backward_run); }
