/*
 * cpu/dropout.c - the CPU's kernels for dropout.c: draw and apply the mask,
 * and its backward.
 *
 * The mask is drawn in chunks of DROPOUT_CHUNK blocks that the threads share
 * out: chunk c draws its blocks in order from a xoshiro128+ stream of its own,
 * seeded by splitmix64 from c and one 64-bit key taken from the calling
 * thread's generator. So after ac_manual_seed(s) a dropout call gives the same
 * mask for any thread count, and each call advances the generator by the same
 * two 32-bit draws whatever the size. Backward splits the blocks among the
 * threads.
 */
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

#define DROPOUT_CHUNK 4096      /* blocks per stream */
#define DROPOUT_GRAIN 16384     /* floats per parallel task, at least */

typedef struct {
    uint32_t s[4];
} Stream;

/* Chunk c's stream: seeded from key + c * 2^32 (a distinct start per chunk), the
   way ac_manual_seed seeds the generator. */
static void stream_seed(Stream *st, uint64_t key, int64_t c)
{
    xoshiro_seed(st->s, key + ((uint64_t)c << 32));
}

/* Uniform in [0, 1) with 24 bits, as rng_uniform. */
static float stream_uniform(Stream *st) { return uniform_from_bits(xoshiro_next(st->s)); }

typedef struct {
    const float *x;
    float *out;
    uint8_t *keep;
    int64_t blocks, block;
    float p, scale;
    uint64_t key;
} DropoutJob;

static void dropout_task(void *ctx, int64_t begin, int64_t end)
{
    const DropoutJob *job = ctx;
    const int64_t block = job->block;
    int64_t c, b, i;
    for (c = begin; c < end; c++) {
        const int64_t b1 = (c + 1) * DROPOUT_CHUNK < job->blocks ? (c + 1) * DROPOUT_CHUNK : job->blocks;
        Stream st;
        stream_seed(&st, job->key, c);
        if (block == 1) {   /* one element a draw: without a loop per block, no memset call per zero */
            for (b = c * DROPOUT_CHUNK; b < b1; b++) {
                const int kept = stream_uniform(&st) >= job->p;
                job->out[b] = kept ? job->x[b] * job->scale : 0.0f;
                if (job->keep) job->keep[b] = (uint8_t)kept;
            }
            continue;
        }
        for (b = c * DROPOUT_CHUNK; b < b1; b++) {
            const int kept = stream_uniform(&st) >= job->p;
            const float *xb = job->x + b * block;
            float *ob = job->out + b * block;
            for (i = 0; i < block; i++) ob[i] = kept ? xb[i] * job->scale : 0.0f;
            if (job->keep) job->keep[b] = (uint8_t)kept;
        }
    }
}

int cpu_dropout(const float *x, float *out, uint8_t *keep, int64_t blocks, int64_t block, float p,
                float scale)
{
    DropoutJob job;
    const int64_t chunks = (blocks + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK;
    const int64_t chunk_floats = DROPOUT_CHUNK * block;
    job.x = x;
    job.out = out;
    job.keep = keep;
    job.blocks = blocks;
    job.block = block;
    job.p = p;
    job.scale = scale;
    job.key = rng_next64();
    parallel_for(chunks, DROPOUT_GRAIN / (chunk_floats + 1) + 1, dropout_task, &job);
    return AC_OK;
}

typedef struct {
    float *out;
    int64_t n;
    uint64_t key;
} UniformsJob;

static void uniforms_task(void *ctx, int64_t begin, int64_t end)
{
    const UniformsJob *job = ctx;
    int64_t c, b;
    for (c = begin; c < end; c++) {
        const int64_t b1 = (c + 1) * DROPOUT_CHUNK < job->n ? (c + 1) * DROPOUT_CHUNK : job->n;
        Stream st;
        stream_seed(&st, job->key, c);
        for (b = c * DROPOUT_CHUNK; b < b1; b++) job->out[b] = stream_uniform(&st);
    }
}

void cpu_dropout_uniforms(float *out, int64_t n)
{
    UniformsJob job;
    job.out = out;
    job.n = n;
    job.key = rng_next64();
    parallel_for((n + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK, DROPOUT_GRAIN / DROPOUT_CHUNK + 1, uniforms_task,
                 &job);
}

typedef struct {
    const float *g;
    float *gin;
    const uint8_t *keep;
    int64_t block;
    float scale;
} DropoutGradJob;

static void dropout_backward_task(void *ctx, int64_t begin, int64_t end)
{
    const DropoutGradJob *job = ctx;
    const int64_t block = job->block;
    int64_t b, i;
    for (b = begin; b < end; b++) {
        const float *gb = job->g + b * block;
        float *db = job->gin + b * block;
        if (!job->keep[b]) memset(db, 0, (size_t)block * sizeof(float));
        else for (i = 0; i < block; i++) db[i] = gb[i] * job->scale;
    }
}

int cpu_dropout_backward(const float *g, float *gin, const uint8_t *keep, int64_t blocks,
                         int64_t block, float scale)
{
    DropoutGradJob job;
    job.g = g;
    job.gin = gin;
    job.keep = keep;
    job.block = block;
    job.scale = scale;
    parallel_for(blocks, DROPOUT_GRAIN / (block + 1) + 1, dropout_backward_task, &job);
    return AC_OK;
}
