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
