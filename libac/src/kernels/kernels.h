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
 * cannot fail, save those that check input data (binary_cross_entropy's
 * probabilities, cross_entropy's class indices: the data is the device's to
 * read) and conv2d's, which takes scratch memory; a device's entry returns its
 * launch's error (AC_ERR_DEVICE with the runtime's message), else AC_OK.
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

/* The unary ops of the typed path (typed_map), after AcBinaryOp's codes. */
enum { TYPED_NEG = 64, TYPED_ABS, TYPED_BITWISE_NOT, TYPED_SIGN };

/* ---- compare.c: up to three operands broadcast to the output's shape, and
   their strides in it (0 along broadcast dims); not merged */
typedef struct AcBroadcast {
    int64_t shape[AC_MAX_DIMS];
    int ndim;
    int64_t strides[3][AC_MAX_DIMS];
} AcBroadcast;

/* ---- reduce.c: the input's dims with size-1 dims dropped and neighbours of
   one kind (reduced or kept) merged: an alternation of kept and reduced
   groups, the last contiguous. The output holds the kept groups in order. */
typedef struct AcReduceGroups {
    int n;
    int64_t size[AC_MAX_DIMS];
    int64_t stride[AC_MAX_DIMS];      /* in the input's elements */
    int64_t out_stride[AC_MAX_DIMS];  /* in the output's elements; 0 for reduced groups */
    int reduced[AC_MAX_DIMS];
} AcReduceGroups;

/* ---- loss.c: an elementwise loss and its backward (beta: smooth_l1_loss's) */
typedef int (*AcLossFn)(const AcTensor *input, const AcTensor *target, AcTensor *out,
                        int reduction, float beta);
typedef int (*AcLossGradFn)(const AcTensor *input, const AcTensor *target, const AcTensor *gout,
                            AcTensor *gx, AcTensor *gt, int reduction, float beta);
/* ---- what matmul.c, conv.c, pool.c, norm.c and optim/ hand to their kernels ---- */

/* matmul: a batch of (n x k) @ (k x m) products. Output batch t multiplies a's
   matrix matmul_batch_matrix(s, s->a_stride, t) by b's, strides counted in
   matrices and 0 where the operand is broadcast. */
typedef struct {
    int64_t n, k, m;
    int batch_ndim;
    int64_t batch_shape[AC_MAX_DIMS];
    int64_t a_stride[AC_MAX_DIMS];
    int64_t b_stride[AC_MAX_DIMS];
    int64_t batches, a_matrices, b_matrices;
} MatmulShape;

/* Which of an operand's matrices output batch t uses. */
static inline int64_t matmul_batch_matrix(const MatmulShape *s, const int64_t *strides, int64_t t)
{
    int64_t index = 0;
    int i;
    for (i = s->batch_ndim - 1; i >= 0; i--) {
        index += (t % s->batch_shape[i]) * strides[i];
        t /= s->batch_shape[i];
    }
    return index;
}

/* conv2d on NCHW: x (n, c, h, w), weight (f, c/groups, kh, kw), out (n, f, oh, ow). */
typedef struct {
    int64_t n, c, h, w, f, kh, kw, oh, ow;
    int64_t sh, sw, ph, pw, dh, dw, groups;
} ConvShape;

/* Pooling: planes of h x w pooled to oh x ow by windows kh x kw, stride,
   padding and dilation dh x dw; kh == 0 means adaptive windows (average, or
   max on the CPU). Dilation other than 1 is the CPU's only. */
typedef struct {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw;
    int64_t dh, dw;
} PoolGeom;

/* resample.c: x read as (outer, in, inner) becomes y (outer, out, inner);
   y[o, j, :] = sum over t < taps of weight[j * taps + t] * x[o, index[j * taps + t], :],
   fill where the index is -1 (weight NULL: each weight 1). With taps 1 and no
   weight it is a copy of elem_size-byte elements of any dtype (fill_bytes the
   fill in x's dtype); else float32. */
typedef struct {
    int64_t outer, in, out, inner;
    int taps;
    size_t elem_size;
    const int64_t *index;
    const float *weight;
    float fill;
    const void *fill_bytes;
} ResampleArgs;

/* batch_norm over x as (n, c, s). Forward writes y and the per-channel mean
   and invstd (and updates running_* in training when they are given);
   backward reads mean and invstd and writes whichever of dx, dweight, dbias
   is not NULL. */
typedef struct {
    int64_t n, c, s;
    const float *x, *gy, *weight, *bias;
    float *y, *dx, *dweight, *dbias;
    float *mean, *invstd;
    float *running_mean, *running_var;
    int training;
    float momentum, eps;
} BatchNormArgs;

/* layer_norm over x as (rows, cols): the same, with per-row statistics and a
   per-column weight and bias. */
typedef struct {
    int64_t rows, cols;
    const float *x, *gy, *weight, *bias;
    float *y, *dx, *dweight, *dbias, *mean, *invstd;
    float eps;
} LayerNormArgs;

/* One SGD step's settings, as torch.optim.SGD takes them. */
typedef struct {
    float lr, momentum, dampening, weight_decay;
    int nesterov, first_step;
} SgdArgs;

/* One Adam step's settings, with the bias corrections of this step. */
typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    double bias_correction1, bias_correction2;
    int decoupled;   /* AdamW */
} AdamArgs;

typedef struct AcKernels {
    /* ops/tensor.c */
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
    /* elementwise.c's typed path (cpu/integer.c): out = op(in...) where op is an
       AcBinaryOp (two inputs) or a TypedUnary (one). Each input is read as
       in_dtype[k] and converted to out_dtype first (integers wrap into a narrower
       type; bool is != 0), then computed in out_dtype: int64, uint8 and int8
       wrap on overflow, bool add/mul/max/min are or/and. float32 serves
       floor_divide, remainder, maximum and minimum (no graph). The op has
       checked that op suits out_dtype and that no integer divisor is 0. */
    int (*typed_map)(const AcMap *m, const int *in_dtype, int out_dtype, int op);
    /* reduce.c's integer max/min along a dim (cpu/integer.c): a (int64, uint8,
       int8 or bool) seen as (outer, n, inner), n > 0; values (a's dtype) and
       indices (the first extreme) may each be NULL. */
    int (*int_extreme)(const AcTensor *a, int want_max, void *values, int64_t *indices, int64_t outer,
                       int64_t n, int64_t inner);
    /* matmul.c's integer product (cpu/integer.c): out = a @ b, all three of
       one dtype (int64 or uint8), wrapping on overflow as integers do. */
    int (*int_matmul)(const MatmulShape *s, const AcTensor *a, const AcTensor *b, AcTensor *out);

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

    /* compare.c: out (bool) = a <op> b (AC_EQ..AC_GE), or a <op> s when b is
       NULL; logical: AC_AND..AC_XOR; operands of any dtype, compared as
       numbers; plan's strides: a, b. where: out = cond ? a : b, plan's
       strides a, b, cond; its backward: g = gout where cond == picked_when,
       else 0, plan's strides gout, cond */
    int (*compare)(AcTensor *out, const AcTensor *a, const AcTensor *b, double s, int op,
                   const AcBroadcast *plan);
    int (*logical)(AcTensor *out, const AcTensor *a, const AcTensor *b, int op,
                   const AcBroadcast *plan);
    int (*where)(AcTensor *out, const AcTensor *cond, const AcTensor *a, const AcTensor *b,
                 const AcBroadcast *plan);
    int (*where_backward)(AcTensor *g, const AcTensor *gout, const AcTensor *cond, int picked_when,
                          const AcBroadcast *plan);

    /* loss.c: out gets the terms (AC_REDUCTION_NONE) or their mean or sum (one
       value). Backward: gx and gt (either may be NULL: no gradient wanted)
       from gout, one value per element or one for all. binary_cross_entropy
       checks every input is in [0, 1], and cross_entropy that every target
       is a class index, before writing: AC_ERR_ARG or AC_ERR_INDEX naming the
       first that is not. cross_entropy: logits (N, C) or (C,), target (N,) or
       a scalar of int64 or float32 class ids; ids (int64, N) and saved (CUDA:
       the softmax, N x C + N floats; the CPU: each row's 1 / sum of exps and
       max, 2 N) are where it keeps what its backward needs, or NULL. Its
       backward gets the logits too. */
    AcLossFn mse_loss, l1_loss, smooth_l1_loss, binary_cross_entropy, bce_with_logits;
    AcLossGradFn mse_loss_backward, l1_loss_backward, smooth_l1_loss_backward;
    AcLossGradFn binary_cross_entropy_backward, bce_with_logits_backward;
    int (*cross_entropy)(const AcTensor *logits, const AcTensor *target, AcTensor *out,
                         int reduction, float smoothing, int64_t *ids, float *saved);
    int (*cross_entropy_backward)(const AcTensor *logits, const int64_t *ids, const float *saved,
                                  const AcTensor *gout, AcTensor *gin, int reduction,
                                  float smoothing);

    /* reduce.c: x over g's reduced groups into out (> 0 elements), summed in
       double: the same bits for any thread count. mean of nothing is NaN; max
       and min propagate NaN; var and std divide by N - correction. Backward:
       gin (the input's shape) from gout; work (and means) are scratch of the
       output's shape. sum_backward spreads gout * scale (1, or 1/N for the
       mean); extreme_backward (max and min) splits it among the inputs that
       tie for the extreme. sum_integer: the exact int64 sum of an int64 or
       bool a over the dims in mask. max_dim/min_dim: x seen as (outer, n,
       inner), reduced over n: the first extreme (values and indices may be
       NULL); their backward zeroes gin and puts gout at that index. */
    int (*sum)(const float *x, float *out, const AcReduceGroups *g);
    int (*mean)(const float *x, float *out, const AcReduceGroups *g);
    int (*max)(const float *x, float *out, const AcReduceGroups *g);
    int (*min)(const float *x, float *out, const AcReduceGroups *g);
    int (*var)(const float *x, float *out, const AcReduceGroups *g, int64_t correction);
    int (*std)(const float *x, float *out, const AcReduceGroups *g, int64_t correction);
    int (*sum_backward)(const AcTensor *gout, float scale, AcTensor *work, AcTensor *gin,
                        const AcReduceGroups *g);
    int (*extreme_backward)(const AcTensor *a, const AcTensor *out, const AcTensor *gout,
                            AcTensor *work, AcTensor *gin, const AcReduceGroups *g);
    int (*var_backward)(const AcTensor *a, const AcTensor *out, const AcTensor *gout,
                        AcTensor *work, AcTensor *means, AcTensor *gin, const AcReduceGroups *g,
                        int64_t correction);
    int (*std_backward)(const AcTensor *a, const AcTensor *out, const AcTensor *gout,
                        AcTensor *work, AcTensor *means, AcTensor *gin, const AcReduceGroups *g,
                        int64_t correction);
    int (*sum_integer)(const AcTensor *a, AcTensor *out, unsigned mask);
    int (*max_dim)(const float *x, float *values, int64_t *indices, int64_t outer, int64_t n,
                   int64_t inner);
    int (*min_dim)(const float *x, float *values, int64_t *indices, int64_t outer, int64_t n,
                   int64_t inner);
    int (*max_dim_backward)(const float *x, const float *gout, float *gin, int64_t outer,
                            int64_t n, int64_t inner);
    int (*min_dim_backward)(const float *x, const float *gout, float *gin, int64_t outer,
                            int64_t n, int64_t inner);
    /* matmul.c: out = a @ b; the gradient of a (of_b 0) or b (1) from gout */
    int (*matmul)(const MatmulShape *s, const float *a, const float *b, float *out);
    int (*matmul_grad)(const MatmulShape *s, const float *a, const float *b, const float *gout,
                       float *grad, int of_b);
    /* linear.c: y (rows, out) = x (rows, in) W^T + bias (NULL: none); backward
       writes whichever of dx, dw, db is not NULL */
    int (*linear)(int64_t rows, int64_t in, int64_t out, const float *x, const float *w,
                  const float *bias, float *y);
    int (*linear_backward)(int64_t rows, int64_t in, int64_t out, const float *x, const float *w,
                           const float *gy, float *dx, float *dw, float *db);
    /* conv.c: backward writes whichever of dx, dw, db is not NULL */
    int (*conv2d)(const ConvShape *s, const float *x, const float *w, const float *bias,
                  float *out);
    int (*conv2d_backward)(const ConvShape *s, const float *x, const float *w, const float *gy,
                           float *dx, float *dw, float *db);
    /* pool.c: argmax (NULL: not kept) is each output's window maximum as an
       index into its plane; avg_pool2d is adaptive when g->kh == 0 */
    int (*max_pool2d)(const PoolGeom *g, const float *x, float *y, int32_t *argmax);
    int (*max_pool2d_backward)(const PoolGeom *g, const float *gy, const int32_t *argmax,
                               float *dx);
    int (*avg_pool2d)(const PoolGeom *g, const float *x, float *y);
    int (*avg_pool2d_backward)(const PoolGeom *g, const float *gy, float *dx);
    /* resample.c: y from x; backward: dx from gy (float32) */
    int (*resample)(const ResampleArgs *a, const void *x, void *y);
    int (*resample_backward)(const ResampleArgs *a, const float *gy, float *dx);
    /* norm.c */
    int (*batch_norm)(const BatchNormArgs *a);
    int (*batch_norm_backward)(const BatchNormArgs *a);
    int (*layer_norm)(const LayerNormArgs *a);
    int (*layer_norm_backward)(const LayerNormArgs *a);
    /* embedding.c: ids (int64 or whole float32 values) pick rows of weight
       (.., dim); embedding_bad_id finds the first id that is not an integer
       in [0, rows) (*position -1: none) */
    int (*embedding_bad_id)(const AcTensor *ids, int64_t rows, int64_t *position, double *id);
    int (*embedding)(const AcTensor *ids, const float *weight, int64_t dim, float *out);
    int (*embedding_backward)(const AcTensor *ids, const float *gout, int64_t dim,
                              int64_t padding_idx, float *dw);
    /* pointwise.c: unary op (AcPointwise) over n floats, p its three scalars;
       backward from grad_out g, the input x and the output y. pointwise_test
       writes bool out for any dtype of a; pointwise_integer the integer forms
       (out of a's shape and the op's dtype; p as pointwise's); pointwise2 the binary ops
       (AcPointwise2) over plan, float32 or integer (fmod by zero: AC_ERR_ARG),
       and its backward the full-shape gradients (ga or gb NULL: not wanted). */
    int (*pointwise)(int op, const float *x, float *out, int64_t n, const float *p);
    int (*pointwise_backward)(int op, const float *g, const float *x, const float *y, float *out,
                              int64_t n, const float *p);
    int (*pointwise_test)(int op, const AcTensor *a, AcTensor *out);
    int (*pointwise_integer)(int op, const AcTensor *a, AcTensor *out, const float *p);
    int (*pointwise2)(int op, const AcTensor *a, const AcTensor *b, AcTensor *out,
                      const AcBroadcast *plan);
    int (*pointwise2_backward)(int op, const AcTensor *a, const AcTensor *b, const AcTensor *out,
                               const AcTensor *gout, AcTensor *ga, AcTensor *gb,
                               const AcBroadcast *plan);
    /* optim/: one step for count parameters; param i has sizes[i] elements,
       grads[i] and its state (momentum NULL when args->momentum is 0) */
    int (*sgd_step)(const SgdArgs *args, int count, float *const *params,
                    const float *const *grads, float *const *momentum, const int64_t *sizes);
    int (*adam_step)(const AdamArgs *args, int count, float *const *params,
                     const float *const *grads, float *const *exp_avg, float *const *exp_avg_sq,
                     const int64_t *sizes);
    /* optim/grad_norm.c: *out = the sum of |x[i]|^p over i < n in double, or for
       p = inf the largest |x[i]| (NaN when one is NaN), the same for any thread count */
    int (*norm_power_sum)(const float *x, int64_t n, double p, double *out);
    /* x[i] *= s for i < n, in place (the clipping's scale) */
    int (*scale)(float *x, int64_t n, float s);
} AcKernels;

extern const AcKernels ac_cpu_kernels;
#ifdef AC_HAVE_CUDA
extern const AcKernels ac_cuda_kernels;
#endif

/* The table of t's device; a table of NULL entries for a device this build
   has no backend for (no tensor can live there, but a caller may say so). */
const AcKernels *kernels_for(const AcTensor *t);

#endif /* AC_KERNELS_H */
