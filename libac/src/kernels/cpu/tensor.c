/*
 * cpu/tensor.c - the CPU's kernels for ops/tensor.c (copies and fills) and for
 * autograd.c (adding into a leaf's grad).
 */
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

int cpu_copy(void *dst, const void *src, size_t bytes)
{
    if (dst != src) memmove(dst, src, bytes);
    return AC_OK;
}

int cpu_fill(AcTensor *t, double value)
{
    int64_t i;
    elem_set(t->data, t->dtype, 0, value);   /* value as t's dtype stores it */
    if (t->dtype == AC_FLOAT32) {
        const float v = t->data[0];
        for (i = 1; i < t->size; i++) t->data[i] = v;
    } else if (t->dtype == AC_INT64) {
        const int64_t v = data_i64(t)[0];
        for (i = 1; i < t->size; i++) data_i64(t)[i] = v;
    } else {   /* one byte: bool, uint8 or int8 */
        memset(t->data, data_u8(t)[0], (size_t)t->size);
    }
    return AC_OK;
}

int cpu_add_into(float *dst, const float *src, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) dst[i] += src[i];
    return AC_OK;
}
