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

#endif /* AC_CPU_KERNELS_H */
