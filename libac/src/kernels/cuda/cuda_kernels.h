/*
 * cuda_kernels.h - the functions of the CUDA kernel table (table.cu), declared
 * by the .cu file that defines them, and what those files share: the launch
 * shape and the stream.
 *
 * A kernel runs on the stream of the calling thread's current device, which
 * making the op's output made current (device_alloc). Entries return AC_OK or
 * the launch's error (AC_ERR_DEVICE, naming the op).
 */
#ifndef AC_CUDA_KERNELS_H
#define AC_CUDA_KERNELS_H

extern "C" {
#include "kernels/kernels.h"
#include "kernels/cpu/cpu_kernels.h"   /* cpu_dropout_uniforms: the mask is the CPU's */
#include "kernels/cuda/runtime.h"
}

#include <cuda_runtime.h>

#define CUDA_THREADS 256

/* Blocks of CUDA_THREADS for n elements (grid-stride loops cover the rest). */
static inline unsigned cuda_blocks(int64_t n)
{
    int64_t b = (n + CUDA_THREADS - 1) / CUDA_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

static inline cudaStream_t current_stream(void) { return (cudaStream_t)cuda_current_stream(); }

/* tensor.cu */
int cuda_copy(void *dst, const void *src, size_t bytes);
int cuda_fill(AcTensor *t, double value);
int cuda_add_into(float *dst, const float *src, int64_t n);

/* elementwise.cu */
int cuda_add(const AcMap *m);
int cuda_sub(const AcMap *m);
int cuda_mul(const AcMap *m);
int cuda_div(const AcMap *m);
int cuda_pow(const AcMap *m);
int cuda_div_backward_b(const AcMap *m);
int cuda_pow_backward_base(const AcMap *m);
int cuda_pow_backward_exp(const AcMap *m);
int cuda_add_scalar(const AcMap *m);
int cuda_mul_scalar(const AcMap *m);
int cuda_rsub_scalar(const AcMap *m);
int cuda_div_scalar(const AcMap *m);
int cuda_rdiv_scalar(const AcMap *m);
int cuda_pow_scalar(const AcMap *m);
int cuda_clamp(const AcMap *m);
int cuda_neg(const AcMap *m);
int cuda_exp(const AcMap *m);
int cuda_log(const AcMap *m);
int cuda_log1p(const AcMap *m);
int cuda_sqrt(const AcMap *m);
int cuda_abs(const AcMap *m);
int cuda_sin(const AcMap *m);
int cuda_cos(const AcMap *m);
int cuda_rdiv_scalar_backward(const AcMap *m);
int cuda_pow_scalar_backward(const AcMap *m);
int cuda_clamp_backward(const AcMap *m);
int cuda_log1p_backward(const AcMap *m);
int cuda_sqrt_backward(const AcMap *m);
int cuda_abs_backward(const AcMap *m);
int cuda_sin_backward(const AcMap *m);
int cuda_cos_backward(const AcMap *m);

/* activation.cu */
int cuda_relu(const float *x, float *out, int64_t n);
int cuda_sigmoid(const float *x, float *out, int64_t n);
int cuda_tanh(const float *x, float *out, int64_t n);
int cuda_gelu(const float *x, float *out, int64_t n);
int cuda_relu_backward(const float *g, const float *y, float *out, int64_t n);
int cuda_sigmoid_backward(const float *g, const float *y, float *out, int64_t n);
int cuda_tanh_backward(const float *g, const float *y, float *out, int64_t n);
int cuda_gelu_backward(const float *g, const float *x, float *out, int64_t n);
int cuda_softmax(const float *x, float *out, int64_t rows, int64_t n, int64_t inner);
int cuda_log_softmax(const float *x, float *out, int64_t rows, int64_t n, int64_t inner);
int cuda_softmax_backward(const float *y, const float *g, float *out, int64_t rows, int64_t n, int64_t inner);
int cuda_log_softmax_backward(const float *y, const float *g, float *out, int64_t rows, int64_t n,
                              int64_t inner);

/* dropout.cu */
int cuda_dropout(const float *x, float *out, uint8_t *keep, int64_t blocks, int64_t block, float p,
                 float scale);
int cuda_dropout_backward(const float *g, float *gin, const uint8_t *keep, int64_t blocks, int64_t block,
                          float scale);

/* gemm.cu */
int cuda_matmul(const MatmulShape *s, const float *a, const float *b, float *out);
int cuda_matmul_grad(const MatmulShape *s, const float *a, const float *b, const float *gout, float *grad,
                     int of_b);
int cuda_linear(int64_t rows, int64_t in, int64_t out, const float *x, const float *w, const float *bias,
                float *y);
int cuda_linear_backward(int64_t rows, int64_t in, int64_t out, const float *x, const float *w, const float *gy,
                         float *dx, float *dw, float *db);

/* conv.cu */
int cuda_conv2d(const ConvShape *s, const float *x, const float *w, const float *bias, float *out);
int cuda_conv2d_backward(const ConvShape *s, const float *x, const float *w, const float *gy, float *dx, float *dw,
                         float *db);

/* pool.cu */
int cuda_max_pool2d(const PoolGeom *g, const float *x, float *y, int32_t *argmax);
int cuda_max_pool2d_backward(const PoolGeom *g, const float *gy, const int32_t *argmax, float *dx);
int cuda_avg_pool2d(const PoolGeom *g, const float *x, float *y);
int cuda_avg_pool2d_backward(const PoolGeom *g, const float *gy, float *dx);

/* loss.cu */
int cuda_mse_loss(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction, float beta);
int cuda_l1_loss(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction, float beta);
int cuda_smooth_l1_loss(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction, float beta);
int cuda_binary_cross_entropy(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction,
                              float beta);
int cuda_bce_with_logits(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction, float beta);
int cuda_mse_loss_backward(const AcTensor *input, const AcTensor *target, const AcTensor *gout, AcTensor *gx,
                           AcTensor *gt, int reduction, float beta);
int cuda_l1_loss_backward(const AcTensor *input, const AcTensor *target, const AcTensor *gout, AcTensor *gx,
                          AcTensor *gt, int reduction, float beta);
int cuda_smooth_l1_loss_backward(const AcTensor *input, const AcTensor *target, const AcTensor *gout, AcTensor *gx,
                                 AcTensor *gt, int reduction, float beta);
int cuda_binary_cross_entropy_backward(const AcTensor *input, const AcTensor *target, const AcTensor *gout,
                                       AcTensor *gx, AcTensor *gt, int reduction, float beta);
int cuda_bce_with_logits_backward(const AcTensor *input, const AcTensor *target, const AcTensor *gout, AcTensor *gx,
                                  AcTensor *gt, int reduction, float beta);
int cuda_cross_entropy(const AcTensor *logits, const AcTensor *target, AcTensor *out, int reduction, float smoothing,
                       int64_t *ids, float *probs);
int cuda_cross_entropy_backward(const AcTensor *logits, const int64_t *ids, const float *probs, const AcTensor *gout, AcTensor *gin,
                                int reduction, float smoothing);

/* optim.cu */
int cuda_sgd_step(const SgdArgs *args, int count, float *const *params, const float *const *grads,
                  float *const *momentum, const int64_t *sizes);
int cuda_adam_step(const AdamArgs *args, int count, float *const *params, const float *const *grads,
                   float *const *exp_avg, float *const *exp_avg_sq, const int64_t *sizes);

#endif /* AC_CUDA_KERNELS_H */
