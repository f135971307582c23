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
 * cannot fail (but for scratch memory: conv2d's); a device's entry returns its
 * launch's error (AC_ERR_DEVICE with the runtime's message), else AC_OK.
 */
#ifndef AC_KERNELS_H
#define AC_KERNELS_H

#include "internal.h"

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

/* Pooling: planes of h x w pooled to oh x ow by windows kh x kw, stride and
   padding; kh == 0 means adaptive average windows. */
typedef struct {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw;
} PoolGeom;

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
    /* tensor.c */
    int (*copy)(void *dst, const void *src, size_t bytes);    /* within the device; may overlap */
    int (*fill)(AcTensor *t, double value);                   /* every element, in t's dtype */
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
    /* optim/: one step for count parameters; param i has sizes[i] elements,
       grads[i] and its state (momentum NULL when args->momentum is 0) */
    int (*sgd_step)(const SgdArgs *args, int count, float *const *params,
                    const float *const *grads, float *const *momentum, const int64_t *sizes);
    int (*adam_step)(const AdamArgs *args, int count, float *const *params,
                     const float *const *grads, float *const *exp_avg, float *const *exp_avg_sq,
                     const int64_t *sizes);
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
/* For an op with no table entries, which reads its tensors' data on the host:
   AC_OK when each of the n tensors is on the CPU (or NULL), else
   kernel_missing for the first that is not. Called once per op, before it
   touches data:  if (cpu_only(op, (const AcTensor *[]){x, h0}, 2)) ... */
int cpu_only(const char *op, const AcTensor *const *tensors, int n);
/* For a tensor an op reads or writes beside its inputs (running statistics,
   optimizer state): AC_OK when b is NULL or on a's device, else the error of
   inputs on two devices. */
int same_device(const char *op, const AcTensor *a, const AcTensor *b);

#endif /* AC_KERNELS_H */
