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
 * cannot fail; a device's entry returns its launch's error (AC_ERR_DEVICE with
 * the runtime's message), else AC_OK.
 */
#ifndef AC_KERNELS_H
#define AC_KERNELS_H

#include "internal.h"

typedef struct AcKernels {
    /* tensor.c */
    int (*copy)(void *dst, const void *src, size_t bytes);    /* within the device; may overlap */
    int (*fill)(AcTensor *t, double value);                   /* every element, in t's dtype */
    /* autograd.c */
    int (*add_into)(float *dst, const float *src, int64_t n);  /* dst += src: a leaf's grad */
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

#endif /* AC_KERNELS_H */
