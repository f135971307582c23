/*
 * vecmath.h - transcendental functions over float buffers: exp, sigmoid,
 * tanh, gelu and its derivative, and the exp-and-sum at the heart of softmax.
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

#include <stdint.h>

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

/*
 * Make every later call use the named set ("avx512", "avx2", "generic"), or,
 * for NULL, the one AC_SIMD or the CPU picks. Returns 1, or 0 (changing
 * nothing) when this CPU cannot run the named set. For tests.
 */
int vecmath_use(const char *name);
/* The name of the set in use now. */
const char *vecmath_name(void);

#endif /* AC_VECMATH_H */
