/*
 * gemm.c - SGEMM: C = alpha * op(A) * op(B) + beta * C, row-major, op in {N, T}.
 *
 * The BLIS scheme: C is cut into blocks; for each slice of the depth, a block
 * of op(A) and a block of op(B) are packed into panels sized from the cache
 * sizes read at run time, and a register-tiled micro-kernel multiplies one
 * A-panel (which stays in L1) with each B-panel (streamed from L2). The kernel
 * set (AVX-512F, AVX2+FMA or portable C) is chosen once from the CPU, or from
 * AC_SIMD. Threads split C into stripes with one writer each; when op(B)
 * packed fits in L2, the rows are cut into more groups than threads, each
 * thread keeps its packed op(B) for all the groups it takes, and a thread on
 * a slower core simply takes fewer. The depth is always walked in the same
 * blocks, so results do not depend on the thread count. A product of a few rows (m <= GEMM_FEW_ROWS, such as a Linear
 * layer's forward on one sample) packs nothing: packing B would cost more
 * than the product, so the kernel set's few_rows routine reads A and B where
 * they lie. Two variants share the driver: gemm_bias adds a bias to each row
 * as the tiles are stored (a Linear layer's forward, with no pass of its
 * own), and gemm_transposed_c stores C transposed (a wide Linear layer's
 * dW = (x^T g)^T, whose product runs faster with the long side as columns)
 * and can sum op(B)'s columns as it packs them (that layer's db). A right
 * operand multiplied many times (a recurrent layer's W_hh, once per time
 * step) is packed once by gemm_pack_b, and gemm_packed multiplies from it;
 * gemm_packed_bias can also apply ReLU as the tiles are stored (a packed Linear
 * layer followed by ReLU).
 * This file also holds ac_sgemm, the checked public entry.
 */
#define _POSIX_C_SOURCE 200809L

#include "internal.h"
#include "cpu.h"
#include "gemm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Below this many multiply-adds one thread is faster than waking another. */
#define GEMM_PARALLEL_WORK 1048576.0
/* Threads that split the rows of C take them in this many groups each, when
   all of op(B) packed fits in L2 (GemmBlocking.kept_b), so that a thread on a
   slower core takes fewer groups. */
#define ROW_GROUPS_PER_THREAD 4
/* The deepest transposed op(A) whose full panels are read in place (gemm()). */
#define TRANSPOSED_IN_PLACE_DEPTH 64

/* ---- kernel choice ------------------------------------------------------- */

/* The named set, or NULL when this CPU cannot run it (or there is none). */
static const GemmKernels *kernels_named(const char *name)
{
    if (!cpu_can_run(name)) return NULL;
#if defined(__x86_64__) || defined(__i386__)
    if (strcmp(name, "avx512") == 0) return &gemm_avx512_kernels;
    if (strcmp(name, "avx2") == 0) return &gemm_avx2_kernels;
#endif
    return strcmp(name, "generic") == 0 ? &gemm_generic_kernels : NULL;
}

static const GemmKernels *active_kernels;

static const GemmKernels *kernels(void)
{
    const GemmKernels *kern = __atomic_load_n(&active_kernels, __ATOMIC_ACQUIRE);
    if (!kern) {
        kern = kernels_named(cpu_simd_default());
        __atomic_store_n(&active_kernels, kern, __ATOMIC_RELEASE);
    }
    return kern;
}

int gemm_use_kernels(const char *name)
{
    const GemmKernels *kern = kernels_named(name ? name : cpu_simd_default());
    if (!kern) return 0;
    __atomic_store_n(&active_kernels, kern, __ATOMIC_RELEASE);
    return 1;
}

const char *gemm_kernels_name(void) { return kernels()->name; }

/* ---- blocking ------------------------------------------------------------ */

typedef struct {
    int kc;   /* depth of a packed slice: an A-panel (mr x kc) fills 3/4 of L1 */
    int nc;   /* columns of a packed B block (kc x nc): half of L2, the rest for the
                 A-panels and rows of C streaming through (at 3/4 of a 512 KB L2 they
                 would evict the block) */
    int mc;   /* rows of a packed A block (mc x kc): a share of L3 */
    int64_t kept_b;  /* floats of op(B) a thread may keep packed for a whole job: L2 */
} GemmBlocking;

static const GemmKernels *const kernel_sets[] = {
    &gemm_generic_kernels,
#if defined(__x86_64__) || defined(__i386__)
    &gemm_avx2_kernels, &gemm_avx512_kernels,
#endif
};
#define KERNEL_SETS (sizeof kernel_sets / sizeof kernel_sets[0])
static GemmBlocking kernel_set_blocking[KERNEL_SETS];
static pthread_once_t blocking_once = PTHREAD_ONCE_INIT;

static int clamp_int(long v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

/* Each kernel set's blocking, from the data cache sizes the C library knows
   (else typical ones). Worked out once: the divisions cost as much as an 8x8
   product. */
static void set_up_blocking(void)
{
    long l1 = 32L << 10, l2 = 256L << 10, l3 = 8L << 20;
    size_t i;
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && \
    defined(_SC_LEVEL3_CACHE_SIZE)
    long known_l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), known_l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    long known_l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (known_l1 > 0) l1 = known_l1;
    if (known_l2 > 0) l2 = known_l2;
    if (known_l3 > 0) l3 = known_l3;
#endif
    for (i = 0; i < KERNEL_SETS; i++) {
        const GemmKernels *kern = kernel_sets[i];
        GemmBlocking *blk = &kernel_set_blocking[i];
        blk->kc = clamp_int(l1 * 3 / 4 / (4L * kern->mr), 64, 512) / 8 * 8;
        blk->nc = clamp_int(l2 / 2 / (4L * blk->kc), kern->nr, 4096) / kern->nr * kern->nr;
        blk->mc = clamp_int(l3 / 4 / (4L * blk->kc), kern->mr, 3072) / kern->mr * kern->mr;
        blk->kept_b = l2 / 4;
    }
}

static GemmBlocking blocking_for(const GemmKernels *kern)
{
    size_t i;
    pthread_once(&blocking_once, set_up_blocking);
    for (i = 1; i < KERNEL_SETS && kernel_sets[i] != kern; i++) {}
    return kernel_set_blocking[i < KERNEL_SETS ? i : 0];
}

/* ---- pack buffers: one per thread, grown on demand, freed at thread exit -- */

static pthread_key_t buffer_key;
static pthread_once_t buffer_key_once = PTHREAD_ONCE_INIT;
static AC_THREAD_LOCAL float *thread_buffer;
static AC_THREAD_LOCAL size_t thread_buffer_floats;
/* The keep_b of the job whose packed op(B) this thread's buffer holds (GemmJob). */
static AC_THREAD_LOCAL int64_t thread_kept_b;

static void buffer_key_create(void) { pthread_key_create(&buffer_key, free); }

/* NULL when memory is short; gemm then computes with the portable loops. */
static float *pack_buffer(size_t floats)
{
    void *mem;
    if (thread_buffer_floats >= floats) return thread_buffer;
    pthread_once(&buffer_key_once, buffer_key_create);
    if (posix_memalign(&mem, AC_ALIGN, floats * sizeof(float)) != 0) return NULL;
    count_heap_allocation();
    free(thread_buffer);
    thread_buffer = mem;
    thread_buffer_floats = floats;
    thread_kept_b = 0;
    pthread_setspecific(buffer_key, mem);
    return thread_buffer;
}

/* ---- the blocked product ------------------------------------------------- */

typedef struct {
    const GemmKernels *kern;
    GemmBlocking blk;
    int trans_a, trans_b;
    int a_in_place;     /* full A-panels are read from op(A) itself, not packed */
    int64_t m, n, k;
    float alpha, beta;
    const float *a, *b;
    const float *bias;  /* NULL, or added to each row of C in place of beta * C */
    int relu;           /* C stored as gemm_relu leaves it (gemm_packed_bias) */
    float *c;
    int64_t lda, ldb, ldc;
    int c_transposed;   /* C(i, j) is c[j*ldc + i] */
    float *b_sums;      /* NULL, or set to the sums of op(B)'s columns (gemm_transposed_c) */
    int split_rows;     /* tasks own stripes of rows of C, else of columns */
    int64_t task_span;  /* rows or columns per task: a multiple of mr or nr */
    int64_t keep_b;     /* nonzero: a number no other job has; each thread packs all
                           of op(B) once and keeps it for the other row groups it takes */
    float *packed_b;    /* NULL, or all of op(B) packed (gemm_pack_b) */
} GemmJob;

/* Numbers the jobs that keep B: a thread's kept B is never taken for another job's. */
static int64_t kept_b_jobs;

static int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

/* Where C(i, j) lies. */
static float *c_at(const GemmJob *job, int64_t i, int64_t j)
{
    return job->c_transposed ? job->c + j * job->ldc + i : job->c + i * job->ldc + j;
}

/*
 * The first column of panel q of a block of nc columns cut into `panels`
 * (panel `panels` starts at nc). Panels are nr wide, the last one narrower.
 * With split, a last panel of r <= nr/4 columns, which would pay for a tile
 * at least half wide (AVX-512: 16 of 32 lanes for the 8 of dX's 200 columns),
 * takes nr/2 columns and the panel before it the other nr + r - nr/2
 * (24 + 16 lanes cost 30 FMAs a step, 32 + 8 cost 36).
 */
static int panel_start(int q, int panels, int nc, int nr, int split)
{
    if (q == panels) return nc;
    return split && q == panels - 1 ? nc - nr / 2 : q * nr;
}

/* Whether a block of nc columns ends in a split pair of panels (panel_start). */
static int split_last_panel(const GemmKernels *kern, int nc)
{
    return kern->tail_split && nc > kern->nr && nc % kern->nr != 0 && nc % kern->nr <= kern->nr / 4;
}

/* b_sums[j0:j1] by plain loops, where no packing pass makes them. */
static void plain_b_sums(const GemmJob *job, int64_t j0, int64_t j1)
{
    int64_t j, p;
    for (j = j0; j < j1; j++) {
        float sum = 0.0f;
        for (p = 0; p < job->k; p++)
            sum += job->trans_b ? job->b[j * job->ldb + p] : job->b[p * job->ldb + j];
        job->b_sums[j] = sum;
    }
}

/* The depth of a slice: k cut into equal slices that depend only on k. Small
   products are common and 64-bit divisions slow: skip or narrow them. A depth
   up to 1.5 kc is one slice, not two short ones that would each store C (and
   the second read it back): the B-panels streaming through L1 evict the
   A-panel either way. */
static int64_t depth_slice(const GemmJob *job, int64_t *slices)
{
    *slices = job->k <= job->blk.kc * 3 / 2 ? 1 : (job->k + job->blk.kc - 1) / job->blk.kc;
    return *slices == 1 ? job->k : (job->k + *slices - 1) / *slices;
}

/* Where the panel of op(B) from column jc (a multiple of nr) of slice s lies
   in a gemm_pack_b copy: each slice holds all of n in panels of nr, from
   column 0. */
static int64_t packed_b_offset(const GemmJob *job, int64_t s, int64_t slice, int64_t jc, int kc)
{
    int64_t nr = job->kern->nr;
    return s * slice * ((job->n + nr - 1) / nr * nr) + jc * kc;
}

/* op(B)(p, j): from B, or from its gemm_pack_b panels when the job has no B. */
static float b_at(const GemmJob *job, int64_t p, int64_t j)
{
    int64_t slices, slice, s, nr = job->kern->nr;
    if (job->b) return job->trans_b ? job->b[j * job->ldb + p] : job->b[p * job->ldb + j];
    slice = depth_slice(job, &slices);
    s = p / slice;
    return job->packed_b[packed_b_offset(job, s, slice, j / nr * nr, (int)min64(slice, job->k - s * slice)) +
                         (p - s * slice) * nr + j % nr];
}

/* Plain loops over C[i0:i1, j0:j1], for when no pack buffer can be had. */
static void gemm_unpacked(const GemmJob *job, int64_t i0, int64_t i1, int64_t j0, int64_t j1)
{
    int64_t i, j, p;
    for (i = i0; i < i1; i++) {
        for (j = j0; j < j1; j++) {
            float sum = 0.0f, *out = c_at(job, i, j);
            for (p = 0; p < job->k; p++) {
                float a = job->trans_a ? job->a[p * job->lda + i] : job->a[i * job->lda + p];
                sum += a * b_at(job, p, j);
            }
            *out = gemm_scaled(sum, job->alpha, job->beta, out, job->bias ? job->bias + j : NULL,
                               job->relu);
        }
    }
}

/* Panels [from, panels) of the block of nc columns of op(B) at b, depth kc,
   into bbuf (panel q at q * nr * kc); their column sums added to b_sums (the
   block's, or NULL). */
static void pack_b_panels(const GemmJob *job, const float *b, int nc, int kc, int split,
                          int from, float *bbuf, float *b_sums)
{
    const GemmKernels *kern = job->kern;
    int q, nr = kern->nr, panels = (nc + nr - 1) / nr;
    for (q = from; q < panels; q++) {
        int j = panel_start(q, panels, nc, nr, split);
        int width = panel_start(q + 1, panels, nc, nr, split) - j;
        float *panel = bbuf + (int64_t)q * nr * kc;
        kern->pack(job->trans_b ? b + j * job->ldb : b + j, job->ldb, job->trans_b, width, kc, nr,
                   panel);
        if (b_sums) gemm_sum_panel(b_sums + j, panel, kc, nr, width);
    }
}

/*
 * C[i0:i1, j0:j1] over the whole depth. The depth is cut into equal slices
 * that depend only on k, so each element of C sees the same sums in the same
 * order whichever block or thread computes it. A-panels are read in place
 * when a_in_place (by rows of op(A), or by columns when it is transposed);
 * a short last panel, and all panels otherwise, are packed. When op(B)'s rows
 * are contiguous, the kernels for the first A-panel pack the full B-panels
 * as they use them, which saves a pass over B. With keep_b the buffer holds
 * all of op(B) packed, slice after slice, and once a thread has packed it for
 * this job, its later row groups only read it.
 */
static void gemm_block(const GemmJob *job, int64_t i0, int64_t i1, int64_t j0, int64_t j1)
{
    const GemmKernels *kern = job->kern;
    int mr = kern->mr, nr = kern->nr;
    int64_t slices, slice = depth_slice(job, &slices);
    /* Every row group asks for the same size, so a kept B is never reallocated. */
    int rows = (int)min64(job->blk.mc, job->keep_b ? job->task_span : i1 - i0);
    int cols = (int)(job->keep_b ? j1 - j0 : min64(job->blk.nc, j1 - j0));
    int64_t a_rows = (rows + mr - 1) / mr * mr;   /* mc and nc are multiples of mr and nr */
    int64_t b_cols = (cols + nr - 1) / nr * nr;
    size_t a_floats = (size_t)(a_rows * slice);
    size_t b_floats = job->packed_b ? 0 : (size_t)(b_cols * slice * (job->keep_b ? slices : 1));
    float *abuf = pack_buffer(a_floats + b_floats), *bbuf;
    int b_packed = job->packed_b || (job->keep_b && thread_kept_b == job->keep_b);
    int64_t ic, pc, jc, s;
    GemmTile tile;
    if (!abuf) {
        gemm_unpacked(job, i0, i1, j0, j1);
        if (job->b_sums) plain_b_sums(job, j0, j1);
        return;
    }
    /* Columns belong to one task (gemm_run): its first row block sums them. */
    if (job->b_sums) memset(job->b_sums + j0, 0, (size_t)(j1 - j0) * sizeof(float));
    tile.ldb = job->ldb;
    tile.ldc = job->ldc;
    tile.c_transposed = job->c_transposed;
    tile.alpha = job->alpha;
    for (ic = i0; ic < i1; ic += job->blk.mc) {
        int mc = (int)min64(job->blk.mc, i1 - ic);
        int in_place = job->a_in_place ? mc / mr * mr : 0;  /* rows read in place */
        for (pc = 0, s = 0; pc < job->k; pc += slice, s++) {
            const float *a = job->trans_a ? job->a + pc * job->lda + ic
                                          : job->a + ic * job->lda + pc;
            tile.kc = (int)min64(slice, job->k - pc);
            tile.beta = pc == 0 ? job->beta : 1.0f;
            if (in_place < mc)
                kern->pack(job->trans_a ? a + in_place : a + in_place * job->lda, job->lda,
                           !job->trans_a, mc - in_place, tile.kc, mr, abuf);
            for (jc = j0; jc < j1; jc += job->blk.nc) {
                int nc = (int)min64(job->blk.nc, j1 - jc);
                /* NULL for a job with only B's panels (gemm_packed without B) */
                const float *b = !job->b ? NULL : job->trans_b ? job->b + jc * job->ldb + pc
                                                               : job->b + pc * job->ldb + jc;
                int ir, q, panels = (nc + nr - 1) / nr;
                int split = !job->packed_b && split_last_panel(kern, nc);
                /* the full panels the kernels pack as they go */
                int packed_later = job->trans_b || b_packed ? 0 : split ? panels - 2 : nc / nr;
                /* the depth steps of the next packed A-panel each kernel fetches */
                int next_share = (tile.kc + panels - 1) / panels;
                bbuf = abuf + a_floats;
                if (job->keep_b) bbuf += s * b_cols * slice + (jc - j0) * tile.kc;
                if (job->packed_b) bbuf = job->packed_b + packed_b_offset(job, s, slice, jc, tile.kc);
                if (!b_packed)
                    pack_b_panels(job, b, nc, tile.kc, split, packed_later, bbuf,
                                  job->b_sums && ic == i0 ? job->b_sums + jc : NULL);
                for (ir = 0; ir < mc; ir += mr) {
                    if (ir < in_place && job->trans_a) {   /* columns of A */
                        tile.a = a + ir;
                        tile.a_row = 1;
                        tile.a_depth = job->lda;
                    } else if (ir < in_place) {
                        tile.a = a + ir * job->lda;
                        tile.a_row = job->lda;
                        tile.a_depth = 1;
                    } else {
                        tile.a = abuf + (int64_t)(ir - in_place) * tile.kc;
                        tile.a_row = 1;
                        tile.a_depth = mr;
                    }
                    tile.m = mc - ir < mr ? mc - ir : mr;
                    tile.a_next = ir + mr < mc && ir + mr >= in_place
                                      ? abuf + (int64_t)(ir + mr - in_place) * tile.kc : NULL;
                    tile.next_from = 0;
                    for (q = 0; q < panels; q++) {
                        int j = panel_start(q, panels, nc, nr, split);
                        tile.next_to = (int)min64(tile.next_from + next_share, tile.kc);
                        tile.b = bbuf + (int64_t)q * nr * tile.kc;
                        tile.b_source = ir == 0 && q < packed_later ? b + j : NULL;
                        tile.b_sums = job->b_sums && tile.b_source && ic == i0
                                          ? job->b_sums + jc + j : NULL;
                        tile.n = panel_start(q + 1, panels, nc, nr, split) - j;
                        tile.c = c_at(job, ic + ir, jc + j);
                        tile.bias = pc == 0 && job->bias ? job->bias + jc + j : NULL;
                        tile.relu = job->relu && pc + tile.kc == job->k;
                        kern->kernel(&tile);
                        tile.next_from = tile.next_to;
                    }
                }
            }
        }
        b_packed = job->keep_b != 0;
    }
    if (job->keep_b) thread_kept_b = job->keep_b;
}

static void gemm_tasks(void *ctx, int64_t begin, int64_t end)
{
    const GemmJob *job = ctx;
    int64_t t;
    for (t = begin; t < end; t++) {
        int64_t lo = t * job->task_span;
        if (job->split_rows)
            gemm_block(job, lo, min64(lo + job->task_span, job->m), 0, job->n);
        else
            gemm_block(job, 0, job->m, lo, min64(lo + job->task_span, job->n));
    }
}

/* ---- a few rows, nothing packed ----------------------------------------- */

/* Columns per task: a multiple of every kernel set's column group. */
#define FEW_ROWS_SPAN 64

typedef struct {
    const GemmKernels *kern;
    GemmFewRows job;
} FewRowsTasks;

static void few_rows_tasks(void *ctx, int64_t begin, int64_t end)
{
    const FewRowsTasks *tasks = ctx;
    GemmFewRows part = tasks->job;
    part.j0 = begin * FEW_ROWS_SPAN;
    part.j1 = min64(end * FEW_ROWS_SPAN, tasks->job.j1);
    tasks->kern->few_rows(&part);
}

/* op(A) with at most GEMM_FEW_ROWS rows, each contiguous (trans_a == 0), and
   C not transposed: B read as it lies, or from its panels when the job has no B. */
static void gemm_few_rows(const GemmJob *job)
{
    FewRowsTasks tasks;
    int64_t count = (job->n + FEW_ROWS_SPAN - 1) / FEW_ROWS_SPAN, slices;
    tasks.kern = job->kern;
    tasks.job.m = job->m;
    tasks.job.k = job->k;
    tasks.job.j0 = 0;
    tasks.job.j1 = job->n;
    tasks.job.a = job->a;
    tasks.job.lda = job->lda;
    tasks.job.b = job->b;
    tasks.job.ldb = job->ldb;
    tasks.job.b_by_rows = job->trans_b;
    tasks.job.c = job->c;
    tasks.job.ldc = job->ldc;
    tasks.job.alpha = job->alpha;
    tasks.job.beta = job->beta;
    tasks.job.bias = job->bias;
    tasks.job.relu = job->relu;
    tasks.job.panels = job->b ? NULL : job->packed_b;
    tasks.job.slice = job->b ? 0 : depth_slice(job, &slices);
    tasks.job.n_padded = (job->n + job->kern->nr - 1) / job->kern->nr * job->kern->nr;
    if ((double)job->m * job->n * job->k >= GEMM_PARALLEL_WORK)
        parallel_for(count, 1, few_rows_tasks, &tasks);
    else
        few_rows_tasks(&tasks, 0, count);
}

/* C = bias in every row, or beta * C, where beta == 0 clears C whatever it held;
   then gemm_relu when the job asks for it. */
static void scale_c(const GemmJob *job)
{
    int64_t i, j;
    for (i = 0; i < job->m; i++) {
        for (j = 0; j < job->n; j++) {
            float *out = c_at(job, i, j);
            *out = job->bias ? job->bias[j] : job->beta == 0.0f ? 0.0f : job->beta * *out;
            if (job->relu) *out = gemm_relu(*out);
        }
    }
}

/* The product a job from set_up_job describes. */
static void gemm_run(GemmJob *job)
{
    int threads = ac_get_num_threads();
    int64_t m = job->m, n = job->n, k = job->k, tasks, tiles;
    if (m == 0 || n == 0 || k == 0 || job->alpha == 0.0f) {
        scale_c(job);
        if (job->b_sums) plain_b_sums(job, 0, n);
        return;
    }
    if (!job->packed_b) job->kern = kernels();   /* else the set it was packed for */
    if (m <= GEMM_FEW_ROWS && !job->trans_a && !job->c_transposed) {   /* B as it lies, or its panels */
        if (!job->b) job->blk = blocking_for(job->kern);   /* the panels' depth slices */
        gemm_few_rows(job);
        return;
    }
    job->blk = blocking_for(job->kern);
    /* A panel read in place must not crowd a few L1 sets: pack it when its rows
       start 4 KiB apart (all in one set; 2 KiB apart they use two, and n = 512
       runs 3% faster in place than packed, 6% slower packed at 4 KiB), or when
       a transposed op(A)'s depth steps are 2 KiB apart. A transposed op(A) is
       read in place only when shallow: a panel then takes a cache line per
       depth step, 4 KB at most, and the MLP's weight gradient (784x64^T .
       64x128) runs 4% faster than with it packed; deeper, the lines would
       crowd B out of L1. */
    job->a_in_place = job->trans_a ? job->lda % 512 != 0 && k <= TRANSPOSED_IN_PLACE_DEPTH
                                   : job->lda % 1024 != 0;
    /* Split the longer side: each task packs all of the other operand, and that
       operand is then the smaller one to pack twice. Columns whose sums are
       wanted must each be packed by one task. */
    job->split_rows = m >= n && !job->b_sums;
    job->keep_b = 0;
    if (threads == 1 || (double)m * n * k < GEMM_PARALLEL_WORK) {
        job->task_span = job->split_rows ? m : n;   /* one task: all of C */
        gemm_tasks(job, 0, 1);
        return;
    }
    tiles = job->split_rows ? (m + job->kern->mr - 1) / job->kern->mr
                            : (n + job->kern->nr - 1) / job->kern->nr;
    tasks = min64(threads, tiles);
    if (job->split_rows && k * n <= job->blk.kept_b && !job->packed_b) {
        job->keep_b = __atomic_add_fetch(&kept_b_jobs, 1, __ATOMIC_RELAXED);
        tasks = min64((int64_t)threads * ROW_GROUPS_PER_THREAD, tiles);
    }
    job->task_span = (tiles + tasks - 1) / tasks * (job->split_rows ? job->kern->mr : job->kern->nr);
    tasks = ((job->split_rows ? m : n) + job->task_span - 1) / job->task_span;
    parallel_for(tasks, 1, gemm_tasks, job);
}

static void set_up_job(GemmJob *job, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                       float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                       float beta, float *c, int64_t ldc)
{
    job->trans_a = trans_a;
    job->trans_b = trans_b;
    job->m = m;
    job->n = n;
    job->k = k;
    job->alpha = alpha;
    job->beta = beta;
    job->a = a;
    job->b = b;
    job->bias = NULL;
    job->relu = 0;
    job->c = c;
    job->lda = lda;
    job->ldb = ldb;
    job->ldc = ldc;
    job->c_transposed = 0;
    job->b_sums = NULL;
    job->packed_b = NULL;
}

void gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
          float beta, float *c, int64_t ldc)
{
    GemmJob job;
    set_up_job(&job, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    gemm_run(&job);
}

void gemm_bias(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
               const float *bias, float *c, int64_t ldc)
{
    GemmJob job;
    set_up_job(&job, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc);
    job.bias = bias;
    gemm_run(&job);
}

void gemm_transposed_c(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                       float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                       float beta, float *c, int64_t ldc, float *b_sums)
{
    GemmJob job;
    set_up_job(&job, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    job.c_transposed = 1;
    job.b_sums = b_sums;
    gemm_run(&job);
}

/* ---- op(B) packed once, multiplied many times ---------------------------- */

size_t gemm_packed_b_floats(int64_t k, int64_t n)
{
    GemmJob job;
    int64_t slices, slice;
    job.k = k;
    job.kern = kernels();
    job.blk = blocking_for(job.kern);
    slice = depth_slice(&job, &slices);
    return (size_t)(slices * slice * ((n + job.kern->nr - 1) / job.kern->nr * job.kern->nr));
}

/* Panels of nr columns from column 0 (no split last panel), slice after
   slice: any task whose columns start at a multiple of nr finds its panels. */
GemmPackedB gemm_pack_b(int trans_b, int64_t k, int64_t n, const float *b, int64_t ldb,
                        float *panels)
{
    GemmPackedB packed;
    GemmJob job;
    int64_t slices, slice, pc, s;
    set_up_job(&job, 0, trans_b, 0, n, k, 1.0f, NULL, 0, b, ldb, 0.0f, NULL, 0);
    job.kern = kernels();
    job.blk = blocking_for(job.kern);
    slice = depth_slice(&job, &slices);
    for (pc = 0, s = 0; pc < k; pc += slice, s++)
        pack_b_panels(&job, trans_b ? b + pc : b + pc * ldb, (int)n, (int)min64(slice, k - pc), 0,
                      0, panels + packed_b_offset(&job, s, slice, 0, 0), NULL);
    packed.kern = job.kern;
    packed.trans_b = trans_b;
    packed.k = k;
    packed.n = n;
    packed.b = b;
    packed.ldb = ldb;
    packed.panels = panels;
    return packed;
}

static void run_packed(int64_t m, float alpha, const float *a, int64_t lda, const GemmPackedB *b,
                       float beta, const float *bias, int relu, float *c, int64_t ldc)
{
    GemmJob job;
    set_up_job(&job, 0, b->trans_b, m, b->n, b->k, alpha, a, lda, b->b, b->ldb, beta, c, ldc);
    job.kern = b->kern;
    job.packed_b = b->panels;
    job.bias = bias;
    job.relu = relu;
    gemm_run(&job);
}

void gemm_packed(int64_t m, float alpha, const float *a, int64_t lda, const GemmPackedB *b,
                 float beta, float *c, int64_t ldc)
{
    run_packed(m, alpha, a, lda, b, beta, NULL, 0, c, ldc);
}

void gemm_packed_bias(int64_t m, const float *a, int64_t lda, const GemmPackedB *b,
                      const float *bias, int relu, float *c, int64_t ldc)
{
    run_packed(m, 1.0f, a, lda, b, 0.0f, bias, relu, c, ldc);
}

/* ---- the public entry ---------------------------------------------------- */

/* An operand of rows x cols stored with leading dimension ld: AC_OK or an error. */
static int check_operand(const char *name, const float *x, int64_t rows, int64_t cols,
                         int64_t ld, const char *ld_name)
{
    if (rows > 0 && cols > 0 && !x)
        return error_set(AC_ERR_ARG, "sgemm: %s is NULL but holds %lld x %lld elements",
                         name, (long long)rows, (long long)cols);
    if (ld < (cols > 1 ? cols : 1))
        return error_set(AC_ERR_ARG, "sgemm: %s (%lld) is smaller than a row of %s (%lld)",
                         ld_name, (long long)ld, name, (long long)cols);
    if (rows > 0 && (rows > ((int64_t)1 << 29) || ld > ((int64_t)1 << 29)) &&   /* else it fits */
        (rows - 1) > (INT64_MAX / 8 - cols) / ld)
        return error_set(AC_ERR_ARG, "sgemm: %s of %lld rows with %s %lld is too large",
                         name, (long long)rows, ld_name, (long long)ld);
    return AC_OK;
}

int ac_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
             float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
             float beta, float *c, int64_t ldc)
{
    int status;
    if (trans_a != 0 && trans_a != 1)
        return error_set(AC_ERR_ARG, "sgemm: trans_a must be 0 or 1, got %d", trans_a);
    if (trans_b != 0 && trans_b != 1)
        return error_set(AC_ERR_ARG, "sgemm: trans_b must be 0 or 1, got %d", trans_b);
    if (m < 0 || n < 0 || k < 0)
        return error_set(AC_ERR_ARG, "sgemm: sizes must be >= 0, got m=%lld n=%lld k=%lld",
                         (long long)m, (long long)n, (long long)k);
    status = check_operand("a", a, trans_a ? k : m, trans_a ? m : k, lda, "lda");
    if (status == AC_OK)
        status = check_operand("b", b, trans_b ? n : k, trans_b ? k : n, ldb, "ldb");
    if (status == AC_OK) status = check_operand("c", c, m, n, ldc, "ldc");
    if (status != AC_OK) return status;
    gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return AC_OK;
}
