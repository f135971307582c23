/*
 * cpu/table.c - the CPU's kernel table, and the lookup of a tensor's table.
 */
#include "kernels/cpu/cpu_kernels.h"

const AcKernels ac_cpu_kernels = {
    /* tensor.c */
    .copy = cpu_copy,
    .fill = cpu_fill,
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

int kernel_missing(const char *op, const AcTensor *t)
{
    char name[32];
    return error_set(AC_ERR_DEVICE, "%s: no kernel for %s", op, device_name(t->device, t->device_index, name, sizeof name));
}

int cpu_only(const char *op, const AcTensor *const *tensors, int n)
{
    int i;
    for (i = 0; i < n; i++)
        if (tensors[i] && tensors[i]->device != AC_CPU) return kernel_missing(op, tensors[i]);
    return AC_OK;
}

int same_device(const char *op, const AcTensor *a, const AcTensor *b)
{
    char one[32], two[32];
    if (!b || (a->device == b->device && a->device_index == b->device_index)) return AC_OK;
    return error_set(AC_ERR_DEVICE, "%s: expected all tensors to be on the same device, but found "
                     "at least two devices, %s and %s", op,
                     device_name(a->device, a->device_index, one, sizeof one),
                     device_name(b->device, b->device_index, two, sizeof two));
}
