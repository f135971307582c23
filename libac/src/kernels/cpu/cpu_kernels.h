/*
 * cpu_kernels.h - the functions of the CPU's kernel table (table.c), declared
 * by the file that defines them.
 */
#ifndef AC_CPU_KERNELS_H
#define AC_CPU_KERNELS_H

#include "kernels/kernels.h"

/* cpu/tensor.c */
int cpu_copy(void *dst, const void *src, size_t bytes);
int cpu_fill(AcTensor *t, double value);

/* cpu/matmul.c, cpu/linear.c */
int cpu_matmul(const MatmulShape *s, const float *a, const float *b, float *out);
int cpu_matmul_grad(const MatmulShape *s, const float *a, const float *b, const float *gout,
                    float *grad, int of_b);
int cpu_linear(int64_t rows, int64_t in, int64_t out, const float *x, const float *w,
               const float *bias, float *y);
int cpu_linear_backward(int64_t rows, int64_t in, int64_t out, const float *x, const float *w,
                        const float *gy, float *dx, float *dw, float *db);
/* cpu/conv.c */
int cpu_conv2d(const ConvShape *s, const float *x, const float *w, const float *bias, float *out);
int cpu_conv2d_backward(const ConvShape *s, const float *x, const float *w, const float *gy,
                        float *dx, float *dw, float *db);
/* cpu/pool.c */
int cpu_max_pool2d(const PoolGeom *g, const float *x, float *y, int32_t *argmax);
int cpu_max_pool2d_backward(const PoolGeom *g, const float *gy, const int32_t *argmax, float *dx);
int cpu_avg_pool2d(const PoolGeom *g, const float *x, float *y);
int cpu_avg_pool2d_backward(const PoolGeom *g, const float *gy, float *dx);
/* cpu/norm.c */
int cpu_batch_norm(const BatchNormArgs *a);
int cpu_batch_norm_backward(const BatchNormArgs *a);
int cpu_layer_norm(const LayerNormArgs *a);
int cpu_layer_norm_backward(const LayerNormArgs *a);
/* cpu/embedding.c */
int cpu_embedding_bad_id(const AcTensor *ids, int64_t rows, int64_t *position, double *id);
int cpu_embedding(const AcTensor *ids, const float *weight, int64_t dim, float *out);
int cpu_embedding_backward(const AcTensor *ids, const float *gout, int64_t dim,
                           int64_t padding_idx, float *dw);
/* cpu/optim.c */
int cpu_sgd_step(const SgdArgs *args, int count, float *const *params, const float *const *grads,
                 float *const *momentum, const int64_t *sizes);
int cpu_adam_step(const AdamArgs *args, int count, float *const *params, const float *const *grads,
                  float *const *exp_avg, float *const *exp_avg_sq, const int64_t *sizes);

#endif /* AC_CPU_KERNELS_H */
