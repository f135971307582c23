/*
 * kernels.h - the per-device kernel table: the math of every op, one entry
 * per op, one table per device.
 *
 * An op (ops/) checks its arguments, makes its output on its inputs' device
 * (op_output refuses inputs on two devices) and wires its backward; then it
 * runs its math through the table of that device:
 *
 *     const AcKernels *k = kernels_for(t);
 *     if (!k->fill) return kernel_missing("fill_", t);
 *     return k->fill(t, value);
 *
 * kernels/cpu/ fills the CPU table; kernels/cuda/ fills the CUDA one in builds
 * with CUDA. An entry a device leaves NULL is an op with no kernel there: the
 * op fails with AC_ERR_DEVICE, never copies to the CPU. Adding an op's kernel
 * for a device is one function in that device's file and one line in its table.
 *
 * Entries take raw pointers and sizes (or the tensors, whose data lives on the
 * device). The op has checked the arguments before the call, so a CPU entry
 * cannot fail; a device's entry returns its launch's error (AC_ERR_DEVICE with
 * the runtime's message), else AC_OK.
 */
#ifndef AC_KERNELS_H
#define AC_KERNELS_H

#include "internal.h"

/* ---- elementwise.c: the map layout ------------------------------------------
   An elementwise op's operands laid over its output: size-1 dims dropped and
   dims that every operand walks contiguously merged, so same-shape and scalar
   operands become one flat run (ndim 1). in[k] steps strides[k][d] along dim d
   (0 where it is broadcast). Binary forwards take in[0], in[1]; a backward
   takes grad_out as in[0], which has the output's shape; unary forms take
   every operand in the output's shape. */
#define AC_MAP_MAX_IN 4

typedef struct AcMap {
    int n_in;
    const float *in[AC_MAP_MAX_IN];
    float *out;
    int64_t size;                      /* elements of out, > 0 */
    int ndim;                          /* the iteration space after merging */
    int64_t shape[AC_MAX_DIMS];
    int64_t strides[AC_MAP_MAX_IN][AC_MAX_DIMS];
    float p0, p1;                      /* the op's scalars: s, p, or clamp's lo and hi */
} AcMap;

typedef int (*AcMapFn)(const AcMap *m);

typedef struct AcKernels {
    /* tensor.c */
    int (*copy)(void *dst, const void *src, size_t bytes);    /* within the device; may overlap */
    int (*fill)(AcTensor *t, double value);                   /* every element, in t's dtype */
    /* autograd.c */
    int (*add_into)(float *dst, const float *src, int64_t n);  /* dst += src: a leaf's grad */

    /* elementwise.c: out = f(in...) over an AcMap; u, v are in[0], in[1] */
    AcMapFn add, sub, mul, div, pow;   /* u + v, u - v, u * v, u / v, powf(u, v) */
    AcMapFn div_backward_b;            /* -g * out / b          in: g, out, b */
    AcMapFn pow_backward_base;         /* g * b * a^(b-1); 0 where b == 0   in: g, a, b */
    AcMapFn pow_backward_exp;          /* g * out * log(a); 0 where a == 0, b >= 0   in: g, out, a, b */
    AcMapFn add_scalar, mul_scalar;    /* u + p0, u * p0 */
    AcMapFn rsub_scalar, div_scalar;   /* p0 - u, u / p0 */
    AcMapFn rdiv_scalar, pow_scalar;   /* p0 / u, powf(u, p0) */
    AcMapFn clamp;                     /* min(max(u, p0), p1); NaN passes */
    AcMapFn neg, exp, log, log1p, sqrt, abs, sin, cos;
    AcMapFn rdiv_scalar_backward;      /* -g * p0 / a^2         in: g, a */
    AcMapFn pow_scalar_backward;       /* g * p0 * a^(p0-1)     in: g, a */
    AcMapFn clamp_backward;            /* g where p0 <= a <= p1 in: g, a */
    AcMapFn log1p_backward;            /* g / (1 + a)           in: g, a */
    AcMapFn sqrt_backward;             /* g / (2 out)           in: g, out */
    AcMapFn abs_backward;              /* g * sign(a)           in: g, a */
    AcMapFn sin_backward;              /* g * cos(a)            in: g, a */
    AcMapFn cos_backward;              /* -g * sin(a)           in: g, a */

    /* activation.c: n > 0 elements; backward's y is the output (relu, sigmoid,
       tanh) or the input (gelu); softmax runs over rows of n steps, each step
       inner apart (the tensor seen as (rows, n, inner)) */
    int (*relu)(const float *x, float *out, int64_t n);
    int (*sigmoid)(const float *x, float *out, int64_t n);
    int (*tanh)(const float *x, float *out, int64_t n);
    int (*gelu)(const float *x, float *out, int64_t n);
    int (*relu_backward)(const float *g, const float *y, float *out, int64_t n);
    int (*sigmoid_backward)(const float *g, const float *y, float *out, int64_t n);
    int (*tanh_backward)(const float *g, const float *y, float *out, int64_t n);
    int (*gelu_backward)(const float *g, const float *x, float *out, int64_t n);
    int (*softmax)(const float *x, float *out, int64_t rows, int64_t n, int64_t inner);
    int (*log_softmax)(const float *x, float *out, int64_t rows, int64_t n, int64_t inner);
    int (*softmax_backward)(const float *y, const float *g, float *out, int64_t rows, int64_t n,
                            int64_t inner);
    int (*log_softmax_backward)(const float *y, const float *g, float *out, int64_t rows,
                                int64_t n, int64_t inner);

    /* dropout.c: x as blocks of block elements, each kept (times scale) when a
       draw from the calling thread's generator is >= p, else zeroed; keep (host
       memory, the node's context; NULL without a graph) gets 1 or 0 per block */
    int (*dropout)(const float *x, float *out, uint8_t *keep, int64_t blocks, int64_t block,
                   float p, float scale);
    int (*dropout_backward)(const float *g, float *gin, const uint8_t *keep, int64_t blocks,
                            int64_t block, float scale);
} AcKernels;

extern const AcKernels ac_cpu_kernels;
#ifdef AC_HAVE_CUDA
extern const AcKernels ac_cuda_kernels;
#endif

/* The table of t's device; a table of NULL entries for a device this build
   has no backend for (no tensor can live there, but a caller may say so). */
const AcKernels *kernels_for(const AcTensor *t);
/* AC_ERR_DEVICE: "op: no kernel for cuda:0"; returns the error code. */
int kernel_missing(const char *op, const AcTensor *t);

#endif /* AC_KERNELS_H */
