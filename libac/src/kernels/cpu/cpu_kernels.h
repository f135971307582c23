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
int cpu_add_into(float *dst, const float *src, int64_t n);

/* cpu/elementwise.c */
int cpu_add(const AcMap *m);
int cpu_sub(const AcMap *m);
int cpu_mul(const AcMap *m);
int cpu_div(const AcMap *m);
int cpu_pow(const AcMap *m);
int cpu_div_backward_b(const AcMap *m);
int cpu_pow_backward_base(const AcMap *m);
int cpu_pow_backward_exp(const AcMap *m);
int cpu_add_scalar(const AcMap *m);
int cpu_mul_scalar(const AcMap *m);
int cpu_rsub_scalar(const AcMap *m);
int cpu_div_scalar(const AcMap *m);
int cpu_rdiv_scalar(const AcMap *m);
int cpu_pow_scalar(const AcMap *m);
int cpu_clamp(const AcMap *m);
int cpu_neg(const AcMap *m);
int cpu_exp(const AcMap *m);
int cpu_log(const AcMap *m);
int cpu_log1p(const AcMap *m);
int cpu_sqrt(const AcMap *m);
int cpu_abs(const AcMap *m);
int cpu_sin(const AcMap *m);
int cpu_cos(const AcMap *m);
int cpu_rdiv_scalar_backward(const AcMap *m);
int cpu_pow_scalar_backward(const AcMap *m);
int cpu_clamp_backward(const AcMap *m);
int cpu_log1p_backward(const AcMap *m);
int cpu_sqrt_backward(const AcMap *m);
int cpu_abs_backward(const AcMap *m);
int cpu_sin_backward(const AcMap *m);
int cpu_cos_backward(const AcMap *m);

/* cpu/activation.c */
int cpu_relu(const float *x, float *out, int64_t n);
int cpu_sigmoid(const float *x, float *out, int64_t n);
int cpu_tanh(const float *x, float *out, int64_t n);
int cpu_gelu(const float *x, float *out, int64_t n);
int cpu_relu_backward(const float *g, const float *y, float *out, int64_t n);
int cpu_sigmoid_backward(const float *g, const float *y, float *out, int64_t n);
int cpu_tanh_backward(const float *g, const float *y, float *out, int64_t n);
int cpu_gelu_backward(const float *g, const float *x, float *out, int64_t n);
int cpu_softmax(const float *x, float *out, int64_t rows, int64_t n, int64_t inner);
int cpu_log_softmax(const float *x, float *out, int64_t rows, int64_t n, int64_t inner);
int cpu_softmax_backward(const float *y, const float *g, float *out, int64_t rows, int64_t n,
                         int64_t inner);
int cpu_log_softmax_backward(const float *y, const float *g, float *out, int64_t rows, int64_t n,
                             int64_t inner);

/* cpu/pointwise.c */
int cpu_pointwise(int op, const float *x, float *out, int64_t n, const float *p);
int cpu_pointwise_backward(int op, const float *g, const float *x, const float *y, float *out,
                           int64_t n, const float *p);
int cpu_pointwise_test(int op, const AcTensor *a, AcTensor *out);
int cpu_pointwise_integer(int op, const AcTensor *a, AcTensor *out, const float *p);
int cpu_pointwise2(int op, const AcTensor *a, const AcTensor *b, AcTensor *out,
                   const AcBroadcast *plan);
int cpu_pointwise2_backward(int op, const AcTensor *a, const AcTensor *b, const AcTensor *out,
                            const AcTensor *gout, AcTensor *ga, AcTensor *gb,
                            const AcBroadcast *plan);

/* cpu/dropout.c */
int cpu_dropout(const float *x, float *out, uint8_t *keep, int64_t blocks, int64_t block, float p,
                float scale);
int cpu_dropout_backward(const float *g, float *gin, const uint8_t *keep, int64_t blocks,
                         int64_t block, float scale);
/* The n uniforms that dropout over n one-element blocks compares with p, drawn the
   same way: the mlir backend's masks (native.c) are the op's. */
void cpu_dropout_uniforms(float *out, int64_t n);

/* cpu/integer.c */
int cpu_typed_map(const AcMap *m, const int *in_dtype, int out_dtype, int op);
int cpu_int_extreme(const AcTensor *a, int want_max, void *values, int64_t *indices, int64_t outer,
                    int64_t n, int64_t inner);
int cpu_int_matmul(const MatmulShape *s, const AcTensor *a, const AcTensor *b, AcTensor *out);

/* cpu/compare.c */
int cpu_compare(AcTensor *out, const AcTensor *a, const AcTensor *b, double s, int op,
                const AcBroadcast *plan);
int cpu_logical(AcTensor *out, const AcTensor *a, const AcTensor *b, int op,
                const AcBroadcast *plan);
int cpu_where(AcTensor *out, const AcTensor *cond, const AcTensor *a, const AcTensor *b,
              const AcBroadcast *plan);
int cpu_where_backward(AcTensor *g, const AcTensor *gout, const AcTensor *cond, int picked_when,
                       const AcBroadcast *plan);

/* cpu/loss.c */
int cpu_mse_loss(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction,
                 float beta);
int cpu_mse_loss_backward(const AcTensor *input, const AcTensor *target, const AcTensor *gout,
                          AcTensor *gx, AcTensor *gt, int reduction, float beta);
int cpu_l1_loss(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction,
                float beta);
int cpu_l1_loss_backward(const AcTensor *input, const AcTensor *target, const AcTensor *gout,
                         AcTensor *gx, AcTensor *gt, int reduction, float beta);
int cpu_smooth_l1_loss(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction,
                       float beta);
int cpu_smooth_l1_loss_backward(const AcTensor *input, const AcTensor *target, const AcTensor *gout,
                                AcTensor *gx, AcTensor *gt, int reduction, float beta);
int cpu_binary_cross_entropy(const AcTensor *input, const AcTensor *target, AcTensor *out,
                             int reduction, float beta);
int cpu_binary_cross_entropy_backward(const AcTensor *input, const AcTensor *target,
                                      const AcTensor *gout, AcTensor *gx, AcTensor *gt,
                                      int reduction, float beta);
int cpu_bce_with_logits(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction,
                        float beta);
int cpu_bce_with_logits_backward(const AcTensor *input, const AcTensor *target,
                                 const AcTensor *gout, AcTensor *gx, AcTensor *gt, int reduction,
                                 float beta);
int cpu_cross_entropy(const AcTensor *logits, const AcTensor *target, AcTensor *out,
                      int reduction, float smoothing, int64_t *ids, float *saved);
int cpu_cross_entropy_backward(const AcTensor *logits, const int64_t *ids, const float *saved,
                               const AcTensor *gout,
                               AcTensor *gin, int reduction, float smoothing);

/* cpu/reduce.c */
int cpu_sum(const float *x, float *out, const AcReduceGroups *g);
int cpu_mean(const float *x, float *out, const AcReduceGroups *g);
int cpu_max(const float *x, float *out, const AcReduceGroups *g);
int cpu_min(const float *x, float *out, const AcReduceGroups *g);
int cpu_var(const float *x, float *out, const AcReduceGroups *g, int64_t correction);
int cpu_std(const float *x, float *out, const AcReduceGroups *g, int64_t correction);
int cpu_sum_backward(const AcTensor *gout, float scale, AcTensor *work, AcTensor *gin,
                     const AcReduceGroups *g);
int cpu_extreme_backward(const AcTensor *a, const AcTensor *out, const AcTensor *gout,
                         AcTensor *work, AcTensor *gin, const AcReduceGroups *g);
int cpu_var_backward(const AcTensor *a, const AcTensor *out, const AcTensor *gout, AcTensor *work,
                     AcTensor *means, AcTensor *gin, const AcReduceGroups *g, int64_t correction);
int cpu_std_backward(const AcTensor *a, const AcTensor *out, const AcTensor *gout, AcTensor *work,
                     AcTensor *means, AcTensor *gin, const AcReduceGroups *g, int64_t correction);
int cpu_sum_integer(const AcTensor *a, AcTensor *out, unsigned mask);
int cpu_max_dim(const float *x, float *values, int64_t *indices, int64_t outer, int64_t n,
                int64_t inner);
int cpu_min_dim(const float *x, float *values, int64_t *indices, int64_t outer, int64_t n,
                int64_t inner);
int cpu_max_dim_backward(const float *x, const float *gout, float *gin, int64_t outer, int64_t n,
                         int64_t inner);
int cpu_min_dim_backward(const float *x, const float *gout, float *gin, int64_t outer, int64_t n,
                         int64_t inner);
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
/* cpu/resample.c */
int cpu_resample(const ResampleArgs *a, const void *x, void *y);
int cpu_resample_backward(const ResampleArgs *a, const float *gy, float *dx);

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
int cpu_norm_power_sum(const float *x, int64_t n, double p, double *out);
int cpu_scale(float *x, int64_t n, float s);

#endif /* AC_CPU_KERNELS_H */
