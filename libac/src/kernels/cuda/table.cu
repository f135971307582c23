/*
 * cuda/table.cu - the CUDA kernel table (builds with CUDA). An entry left out
 * is an op with no CUDA kernel: it fails with AC_ERR_DEVICE (kernels.h).
 */
#include "kernels/cuda/cuda_kernels.h"

extern "C" const AcKernels ac_cuda_kernels = {
    /* tensor.c */
    .copy = cuda_copy,
    .fill = cuda_fill,
    /* autograd.c */
    .add_into = cuda_add_into,

    /* elementwise.c */
    .add = cuda_add,
    .sub = cuda_sub,
    .mul = cuda_mul,
    .div = cuda_div,
    .pow = cuda_pow,
    .div_backward_b = cuda_div_backward_b,
    .pow_backward_base = cuda_pow_backward_base,
    .pow_backward_exp = cuda_pow_backward_exp,
    .add_scalar = cuda_add_scalar,
    .mul_scalar = cuda_mul_scalar,
    .rsub_scalar = cuda_rsub_scalar,
    .div_scalar = cuda_div_scalar,
    .rdiv_scalar = cuda_rdiv_scalar,
    .pow_scalar = cuda_pow_scalar,
    .clamp = cuda_clamp,
    .neg = cuda_neg,
    .exp = cuda_exp,
    .log = cuda_log,
    .log1p = cuda_log1p,
    .sqrt = cuda_sqrt,
    .abs = cuda_abs,
    .sin = cuda_sin,
    .cos = cuda_cos,
    .rdiv_scalar_backward = cuda_rdiv_scalar_backward,
    .pow_scalar_backward = cuda_pow_scalar_backward,
    .clamp_backward = cuda_clamp_backward,
    .log1p_backward = cuda_log1p_backward,
    .sqrt_backward = cuda_sqrt_backward,
    .abs_backward = cuda_abs_backward,
    .sin_backward = cuda_sin_backward,
    .cos_backward = cuda_cos_backward,
    /* activation.c */
    .relu = cuda_relu,
    .sigmoid = cuda_sigmoid,
    .tanh = cuda_tanh,
    .gelu = cuda_gelu,
    .relu_backward = cuda_relu_backward,
    .sigmoid_backward = cuda_sigmoid_backward,
    .tanh_backward = cuda_tanh_backward,
    .gelu_backward = cuda_gelu_backward,
    .softmax = cuda_softmax,
    .log_softmax = cuda_log_softmax,
    .softmax_backward = cuda_softmax_backward,
    .log_softmax_backward = cuda_log_softmax_backward,
    /* dropout.c */
    .dropout = cuda_dropout,
    .dropout_backward = cuda_dropout_backward,
    /* matmul.c, linear.c */
    .matmul = cuda_matmul,
    .matmul_grad = cuda_matmul_grad,
    .linear = cuda_linear,
    .linear_backward = cuda_linear_backward,
    /* conv.c */
    .conv2d = cuda_conv2d,
    .conv2d_backward = cuda_conv2d_backward,
    /* pool.c */
    .max_pool2d = cuda_max_pool2d,
    .max_pool2d_backward = cuda_max_pool2d_backward,
    .avg_pool2d = cuda_avg_pool2d,
    .avg_pool2d_backward = cuda_avg_pool2d_backward,
    /* optim/ */
    .sgd_step = cuda_sgd_step,
    .adam_step = cuda_adam_step,
};
