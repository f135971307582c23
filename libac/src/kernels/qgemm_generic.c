/*
 * qgemm_generic.c - the portable int8 kernel: plain loops, for CPUs without
 * the SIMD sets and as the reference the others must match bit for bit.
 */
#include "qgemm.h"

/* One feature (a univariate series into a recurrent layer): a product per
   output, over contiguous w, which the compiler vectorises. */
static void dot_one_feature(const QDotJob *job)
{
    int64_t i, j;
    for (i = 0; i < job->m; i++) {
        const int32_t xi = (int8_t)job->x[i * job->ld_x];
        int32_t *restrict out = job->out + i * job->ld_out;
        for (j = 0; j < job->n; j++) out[j] = xi * (int32_t)job->w[j];
    }
}

static void dot_generic(const QDotJob *job)
{
    int64_t i, j, p;
    if (job->k == 1) {
        dot_one_feature(job);
        return;
    }
    for (i = 0; i < job->m; i++) {
        const int8_t *x = (const int8_t *)(const void *)(job->x + i * job->ld_x);
        for (j = 0; j < job->n; j++) {
            const int8_t *w = job->w + j * job->k;
            int32_t sum = 0;
            for (p = 0; p < job->k; p++) sum += (int32_t)x[p] * (int32_t)w[p];
            job->out[i * job->ld_out + j] = sum;
        }
    }
}

const QGemmKernels qgemm_generic_kernels = {"generic", 0, dot_generic, NULL};
