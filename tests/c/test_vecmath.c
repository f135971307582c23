/*
 * test_vecmath.c - the vectorised exp, sigmoid, tanh, gelu and gelu' kernels,
 * exp-and-sum and max, on every instruction set this CPU can run, against
 * double-precision libm: a sweep over the whole float line (every 2039th bit
 * pattern, both signs), a dense sweep of each function's working range, and
 * the special values (inf, NaN, -0, overflow and underflow edges). Also: the
 * result of an element does not depend on where the buffer starts or how long
 * it is (so chunking for threads cannot change bits), in-place calls, and the
 * fixed summation order of vec_exp_sum.
 */
#include "kernels/vecmath.h"
#include "test.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define SWEEP_STRIDE 2039u
#define DENSE_POINTS 1000003

/* Bounds every instruction set must meet (vecmath.h promises these). */
#define EXP_MAX_ULP 2.0
#define REL_TOL 1e-6
#define SQRT_2PI 2.50662827463100050242

typedef enum { FN_EXP, FN_SIGMOID, FN_TANH, FN_GELU, FN_GELU_GRAD } Fn;
static const char *const fn_names[] = {"exp", "sigmoid", "tanh", "gelu", "gelu_grad"};
static const char *const set_names[] = {"avx512", "avx2", "generic"};

static double normal_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
static double normal_pdf(double x) { return exp(-0.5 * x * x) / SQRT_2PI; }

static double reference(Fn fn, double x)
{
    switch (fn) {
    case FN_EXP: return exp(x);
    case FN_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
    case FN_TANH: return tanh(x);
    case FN_GELU: return x * normal_cdf(x);
    case FN_GELU_GRAD: return normal_cdf(x) + x * normal_pdf(x);
    }
    return 0.0;
}

static void run_fn(Fn fn, const float *x, float *y, int64_t n)
{
    static float ones[64];
    int64_t i;
    switch (fn) {
    case FN_EXP: vec_exp(x, y, n); break;
    case FN_SIGMOID: vec_sigmoid(x, y, n); break;
    case FN_TANH: vec_tanh(x, y, n); break;
    case FN_GELU: vec_gelu(x, y, n); break;
    case FN_GELU_GRAD:
        for (i = 0; i < 64; i++) ones[i] = 1.0f;
        for (i = 0; i < n; i += 64) vec_gelu_grad(ones, x + i, y + i, n - i < 64 ? n - i : 64);
        break;
    }
}

/* The spacing of floats at |v| (v finite, below 2^128). */
static double float_ulp(double v)
{
    int exponent;
    v = fabs(v);
    if (v < FLT_MIN) return ldexp(1.0, -149);
    frexp(v, &exponent);
    return ldexp(1.0, exponent - 24);
}

/*
 * Error of y = fn(x) against the exact ref: in ulps for exp, else relative to
 * the size of the value, which for gelu' = Phi(x) + x phi(x) is the size of
 * its two terms (it crosses zero, where they cancel). Values below FLT_MIN
 * carry fewer bits, and are judged in absolute terms: REL_TOL * FLT_MIN.
 * Infinite when y should be a special value and is not.
 */
static double error_of(Fn fn, double x, float y, double ref)
{
    double size = fabs(ref);
    if (isnan(ref)) return isnan(y) ? 0.0 : INFINITY;
    if (isinf((float)ref)) return y == (float)ref ? 0.0 : INFINITY;
    if (isnan(y) || isinf(y)) return INFINITY;
    if (fn == FN_EXP) return fabs(y - ref) / float_ulp(ref);
    if (fn == FN_GELU_GRAD) size = normal_cdf(x) + fabs(x) * normal_pdf(x);
    return fabs(y - ref) / fmax(size, FLT_MIN);
}

static double bound_of(Fn fn) { return fn == FN_EXP ? EXP_MAX_ULP : REL_TOL; }

static float bits_to_float(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t float_to_bits(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

/* fn over the n values of x with exact results ref; returns the largest error. */
static double worst_error(Fn fn, const float *x, const double *ref, float *y, int64_t n)
{
    double worst = 0.0;
    int64_t i, reported = 0;
    run_fn(fn, x, y, n);
    for (i = 0; i < n; i++) {
        double err = error_of(fn, (double)x[i], y[i], ref[i]);
        if (!(err <= bound_of(fn)) && reported++ < 3)
            fprintf(stderr, "%s %s(%.9g) = %.9g, exact %.17g (error %g)\n", vecmath_name(),
                    fn_names[fn], (double)x[i], (double)y[i], ref[i], err);
        if (!(err <= worst)) worst = err;
    }
    return worst;
}

/*
 * Each function over the whole float line (every SWEEP_STRIDE-th bit pattern:
 * all magnitudes, both signs, some NaNs), then densely over its working range,
 * on every set. The exact values are computed once and shared by the sets.
 */
static void test_accuracy(void)
{
    static const double dense_lo[] = {-104.5, -20.0, -12.0, -17.0, -17.0};
    static const double dense_hi[] = {89.5, 20.0, 12.0, 17.0, 17.0};
    const int64_t sweep = (int64_t)((1ull << 32) / SWEEP_STRIDE) + 1, n = sweep + DENSE_POINTS;
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    float *avx512_y = malloc((size_t)n * sizeof(float));
    double *ref = malloc((size_t)n * sizeof(double)), worst[3][5];
    int fn, set, found[3];
    int64_t i, same;
    for (fn = FN_EXP; fn <= FN_GELU_GRAD; fn++) {
        for (i = 0; i < sweep; i++) x[i] = bits_to_float((uint32_t)((uint64_t)i * SWEEP_STRIDE));
        for (i = 0; i < DENSE_POINTS; i++)
            x[sweep + i] = (float)(dense_lo[fn] + (dense_hi[fn] - dense_lo[fn]) * (double)i /
                                                      (DENSE_POINTS - 1));
        for (i = 0; i < n; i++) ref[i] = reference((Fn)fn, (double)x[i]);
        for (set = 0; set < 3; set++) {
            found[set] = vecmath_use(set_names[set]);
            if (!found[set]) continue;
            worst[set][fn] = worst_error((Fn)fn, x, ref, y, n);
            CHECK(worst[set][fn] <= bound_of((Fn)fn));
            /* AVX2 runs AVX-512's operations in the same order: the same bits */
            if (set == 0) memcpy(avx512_y, y, (size_t)n * sizeof(float));
            if (set == 1 && found[0]) {
                for (same = 1, i = 0; i < n; i++)
                    same &= float_to_bits(y[i]) == float_to_bits(avx512_y[i]) ||
                            (isnan(y[i]) && isnan(avx512_y[i]));
                CHECK(same);
            }
        }
    }
    for (set = 0; set < 3; set++)
        if (found[set])
            printf("%s: %-7s exp %.2f ulp, relative error: sigmoid %.2g, tanh %.2g, gelu %.2g, "
                   "gelu' %.2g\n", __FILE__, set_names[set], worst[set][FN_EXP],
                   worst[set][FN_SIGMOID], worst[set][FN_TANH], worst[set][FN_GELU],
                   worst[set][FN_GELU_GRAD]);
    free(x);
    free(y);
    free(avx512_y);
    free(ref);
}

/* One value through fn, as a one-element buffer. */
static float one(Fn fn, float x)
{
    float y;
    run_fn(fn, &x, &y, 1);
    return y;
}

static void test_special_values(void)
{
    const float inf = INFINITY, nan_value = NAN;
    /* the largest x whose exp is finite, and the next float */
    const float exp_last_finite = bits_to_float(0x42B17217), exp_first_inf = bits_to_float(0x42B17218);
    int fn;
    for (fn = FN_EXP; fn <= FN_GELU_GRAD; fn++) CHECK(isnan(one((Fn)fn, nan_value)));
    CHECK(one(FN_EXP, inf) == inf);
    CHECK(float_to_bits(one(FN_EXP, -inf)) == 0);
    CHECK(one(FN_EXP, 0.0f) == 1.0f && one(FN_EXP, -0.0f) == 1.0f);
    CHECK(isfinite(one(FN_EXP, exp_last_finite)) && one(FN_EXP, exp_first_inf) == inf);
    CHECK(one(FN_EXP, FLT_MAX) == inf && float_to_bits(one(FN_EXP, -FLT_MAX)) == 0);
    CHECK(float_to_bits(one(FN_EXP, -104.0f)) == 0);
    CHECK(one(FN_EXP, -103.2789f) == ldexpf(1.0f, -149));   /* the smallest subnormal */
    CHECK(one(FN_SIGMOID, inf) == 1.0f && float_to_bits(one(FN_SIGMOID, -inf)) == 0);
    CHECK(one(FN_SIGMOID, 0.0f) == 0.5f && one(FN_SIGMOID, -0.0f) == 0.5f);
    CHECK(one(FN_TANH, inf) == 1.0f && one(FN_TANH, -inf) == -1.0f);
    CHECK(float_to_bits(one(FN_TANH, -0.0f)) == float_to_bits(-0.0f));
    CHECK(one(FN_TANH, 1e-30f) == 1e-30f);
    CHECK(one(FN_GELU, inf) == inf && one(FN_GELU, -inf) == 0.0f && one(FN_GELU, 0.0f) == 0.0f);
    CHECK(one(FN_GELU, 1e30f) == 1e30f && one(FN_GELU, -1e30f) == 0.0f);
    CHECK(one(FN_GELU_GRAD, inf) == 1.0f && one(FN_GELU_GRAD, -inf) == 0.0f);
    CHECK(one(FN_GELU_GRAD, 0.0f) == 0.5f);
}

/* An element's result is the same whatever buffer, offset and length it comes in. */
static void test_independent_of_buffer(void)
{
    float x[100], whole[100], part[100];
    int fn, start, length, i, same = 1;
    for (i = 0; i < 100; i++) x[i] = (float)(i - 50) * 0.37f + 0.01f * (float)(i % 7);
    for (fn = FN_EXP; fn <= FN_GELU_GRAD; fn++) {
        run_fn((Fn)fn, x, whole, 100);
        for (start = 0; start < 20; start++)
            for (length = 0; start + length <= 100; length += 7) {
                run_fn((Fn)fn, x + start, part, length);
                for (i = 0; i < length; i++)
                    same &= float_to_bits(part[i]) == float_to_bits(whole[start + i]);
            }
        memcpy(part, x, sizeof x);
        run_fn((Fn)fn, part, part, 100);   /* in place */
        for (i = 0; i < 100; i++) same &= float_to_bits(part[i]) == float_to_bits(whole[i]);
    }
    CHECK(same);
}

/* The gradient scales with g, and g may alias the output. */
static void test_gelu_grad_scales(void)
{
    float g[37], x[37], y[37], unit[37];
    int i, ok = 1;
    for (i = 0; i < 37; i++) {
        x[i] = (float)i * 0.25f - 4.0f;
        g[i] = (float)(i % 5) - 2.0f;
    }
    run_fn(FN_GELU_GRAD, x, unit, 37);
    memcpy(y, g, sizeof g);
    vec_gelu_grad(y, x, y, 37);
    for (i = 0; i < 37; i++) ok &= y[i] == g[i] * unit[i];
    CHECK(ok);
}

/* exp_sum: its values are exp's, its sum is the fixed 16-lane tree over them. */
static void test_exp_sum(void)
{
    float x[300], y[300], expected[300], shifted[300], lane[16];
    int64_t n, i;
    int ok = 1, l, width;
    for (i = 0; i < 300; i++) x[i] = (float)((i * 37) % 101) * 0.11f - 3.0f;
    for (n = 1; n <= 300; n += n < 40 ? 1 : 37) {
        float sum = vec_exp_sum(x, 2.5f, y, n);
        for (i = 0; i < n; i++) shifted[i] = x[i] - 2.5f;
        vec_exp(shifted, expected, n);
        for (l = 0; l < 16; l++) lane[l] = 0.0f;
        for (i = 0; i < n; i++) {
            ok &= float_to_bits(y[i]) == float_to_bits(expected[i]);
            lane[i % 16] += expected[i];
        }
        for (width = 8; width >= 1; width /= 2)
            for (l = 0; l < width; l++) lane[l] += lane[l + width];
        ok &= float_to_bits(sum) == float_to_bits(lane[0]);
        ok &= float_to_bits(vec_exp_sum(x, 2.5f, NULL, n)) == float_to_bits(sum);
    }
    CHECK(ok);
    memcpy(y, x, sizeof x);
    CHECK(vec_exp_sum(y, 0.0f, y, 300) > 0.0f);   /* in place */
    vec_exp(x, expected, 300);
    CHECK(memcmp(y, expected, sizeof y) == 0);
}

static void test_max(void)
{
    float x[200];
    int64_t n, i, ok = 1;
    for (i = 0; i < 200; i++) x[i] = (float)((i * 73) % 199) - 150.0f;
    for (n = 1; n <= 200; n++) {
        float expected = x[0];
        for (i = 1; i < n; i++) expected = x[i] > expected ? x[i] : expected;
        ok &= vec_max(x, n) == expected;
        ok &= vec_max(x + 200 - n, n) == vec_max(x + 200 - n, n);
    }
    CHECK(ok);
    x[150] = INFINITY;
    CHECK(vec_max(x, 200) == INFINITY);
    x[0] = -INFINITY;
    CHECK(vec_max(x, 1) == -INFINITY);
}

int main(void)
{
    size_t i;
    RUN(test_accuracy);
    for (i = 0; i < sizeof set_names / sizeof set_names[0]; i++) {
        if (!vecmath_use(set_names[i])) {
            printf("%s: this CPU has no %s, skipped\n", __FILE__, set_names[i]);
            continue;
        }
        CHECK(strcmp(vecmath_name(), set_names[i]) == 0);
        RUN(test_special_values);
        RUN(test_independent_of_buffer);
        RUN(test_gelu_grad_scales);
        RUN(test_exp_sum);
        RUN(test_max);
    }
    CHECK(vecmath_use("no-such-set") == 0);
    CHECK(vecmath_use(NULL) == 1);
    return TEST_REPORT();
}
