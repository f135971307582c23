/*
 * cpu/embedding.c - the CPU's kernels for embedding.c: the check of the ids,
 * the row gather and its scatter-add backward.
 *
 * Backward splits the columns of the weight gradient among the threads: each
 * element has one writer, which adds the rows in the order of the ids, so a
 * weight row that is picked several times gets the same sum whatever the
 * thread count.
 */
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

#define EMBEDDING_GRAIN 16384   /* floats copied per parallel task, at least */

int cpu_embedding_bad_id(const AcTensor *ids, int64_t rows, int64_t *position, double *id)
{
    int64_t i;
    *position = -1;
    for (i = 0; i < ids->size; i++) {
        double v = elem_get(ids, i);
        /* NaN fails the range test too */
        if (!(v >= 0.0 && v < (double)rows) || v != (double)(int64_t)v) {
            *position = i;
            *id = v;
            break;
        }
    }
    return AC_OK;
}

typedef struct {
    const AcTensor *ids;
    const float *weight;
    float *out;
    int64_t dim;
} GatherJob;

static void gather_task(void *ctx, int64_t begin, int64_t end)
{
    const GatherJob *job = ctx;
    int64_t i;
    for (i = begin; i < end; i++)
        memcpy(job->out + i * job->dim, job->weight + (int64_t)elem_get(job->ids, i) * job->dim,
               (size_t)job->dim * sizeof(float));
}

int cpu_embedding(const AcTensor *ids, const float *weight, int64_t dim, float *out)
{
    GatherJob job;
    if (ids->size * dim == 0) return AC_OK;
    job.ids = ids;
    job.weight = weight;
    job.out = out;
    job.dim = dim;
    parallel_for(ids->size, dim >= EMBEDDING_GRAIN ? 1 : EMBEDDING_GRAIN / dim, gather_task, &job);
    return AC_OK;
}

typedef struct {
    const AcTensor *ids;
    const float *gout;
    float *dw;
    int64_t dim, padding_idx;
} ScatterJob;

/* Columns [begin, end) of every picked row, the ids in order. */
static void scatter_task(void *ctx, int64_t begin, int64_t end)
{
    const ScatterJob *job = ctx;
    int64_t i, j;
    for (i = 0; i < job->ids->size; i++) {
        const int64_t row = (int64_t)elem_get(job->ids, i);
        const float *g = job->gout + i * job->dim;
        float *d = job->dw + row * job->dim;
        if (row == job->padding_idx) continue;
        for (j = begin; j < end; j++) d[j] += g[j];
    }
}

int cpu_embedding_backward(const AcTensor *ids, const float *gout, int64_t dim,
                           int64_t padding_idx, float *dw)
{
    ScatterJob job;
    job.ids = ids;
    job.gout = gout;
    job.dw = dw;
    job.dim = dim;
    job.padding_idx = padding_idx;
    parallel_for(dim, EMBEDDING_GRAIN / (ids->size + 1) + 1, scatter_task, &job);
    return AC_OK;
}
