/*
 * cpu/table.c - the CPU's kernel table, and the lookup of a tensor's table.
 */
#include "kernels/cpu/cpu_kernels.h"

const AcKernels ac_cpu_kernels = {
    /* tensor.c */
    .copy = cpu_copy,
    .fill = cpu_fill,
    /* autograd.c */
    .add_into = cpu_add_into,

    /* elementwise.c */
    .add = cpu_add,
    .sub = cpu_sub,
    .mul = cpu_mul,
    .div = cpu_div,
    .pow = cpu_pow,
    .div_backward_b = cpu_div_backward_b,
    .pow_backward_base = cpu_pow_backward_base,
    .pow_backward_exp = cpu_pow_backward_exp,
    .add_scalar = cpu_add_scalar,
    .mul_scalar = cpu_mul_scalar,
    .rsub_scalar = cpu_rsub_scalar,
    .div_scalar = cpu_div_scalar,
    .rdiv_scalar = cpu_rdiv_scalar,
    .pow_scalar = cpu_pow_scalar,
    .clamp = cpu_clamp,
    .neg = cpu_neg,
    .exp = cpu_exp,
    .log = cpu_log,
    .log1p = cpu_log1p,
    .sqrt = cpu_sqrt,
    .abs = cpu_abs,
    .sin = cpu_sin,
    .cos = cpu_cos,
    .rdiv_scalar_backward = cpu_rdiv_scalar_backward,
    .pow_scalar_backward = cpu_pow_scalar_backward,
    .clamp_backward = cpu_clamp_backward,
    .log1p_backward = cpu_log1p_backward,
    .sqrt_backward = cpu_sqrt_backward,
    .abs_backward = cpu_abs_backward,
    .sin_backward = cpu_sin_backward,
    .cos_backward = cpu_cos_backward,
    .typed_map = cpu_typed_map,
    .int_extreme = cpu_int_extreme,
    .int_matmul = cpu_int_matmul,

    /* activation.c */
    .relu = cpu_relu,
    .sigmoid = cpu_sigmoid,
    .tanh = cpu_tanh,
    .gelu = cpu_gelu,
    .relu_backward = cpu_relu_backward,
    .sigmoid_backward = cpu_sigmoid_backward,
    .tanh_backward = cpu_tanh_backward,
    .gelu_backward = cpu_gelu_backward,
    .softmax = cpu_softmax,
    .log_softmax = cpu_log_softmax,
    .softmax_backward = cpu_softmax_backward,
    .log_softmax_backward = cpu_log_softmax_backward,

    /* pointwise.c */
    .pointwise = cpu_pointwise,
    .pointwise_backward = cpu_pointwise_backward,
    .pointwise_test = cpu_pointwise_test,
    .pointwise_integer = cpu_pointwise_integer,
    .pointwise2 = cpu_pointwise2,
    .pointwise2_backward = cpu_pointwise2_backward,

    /* dropout.c */
    .dropout = cpu_dropout,
    .dropout_backward = cpu_dropout_backward,

    /* compare.c */
    .compare = cpu_compare,
    .logical = cpu_logical,
    .where = cpu_where,
    .where_backward = cpu_where_backward,

    /* loss.c */
    .mse_loss = cpu_mse_loss,
    .mse_loss_backward = cpu_mse_loss_backward,
    .l1_loss = cpu_l1_loss,
    .l1_loss_backward = cpu_l1_loss_backward,
    .smooth_l1_loss = cpu_smooth_l1_loss,
    .smooth_l1_loss_backward = cpu_smooth_l1_loss_backward,
    .binary_cross_entropy = cpu_binary_cross_entropy,
    .binary_cross_entropy_backward = cpu_binary_cross_entropy_backward,
    .bce_with_logits = cpu_bce_with_logits,
    .bce_with_logits_backward = cpu_bce_with_logits_backward,
    .cross_entropy = cpu_cross_entropy,
    .cross_entropy_backward = cpu_cross_entropy_backward,

    /* reduce.c */
    .sum = cpu_sum,
    .mean = cpu_mean,
    .max = cpu_max,
    .min = cpu_min,
    .var = cpu_var,
    .std = cpu_std,
    .sum_backward = cpu_sum_backward,
    .extreme_backward = cpu_extreme_backward,
    .var_backward = cpu_var_backward,
    .std_backward = cpu_std_backward,
    .sum_integer = cpu_sum_integer,
    .max_dim = cpu_max_dim,
    .min_dim = cpu_min_dim,
    .max_dim_backward = cpu_max_dim_backward,
    .min_dim_backward = cpu_min_dim_backward,
    /* matmul.c, linear.c */
    .matmul = cpu_matmul,
    .matmul_grad = cpu_matmul_grad,
    .linear = cpu_linear,
    .linear_backward = cpu_linear_backward,
    /* conv.c */
    .conv2d = cpu_conv2d,
    .conv2d_backward = cpu_conv2d_backward,
    /* pool.c */
    .max_pool2d = cpu_max_pool2d,
    .max_pool2d_backward = cpu_max_pool2d_backward,
    .avg_pool2d = cpu_avg_pool2d,
    .avg_pool2d_backward = cpu_avg_pool2d_backward,
    /* resample.c */
    .resample = cpu_resample,
    .resample_backward = cpu_resample_backward,
    /* norm.c */
    .batch_norm = cpu_batch_norm,
    .batch_norm_backward = cpu_batch_norm_backward,
    .layer_norm = cpu_layer_norm,
    .layer_norm_backward = cpu_layer_norm_backward,
    /* embedding.c */
    .embedding_bad_id = cpu_embedding_bad_id,
    .embedding = cpu_embedding,
    .embedding_backward = cpu_embedding_backward,
    /* optim/ */
    .sgd_step = cpu_sgd_step,
    .adam_step = cpu_adam_step,
    .norm_power_sum = cpu_norm_power_sum,
    .scale = cpu_scale,
};

static const AcKernels no_kernels;

const AcKernels *kernels_for(const AcTensor *t)
{
    if (t->device == AC_CPU) return &ac_cpu_kernels;
#ifdef AC_HAVE_CUDA
    if (t->device == AC_CUDA) return &ac_cuda_kernels;
#endif
    return &no_kernels;
}
