/*
 * cpu/dropout.c - the CPU's kernels for dropout.c: draw and apply the mask,
 * and its backward.
 *
 * The draws run in block order on the calling thread, so ac_manual_seed makes
 * the mask repeatable whatever the thread count.
 */
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

int cpu_dropout(const float *x, float *out, uint8_t *keep, int64_t blocks, int64_t block, float p,
                float scale)
{
    int64_t b, i;
    for (b = 0; b < blocks; b++) {
        const int kept = rng_uniform() >= p;
        const float *xb = x + b * block;
        float *ob = out + b * block;
        for (i = 0; i < block; i++) ob[i] = kept ? xb[i] * scale : 0.0f;
        if (keep) keep[b] = (uint8_t)kept;
    }
    return AC_OK;
}

int cpu_dropout_backward(const float *g, float *gin, const uint8_t *keep, int64_t blocks,
                         int64_t block, float scale)
{
    int64_t b, i;
    for (b = 0; b < blocks; b++) {
        const float *gb = g + b * block;
        float *db = gin + b * block;
        if (!keep[b]) memset(db, 0, (size_t)block * sizeof(float));
        else for (i = 0; i < block; i++) db[i] = gb[i] * scale;
    }
    return AC_OK;
}
