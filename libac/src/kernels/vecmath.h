/*
 * vecmath.h - transcendental functions over float buffers: exp, sigmoid,
 * tanh, gelu and its derivative, and the exp-and-sum at the heart of softmax;
 * and a plain sum in fixed lanes.
 *
 * Pure math on buffers; they know nothing of tensors or graphs. Each runs the
 * AVX-512F, AVX2+FMA or portable C version, picked once at run time like
 * gemm's (cpu.h, AC_SIMD). Results depend only on the values and the set in
 * use, never on where a buffer starts or how a caller splits it, so elementwise
 * work cut into chunks for threads gives the same bits for any thread count.
 *
 * Accuracy on every set (tests/c/test_vecmath.c checks it against double
 * libm): exp within 2 ulp, subnormal results included (measured: 1 ulp);
 * overflow gives inf, underflow 0, exp(-inf) 0, NaN stays NaN. sigmoid, tanh
 * and gelu within 1e-6 relative error (measured: 4e-7), gelu' within 1e-6 of
 * |Phi(x)| + |x phi(x)|, the size of its two terms (it crosses zero); values
 * below FLT_MIN within 1e-6 * FLT_MIN. AVX-512 and AVX2 give the same bits;
 * the portable set, without FMA, rounds a little differently.
 */
#ifndef AC_VECMATH_H
#define AC_VECMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* y[i] = exp(x[i]) for i < n; y may be x. */
void vec_exp(const float *x, float *y, int64_t n);
/*
 * y[i] = exp(x[i] - shift), and returns the sum of those values. y may be x,
 * or NULL when only the sum is wanted. The sum is taken in one fixed order for
 * a given n on every instruction set: value i goes to partial sum i % 16, and
 * the 16 partial sums are added as a tree.
 */
float vec_exp_sum(const float *x, float shift, float *y, int64_t n);
/* The largest of x[0..n), n >= 1. If x holds a NaN the result may be NaN. */
float vec_max(const float *x, int64_t n);
/* y[i] = 1 / (1 + exp(-x[i])); y may be x. */
void vec_sigmoid(const float *x, float *y, int64_t n);
/* y[i] = tanh(x[i]); y may be x. */
void vec_tanh(const float *x, float *y, int64_t n);
/* y[i] = x Phi(x) with x = x[i] and Phi the standard normal CDF (exact gelu,
   0.5 x (1 + erf(x / sqrt 2))); y may be x. */
void vec_gelu(const float *x, float *y, int64_t n);
/* y[i] = g[i] * gelu'(x[i]), gelu'(x) = Phi(x) + x phi(x); y may be g or x. */
void vec_gelu_grad(const float *g, const float *x, float *y, int64_t n);

/* Sum of n floats in eight fixed lanes: plain C the compiler vectorises, and
   the same bits whichever thread sums which buffer. */
static inline float vec_sum(const float *x, int64_t n)
{
    float lanes[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, total;
    int64_t q = 0;
    int l;
    for (; q + 8 <= n; q += 8)
        for (l = 0; l < 8; l++) lanes[l] += x[q + l];
    total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
            ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for (; q < n; q++) total += x[q];
    return total;
}

/*
 * Make every later call use the named set ("avx512", "avx2", "generic"), or,
 * for NULL, the one AC_SIMD or the CPU picks. Returns 1, or 0 (changing
 * nothing) when this CPU cannot run the named set. For tests.
 */
int vecmath_use(const char *name);
/* The name of the set in use now. */
const char *vecmath_name(void);

/* ---- one element at a time ------------------------------------------------
 * The portable set's formulas, for loops that fuse them with other math (the
 * gate loops of rnn.c) and that the compiler vectorises; vecmath.c builds the
 * portable set from them. Same accuracy as the buffer functions above. */

#define EXP_LO (-104.0f)   /* exp of anything lower rounds to 0 */
#define EXP_HI 89.0f       /* exp of anything higher overflows to inf */
#define LOG2E 1.44269502f
#define LN2_HI 0.693145751953125f   /* ln 2 to 15 bits: n * LN2_HI is exact for |n| < 512 */
#define LN2_LO 1.42860677e-6f       /* ln 2 - LN2_HI */
#define ROUNDER 12582912.0f         /* 1.5 * 2^23: (v + ROUNDER) - ROUNDER rounds v to an integer */
#define EXP_P0 1.9875691500e-4f
#define EXP_P1 1.3981999507e-3f
#define EXP_P2 8.3334519073e-3f
#define EXP_P3 4.1665795894e-2f
#define EXP_P4 1.6666665459e-1f
#define EXP_P5 5.0000001201e-1f

#define TANH_CLAMP 10.0f
#define TANH_P1 1.338434815e-01f
#define TANH_P2 3.499432001e-03f
#define TANH_P3 2.066839988e-05f
#define TANH_P4 1.342962896e-08f
#define TANH_Q1 4.671767056e-01f
#define TANH_Q2 2.589186653e-02f
#define TANH_Q3 3.291750036e-04f
#define TANH_Q4 7.808761779e-07f


/* 2^k for an integral k in [-126, 127], assembled from its bits. */
static inline float exp2_int(float k)
{
    float biased = k + (ROUNDER + 127.0f);   /* k + 127 lands in the low mantissa bits */
    uint32_t bits;
    memcpy(&bits, &biased, sizeof bits);
    bits <<= 23;
    memcpy(&biased, &bits, sizeof bits);
    return biased;
}

/*
 * first ? a : b, through the bits. Compilers keep a float ?: as a branch
 * when it feeds arithmetic that might raise a flag the source would not
 * (-ftrapping-math), and a branch stops the loop from being vectorised.
 */
static inline float select_float(int first, float a, float b)
{
    uint32_t bits_a, bits_b, mask = (uint32_t)0 - (uint32_t)first;
    memcpy(&bits_a, &a, sizeof bits_a);
    memcpy(&bits_b, &b, sizeof bits_b);
    bits_a = (bits_a & mask) | (bits_b & ~mask);
    memcpy(&a, &bits_a, sizeof a);
    return a;
}

static inline float exp_scalar(float x)
{
    float n, r, p, half;
    x = select_float(x < EXP_LO, EXP_LO, x);   /* NaN fails both tests and passes through */
    x = select_float(x > EXP_HI, EXP_HI, x);
    n = (x * LOG2E + ROUNDER) - ROUNDER;
    r = (x - n * LN2_HI) - n * LN2_LO;
    p = ((((EXP_P0 * r + EXP_P1) * r + EXP_P2) * r + EXP_P3) * r + EXP_P4) * r + EXP_P5;
    p = p * (r * r) + r + 1.0f;
    /* 2^n as two normal halves: p * 2^half is exact, the second product rounds once */
    half = (n * 0.5f + ROUNDER) - ROUNDER;
    return p * exp2_int(half) * exp2_int(n - half);
}

static inline float sigmoid_scalar(float x)
{
    float e = exp_scalar(-fabsf(x));
    return select_float(x < 0.0f, e, 1.0f) / (1.0f + e);
}

static inline float tanh_scalar(float x)
{
    float z, p, q, y;
    x = select_float(x < -TANH_CLAMP, -TANH_CLAMP, x);
    x = select_float(x > TANH_CLAMP, TANH_CLAMP, x);
    z = x * x;
    p = (((TANH_P4 * z + TANH_P3) * z + TANH_P2) * z + TANH_P1) * z + 1.0f;
    q = (((TANH_Q4 * z + TANH_Q3) * z + TANH_Q2) * z + TANH_Q1) * z + 1.0f;
    y = x * p / q;
    y = select_float(y < -1.0f, -1.0f, y);
    return select_float(y > 1.0f, 1.0f, y);
}

#endif /* AC_VECMATH_H */
