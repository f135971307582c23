/*
 * cpu/dropout.c - the CPU's kernels for dropout.c: draw and apply the mask,
 * and its backward.
 *
 * The mask is drawn in chunks of DROPOUT_CHUNK blocks that the threads share
 * out. Chunk c draws from DROPOUT_LANES xoshiro128+ streams side by side (so
 * the loop runs in SIMD lanes), each seeded by splitmix64 from its index
 * c * DROPOUT_LANES + l and one 64-bit key taken from the calling thread's
 * generator; the chunk's block j gets lane j % DROPOUT_LANES's next draw. So
 * after ac_manual_seed(s) a dropout call gives the same mask for any thread
 * count and instruction set, and each call advances the generator by the same
 * two 32-bit draws whatever the size. The draws are integer operations and
 * one exact conversion, compiled for AVX-512 and AVX2 as well as plain C and
 * picked once (cpu.h, AC_SIMD): every set gives the same bits. Backward
 * splits the blocks among the threads.
 */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu.h"
#include "kernels/vecmath.h"

#include <string.h>

#define DROPOUT_CHUNK 4096      /* blocks per chunk of draws, a multiple of DROPOUT_LANES */
#define DROPOUT_LANES 16        /* streams per chunk */
#define DROPOUT_GRAIN 16384     /* floats per parallel task, at least */

/* The DROPOUT_CHUNK uniforms in [0, 1) of chunk c, 24 bits each as rng_uniform's:
   xoshiro_next on 16 states at once, written lane by lane so that it vectorises.
   Inlined into each instruction set's copy below, which it compiles with. */
__attribute__((always_inline)) static inline void chunk_uniforms_lanes(uint64_t key, int64_t c, float *u)
{
    uint32_t s0[DROPOUT_LANES], s1[DROPOUT_LANES], s2[DROPOUT_LANES], s3[DROPOUT_LANES];
    int64_t j;
    int l;
    for (l = 0; l < DROPOUT_LANES; l++) {
        uint32_t s[4];
        xoshiro_seed(s, key + ((uint64_t)(c * DROPOUT_LANES + l) << 32));
        s0[l] = s[0];
        s1[l] = s[1];
        s2[l] = s[2];
        s3[l] = s[3];
    }
    for (j = 0; j < DROPOUT_CHUNK; j += DROPOUT_LANES)
        for (l = 0; l < DROPOUT_LANES; l++) {
            const uint32_t result = s0[l] + s3[l], t = s1[l] << 9;
            s2[l] ^= s0[l];
            s3[l] ^= s1[l];
            s1[l] ^= s2[l];
            s0[l] ^= s3[l];
            s2[l] ^= t;
            s3[l] = (s3[l] << 11) | (s3[l] >> 21);
            /* uniform_from_bits, through int32: the value fits, and the conversion vectorises */
            u[j + l] = (float)(int32_t)(result >> 8) * (1.0f / 16777216.0f);
        }
}

typedef void (*ChunkUniformsFn)(uint64_t key, int64_t c, float *u);

static void chunk_uniforms_generic(uint64_t key, int64_t c, float *u) { chunk_uniforms_lanes(key, c, u); }

#if defined(__x86_64__) || defined(__i386__)
/* The same loop in 512- and 256-bit registers: 1.9x the SSE2 baseline's speed. */
__attribute__((target("avx512f"))) static void chunk_uniforms_avx512(uint64_t key, int64_t c, float *u)
{
    chunk_uniforms_lanes(key, c, u);
}

__attribute__((target("avx2"))) static void chunk_uniforms_avx2(uint64_t key, int64_t c, float *u)
{
    chunk_uniforms_lanes(key, c, u);
}
#endif

/* Looked up once: AC_SIMD and the CPU do not change while the process runs. */
static void chunk_uniforms(uint64_t key, int64_t c, float *u)
{
    static ChunkUniformsFn chosen;
    ChunkUniformsFn fn = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
    if (!fn) {
        const char *simd = cpu_simd_default();
        fn = chunk_uniforms_generic;
#if defined(__x86_64__) || defined(__i386__)
        if (strcmp(simd, "avx512") == 0) fn = chunk_uniforms_avx512;
        else if (strcmp(simd, "avx2") == 0) fn = chunk_uniforms_avx2;
#endif
        __atomic_store_n(&chosen, fn, __ATOMIC_RELAXED);
    }
    fn(key, c, u);
}

typedef struct {
    const float *x;
    float *out;
    uint8_t *keep;
    int64_t blocks, block;
    float p, scale;
    uint64_t key;
} DropoutJob;

/* One element a block: out and keep from the draws, in loops without branches. */
static void apply_elements(const DropoutJob *job, const float *u, int64_t b0, int64_t n)
{
    const float *x = job->x + b0, p = job->p, scale = job->scale;
    float *out = job->out + b0;
    uint8_t *keep = job->keep ? job->keep + b0 : NULL;
    int64_t i;
    for (i = 0; i < n; i++) out[i] = select_float(u[i] >= p, x[i] * scale, 0.0f);
    if (keep)
        for (i = 0; i < n; i++) keep[i] = (uint8_t)(u[i] >= p);
}

static void apply_blocks(const DropoutJob *job, const float *u, int64_t b0, int64_t n)
{
    const int64_t block = job->block;
    int64_t b, i;
    for (b = 0; b < n; b++) {
        const int kept = u[b] >= job->p;
        const float *xb = job->x + (b0 + b) * block;
        float *ob = job->out + (b0 + b) * block;
        if (kept) for (i = 0; i < block; i++) ob[i] = xb[i] * job->scale;
        else memset(ob, 0, (size_t)block * sizeof(float));
        if (job->keep) job->keep[b0 + b] = (uint8_t)kept;
    }
}

static void dropout_task(void *ctx, int64_t begin, int64_t end)
{
    const DropoutJob *job = ctx;
    float u[DROPOUT_CHUNK];
    int64_t c;
    for (c = begin; c < end; c++) {
        const int64_t b0 = c * DROPOUT_CHUNK;
        const int64_t n = job->blocks - b0 < DROPOUT_CHUNK ? job->blocks - b0 : DROPOUT_CHUNK;
        chunk_uniforms(job->key, c, u);
        if (job->block == 1) apply_elements(job, u, b0, n);
        else apply_blocks(job, u, b0, n);
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
    float u[DROPOUT_CHUNK];
    int64_t c;
    for (c = begin; c < end; c++) {
        const int64_t b0 = c * DROPOUT_CHUNK;
        const int64_t n = job->n - b0 < DROPOUT_CHUNK ? job->n - b0 : DROPOUT_CHUNK;
        chunk_uniforms(job->key, c, u);
        memcpy(job->out + b0, u, (size_t)n * sizeof(float));
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
    const float *g = job->g, scale = job->scale;
    const uint8_t *keep = job->keep;
    float *gin = job->gin;
    int64_t b, i;
    if (block == 1) {   /* one select a float, without a branch: memory speed */
        for (b = begin; b < end; b++) gin[b] = select_float(keep[b], g[b] * scale, 0.0f);
        return;
    }
    for (b = begin; b < end; b++) {
        const float *gb = g + b * block;
        float *db = gin + b * block;
        if (!keep[b]) memset(db, 0, (size_t)block * sizeof(float));
        else for (i = 0; i < block; i++) db[i] = gb[i] * scale;
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
