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
};
