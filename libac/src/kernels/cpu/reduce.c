/*
 * cpu/reduce.c - the CPU's kernels for reduce.c: sum, mean, max, min, var and
 * std over the reduced groups of an AcReduceGroups, their backward, the exact
 * sum of integer tensors, and max/min along one dim with indices.
 *
 * Sums accumulate in double over fixed chunks of REDUCE_CHUNK elements whose
 * partial results are combined in order, so a result is bit-identical
 * whatever the thread count: threads only decide who computes a chunk or an
 * output, never how values are grouped.
 */
#include "kernels/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/vecmath.h"

#include <math.h>
#include <string.h>

#define REDUCE_CHUNK 4096
#define REDUCE_ROUND 1024      /* chunk partials computed per parallel round */
#define REDUCE_BLOCK 1024      /* outputs accumulated at once: rows are read 4 KB at a time */
#define REDUCE_GRAIN 16384     /* elements of work per parallel task, at least */

enum { OP_SUM, OP_MAX, OP_MIN, OP_SQDEV, OP_COUNT_EQ };
enum { KIND_SUM, KIND_MEAN, KIND_MAX, KIND_MIN, KIND_VAR, KIND_STD };

/* ---- the forward engine -------------------------------------------------- */

typedef struct {
    const float *x;
    float *out;
    const float *centers;   /* OP_COUNT_EQ: the value each output counts */
    int op;                 /* OP_SUM, OP_MAX, OP_MIN or OP_COUNT_EQ */
    int variance;           /* OP_SUM for the mean, then OP_SQDEV around it */
    int take_sqrt;
    double scale;           /* the result is total * scale (then sqrt) */
    double mean_scale;      /* 1 / count, for variance */
    /* groups other than the innermost, split by kind */
    int n_kept, n_red;
    int64_t kept_size[AC_MAX_DIMS], kept_stride[AC_MAX_DIMS];
    int64_t red_size[AC_MAX_DIMS], red_stride[AC_MAX_DIMS];
    int64_t inner;          /* length of the innermost, contiguous group */
    int inner_reduced;
    int64_t outer;          /* outputs (inner reduced) or output rows (inner kept) */
    int64_t combos;         /* index combinations of the reduced groups listed */
    int64_t blocks;         /* REDUCE_BLOCK-wide blocks per output row (inner kept) */
} ReduceJob;

static double op_identity(int op)
{
    if (op == OP_MAX) return -INFINITY;
    if (op == OP_MIN) return INFINITY;
    return 0.0;
}

/* max and min propagate NaN, as PyTorch does */
static double op_combine(int op, double acc, double v)
{
    if (op == OP_MAX) return (v > acc || v != v) ? v : acc;
    if (op == OP_MIN) return (v < acc || v != v) ? v : acc;
    return acc + v;
}

static int same_value(float x, float c)
{
    return x == c || (x != x && c != c);
}

/* max or min of a chunk: eight lanes of plain compares the compiler can
   vectorise; NaN never wins a compare, so it is looked for on the side. */
static double chunk_extreme(int want_max, const float *x, int64_t n)
{
    float lane[8], best;
    int nan_seen[8] = {0}, j, any_nan = 0;
    int64_t i = 0;
    for (j = 0; j < 8; j++) lane[j] = want_max ? -INFINITY : INFINITY;
    if (want_max) {
        for (; i + 8 <= n; i += 8)
            for (j = 0; j < 8; j++) {
                lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
                nan_seen[j] |= x[i + j] != x[i + j];
            }
    } else {
        for (; i + 8 <= n; i += 8)
            for (j = 0; j < 8; j++) {
                lane[j] = x[i + j] < lane[j] ? x[i + j] : lane[j];
                nan_seen[j] |= x[i + j] != x[i + j];
            }
    }
    for (; i < n; i++) {
        if (x[i] != x[i]) any_nan = 1;
        else if (want_max ? x[i] > lane[0] : x[i] < lane[0]) lane[0] = x[i];
    }
    best = lane[0];
    for (j = 0; j < 8; j++) {
        any_nan |= nan_seen[j];
        if (want_max ? lane[j] > best : lane[j] < best) best = lane[j];
    }
    return any_nan ? NAN : best;
}

/* One chunk (n <= REDUCE_CHUNK) in a fixed order; four accumulators let the
   additions overlap without changing what is added to what. */
static double chunk_reduce(int op, const float *x, int64_t n, double center)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    if (op == OP_SUM) {
        for (; i + 4 <= n; i += 4) {
            s0 += x[i]; s1 += x[i + 1]; s2 += x[i + 2]; s3 += x[i + 3];
        }
        for (; i < n; i++) s0 += x[i];
        return (s0 + s1) + (s2 + s3);
    }
    if (op == OP_SQDEV) {
        for (; i + 4 <= n; i += 4) {
            double d0 = x[i] - center, d1 = x[i + 1] - center;
            double d2 = x[i + 2] - center, d3 = x[i + 3] - center;
            s0 += d0 * d0; s1 += d1 * d1; s2 += d2 * d2; s3 += d3 * d3;
        }
        for (; i < n; i++) s0 += (x[i] - center) * (x[i] - center);
        return (s0 + s1) + (s2 + s3);
    }
    if (op == OP_COUNT_EQ) {
        for (; i < n; i++) s0 += same_value(x[i], (float)center);
        return s0;
    }
    return chunk_extreme(op == OP_MAX, x, n);
}

/* A contiguous run: chunk results combined in order. */
static double run_reduce(int op, const float *x, int64_t n, double center)
{
    double total = op_identity(op);
    int64_t start;
    for (start = 0; start < n; start += REDUCE_CHUNK) {
        int64_t len = n - start < REDUCE_CHUNK ? n - start : REDUCE_CHUNK;
        total = op_combine(op, total, chunk_reduce(op, x + start, len, center));
    }
    return total;
}

typedef struct {
    int op;
    const float *x;
    int64_t n;
    double center;
    int64_t first_chunk;
    double *partials;
} ChunkRound;

static void chunk_round_task(void *ctx, int64_t begin, int64_t end)
{
    ChunkRound *r = ctx;
    int64_t c;
    for (c = begin; c < end; c++) {
        int64_t start = (r->first_chunk + c) * REDUCE_CHUNK;
        int64_t len = r->n - start < REDUCE_CHUNK ? r->n - start : REDUCE_CHUNK;
        r->partials[c] = chunk_reduce(r->op, r->x + start, len, r->center);
    }
}

/* run_reduce over one long run, its chunks computed in parallel; the same
   partials combined in the same order, so the same bits. */
static double run_reduce_parallel(int op, const float *x, int64_t n, double center)
{
    double partials[REDUCE_ROUND];
    double total = op_identity(op);
    int64_t n_chunks = (n + REDUCE_CHUNK - 1) / REDUCE_CHUNK;
    ChunkRound round;
    int64_t c;
    round.op = op;
    round.x = x;
    round.n = n;
    round.center = center;
    round.partials = partials;
    for (round.first_chunk = 0; round.first_chunk < n_chunks; round.first_chunk += REDUCE_ROUND) {
        int64_t count = n_chunks - round.first_chunk;
        if (count > REDUCE_ROUND) count = REDUCE_ROUND;
        parallel_for(count, REDUCE_GRAIN / REDUCE_CHUNK, chunk_round_task, &round);
        for (c = 0; c < count; c++) total = op_combine(op, total, partials[c]);
    }
    return total;
}

static float finish(const ReduceJob *job, double total)
{
    double v = total * job->scale;
    return (float)(job->take_sqrt ? sqrt(v) : v);
}

/* Innermost group reduced: each output is a set of contiguous runs. */
static double output_runs(const ReduceJob *job, int64_t base, int op, double center)
{
    double total = op_identity(op);
    int64_t r;
    for (r = 0; r < job->combos; r++) {
        int64_t offset = base + index_offset(r, job->red_size, job->red_stride, job->n_red);
        total = op_combine(op, total, run_reduce(op, job->x + offset, job->inner, center));
    }
    return total;
}

static void inner_reduced_task(void *ctx, int64_t begin, int64_t end)
{
    const ReduceJob *job = ctx;
    int64_t o;
    for (o = begin; o < end; o++) {
        int64_t base = index_offset(o, job->kept_size, job->kept_stride, job->n_kept);
        double center = job->centers ? job->centers[o] : 0.0;
        double total;
        if (job->variance) {
            double mean = output_runs(job, base, OP_SUM, 0.0) * job->mean_scale;
            total = output_runs(job, base, OP_SQDEV, mean);
        } else {
            total = output_runs(job, base, job->op, center);
        }
        job->out[o] = finish(job, total);
    }
}

/* acc[j] (op) x[base + offset(r) + j] over all reduced combinations r, in order. */
static void accumulate_rows(const ReduceJob *job, int64_t base, int64_t width, int op,
                            const double *centers, double *acc)
{
    int64_t r, j;
    for (r = 0; r < job->combos; r++) {
        const float *row = job->x + base + index_offset(r, job->red_size, job->red_stride,
                                                        job->n_red);
        if (op == OP_SUM) {
            for (j = 0; j < width; j++) acc[j] += row[j];
        } else if (op == OP_SQDEV) {
            for (j = 0; j < width; j++) acc[j] += (row[j] - centers[j]) * (row[j] - centers[j]);
        } else if (op == OP_COUNT_EQ) {
            for (j = 0; j < width; j++) acc[j] += same_value(row[j], (float)centers[j]);
        } else if (op == OP_MAX) {
            for (j = 0; j < width; j++) acc[j] = row[j] > acc[j] || row[j] != row[j] ? row[j] : acc[j];
        } else {
            for (j = 0; j < width; j++) acc[j] = row[j] < acc[j] || row[j] != row[j] ? row[j] : acc[j];
        }
    }
}

/* Innermost group kept: a block of neighbouring outputs accumulates whole rows. */
static void inner_kept_task(void *ctx, int64_t begin, int64_t end)
{
    const ReduceJob *job = ctx;
    double acc[REDUCE_BLOCK], centers[REDUCE_BLOCK];
    int64_t u, j;
    for (u = begin; u < end; u++) {
        int64_t row = u / job->blocks;
        int64_t first = (u % job->blocks) * REDUCE_BLOCK;
        int64_t width = job->inner - first < REDUCE_BLOCK ? job->inner - first : REDUCE_BLOCK;
        int64_t base = index_offset(row, job->kept_size, job->kept_stride, job->n_kept) + first;
        float *out = job->out + row * job->inner + first;
        int op = job->variance ? OP_SUM : job->op;
        for (j = 0; j < width; j++) {
            acc[j] = op_identity(op);
            centers[j] = job->centers ? job->centers[row * job->inner + first + j] : 0.0;
        }
        accumulate_rows(job, base, width, op, centers, acc);
        if (job->variance) {
            for (j = 0; j < width; j++) {
                centers[j] = acc[j] * job->mean_scale;
                acc[j] = 0.0;
            }
            accumulate_rows(job, base, width, OP_SQDEV, centers, acc);
        }
        for (j = 0; j < width; j++) out[j] = finish(job, acc[j]);
    }
}

/* Fill job's layout from the groups. */
static void job_layout(ReduceJob *job, const AcReduceGroups *g)
{
    int i, last = g->n - 1;
    job->inner_reduced = g->n == 0 || g->reduced[last];
    job->inner = g->n == 0 ? 1 : g->size[last];
    job->n_kept = job->n_red = 0;
    job->outer = job->combos = 1;
    for (i = 0; i < last; i++) {
        if (g->reduced[i]) {
            job->red_size[job->n_red] = g->size[i];
            job->red_stride[job->n_red++] = g->stride[i];
            job->combos *= g->size[i];
        } else {
            job->kept_size[job->n_kept] = g->size[i];
            job->kept_stride[job->n_kept++] = g->stride[i];
            job->outer *= g->size[i];
        }
    }
    job->blocks = (job->inner + REDUCE_BLOCK - 1) / REDUCE_BLOCK;
}

static void job_run(ReduceJob *job)
{
    int64_t per_task, work;
    if (job->inner_reduced && job->outer == 1 && job->combos == 1) {
        /* everything reduces into one value: split the run itself */
        double total;
        if (job->variance) {
            double mean = run_reduce_parallel(OP_SUM, job->x, job->inner, 0.0) * job->mean_scale;
            total = run_reduce_parallel(OP_SQDEV, job->x, job->inner, mean);
        } else {
            total = run_reduce_parallel(job->op, job->x, job->inner,
                                        job->centers ? job->centers[0] : 0.0);
        }
        job->out[0] = finish(job, total);
        return;
    }
    if (job->inner_reduced) {
        work = job->combos * job->inner;
        per_task = work > 0 && work < REDUCE_GRAIN ? REDUCE_GRAIN / work : 1;
        parallel_for(job->outer, per_task, inner_reduced_task, job);
    } else {
        work = job->combos * (job->inner < REDUCE_BLOCK ? job->inner : REDUCE_BLOCK);
        per_task = work > 0 && work < REDUCE_GRAIN ? REDUCE_GRAIN / work : 1;
        parallel_for(job->outer * job->blocks, per_task, inner_kept_task, job);
    }
}

/* The number of elements each output reduces. */
static int64_t reduced_count(const AcReduceGroups *g)
{
    int64_t count = 1;
    int i;
    for (i = 0; i < g->n; i++)
        if (g->reduced[i]) count *= g->size[i];
    return count;
}

/* Reduce x over g's reduced groups into out (contiguous, the kept dims in order). */
static void reduce_into(const float *x, const AcReduceGroups *g, int kind, int64_t correction,
                        const float *centers, int op, float *out)
{
    ReduceJob job;
    int64_t count = reduced_count(g);
    memset(&job, 0, sizeof job);
    job_layout(&job, g);
    job.x = x;
    job.out = out;
    job.centers = centers;
    job.op = op;
    job.scale = 1.0;
    job.mean_scale = count > 0 ? 1.0 / (double)count : NAN;
    if (kind == KIND_MEAN) job.scale = job.mean_scale;
    if (kind == KIND_VAR || kind == KIND_STD) {
        int64_t denom = count - correction > 0 ? count - correction : 0;
        job.variance = 1;
        job.take_sqrt = kind == KIND_STD;
        job.scale = denom > 0 ? 1.0 / (double)denom : INFINITY;
    }
    job_run(&job);
}

/* ---- the backward engine: one gradient element per input element -------- */

enum { SPREAD_BROADCAST, SPREAD_MATCH, SPREAD_DEVIATION };

typedef struct {
    int mode;
    const float *x;          /* the input; NULL for BROADCAST */
    const float *g;          /* per output: the factor to spread */
    const float *values;     /* per output: the extreme (MATCH) or the mean (DEVIATION) */
    float *gin;
    AcReduceGroups groups;
    int64_t inner;
} SpreadJob;

static void spread_task(void *ctx, int64_t begin, int64_t end)
{
    const SpreadJob *job = ctx;
    const AcReduceGroups *gr = &job->groups;
    int n_outer = gr->n > 0 ? gr->n - 1 : 0;
    int inner_kept = gr->n > 0 && !gr->reduced[gr->n - 1];
    int64_t q, j;
    for (q = begin; q < end; q++) {
        int64_t o = index_offset(q, gr->size, gr->out_stride, n_outer);
        const float *x = job->x ? job->x + q * job->inner : NULL;   /* NULL: BROADCAST */
        float *gin = job->gin + q * job->inner;
        for (j = 0; j < job->inner; j++) {
            int64_t k = inner_kept ? o + j : o;
            if (job->mode == SPREAD_BROADCAST)
                gin[j] = job->g[k];
            else if (job->mode == SPREAD_MATCH)
                gin[j] = same_value(x[j], job->values[k]) ? job->g[k] : 0.0f;
            else
                gin[j] = job->g[k] * (x[j] - job->values[k]);
        }
    }
}

/* gin (the input's shape, size elements) from per-output factors g, spread
   back over the reduced groups. */
static void spread(const AcReduceGroups *groups, int64_t size, int mode, const float *x,
                   const float *g, const float *values, float *gin)
{
    SpreadJob job;
    int64_t rows, per_task;
    job.mode = mode;
    job.x = x;
    job.g = g;
    job.values = values;
    job.gin = gin;
    job.groups = *groups;
    job.inner = job.groups.n > 0 ? job.groups.size[job.groups.n - 1] : 1;
    rows = job.inner > 0 ? size / job.inner : 0;
    per_task = job.inner < REDUCE_GRAIN ? REDUCE_GRAIN / (job.inner > 0 ? job.inner : 1) : 1;
    parallel_for(rows, per_task, spread_task, &job);
}

/* a viewed as (outer, n, inner), reduced over n. */
typedef struct {
    const float *x;
    int64_t outer, n, inner, blocks;
    int want_max;
    float *values;           /* may be NULL */
    int64_t *indices;        /* may be NULL */
    const float *grad_out;   /* backward: scatter grad_out[o] to grad_in at the index */
    float *grad_in;
} ExtremeJob;

/* Whether x[0..n) holds a NaN: one loop the compiler vectorizes. */
CPU_CLONES static int has_nan(const float *x, int64_t n)
{
    int64_t i;
    int nan = 0;
    for (i = 0; i < n; i++) nan |= x[i] != x[i];
    return nan;
}

/* The first i with x[i] the same value as c (a NaN for a NaN c), which x holds:
   blocks of 64 are tested whole in a loop the compiler vectorizes, then the
   block that has it is scanned. */
CPU_CLONES static int64_t first_same(const float *x, int64_t n, float c)
{
    int64_t i = 0;
    int j, hit;
    for (; i + 64 <= n; i += 64) {
        for (hit = 0, j = 0; j < 64; j++) hit |= same_value(x[i + j], c);
        if (hit) break;
    }
    for (; !same_value(x[i], c); i++) {
    }
    return i;
}

/* Along the last dim: find the extreme, then the first element equal to it.
   A max is vec_max's SIMD pass unless the row holds a NaN (vec_max may skip
   it; the NaN is then the max, as in chunk_extreme). */
static void extreme_rows(const ExtremeJob *job, int64_t begin, int64_t end)
{
    int64_t o, at;
    for (o = begin; o < end; o++) {
        const float *x = job->x + o * job->n;
        float best = !job->want_max      ? (float)chunk_extreme(0, x, job->n)
                     : has_nan(x, job->n) ? NAN
                                          : vec_max(x, job->n);
        at = first_same(x, job->n, best);
        if (job->values) job->values[o] = x[at];   /* of a +0 and a -0, the first */
        if (job->indices) job->indices[o] = at;
        if (job->grad_in) job->grad_in[o * job->n + at] = job->grad_out[o];
    }
}

static void extreme_task(void *ctx, int64_t begin, int64_t end)
{
    const ExtremeJob *job = ctx;
    float best[REDUCE_BLOCK];
    int64_t where[REDUCE_BLOCK];
    int64_t u, i, j;
    if (job->inner == 1) {
        extreme_rows(job, begin, end);
        return;
    }
    for (u = begin; u < end; u++) {
        int64_t o = u / job->blocks;
        int64_t first = (u % job->blocks) * REDUCE_BLOCK;
        int64_t width = job->inner - first < REDUCE_BLOCK ? job->inner - first : REDUCE_BLOCK;
        const float *x = job->x + o * job->n * job->inner + first;
        int64_t out_base = o * job->inner + first;
        for (j = 0; j < width; j++) {
            best[j] = x[j];
            where[j] = 0;
        }
        /* the first extreme wins ties; the first NaN beats everything */
        for (i = 1; i < job->n; i++) {
            const float *row = x + i * job->inner;
            for (j = 0; j < width; j++) {
                float v = row[j];
                int better = job->want_max ? v > best[j] : v < best[j];
                if (better || (v != v && best[j] == best[j])) {
                    best[j] = v;
                    where[j] = i;
                }
            }
        }
        for (j = 0; j < width; j++) {
            if (job->values) job->values[out_base + j] = best[j];
            if (job->indices) job->indices[out_base + j] = where[j];
            if (job->grad_in)
                job->grad_in[o * job->n * job->inner + where[j] * job->inner + first + j] =
                    job->grad_out[out_base + j];
        }
    }
}

static void extreme_run(ExtremeJob *job, int64_t outer, int64_t n, int64_t inner)
{
    job->outer = outer;
    job->n = n;
    job->inner = inner;
    job->blocks = (inner + REDUCE_BLOCK - 1) / REDUCE_BLOCK;
    if (outer * inner == 0) return;
    parallel_for(outer * job->blocks,
                 REDUCE_GRAIN / (n * (inner < REDUCE_BLOCK ? inner : REDUCE_BLOCK)) + 1,
                 extreme_task, job);
}

/* ---- the entries ---------------------------------------------------------- */

int cpu_sum(const float *x, float *out, const AcReduceGroups *g)
{
    reduce_into(x, g, KIND_SUM, 0, NULL, OP_SUM, out);
    return AC_OK;
}

int cpu_mean(const float *x, float *out, const AcReduceGroups *g)
{
    reduce_into(x, g, KIND_MEAN, 0, NULL, OP_SUM, out);
    return AC_OK;
}

int cpu_max(const float *x, float *out, const AcReduceGroups *g)
{
    reduce_into(x, g, KIND_MAX, 0, NULL, OP_MAX, out);
    return AC_OK;
}

int cpu_min(const float *x, float *out, const AcReduceGroups *g)
{
    reduce_into(x, g, KIND_MIN, 0, NULL, OP_MIN, out);
    return AC_OK;
}

int cpu_var(const float *x, float *out, const AcReduceGroups *g, int64_t correction)
{
    reduce_into(x, g, KIND_VAR, correction, NULL, OP_SUM, out);
    return AC_OK;
}

int cpu_std(const float *x, float *out, const AcReduceGroups *g, int64_t correction)
{
    reduce_into(x, g, KIND_STD, correction, NULL, OP_SUM, out);
    return AC_OK;
}

/* gin = gout * scale, each output's value over the elements it reduced. */
int cpu_sum_backward(const AcTensor *gout, float scale, AcTensor *work, AcTensor *gin,
                     const AcReduceGroups *g)
{
    int64_t o;
    for (o = 0; o < gout->size; o++) work->data[o] = gout->data[o] * scale;
    spread(g, gin->size, SPREAD_BROADCAST, NULL, work->data, NULL, gin->data);
    return AC_OK;
}

/* The gradient split evenly among the inputs that tie for the extreme. */
int cpu_extreme_backward(const AcTensor *a, const AcTensor *out, const AcTensor *gout,
                         AcTensor *work, AcTensor *gin, const AcReduceGroups *g)
{
    int64_t o;
    reduce_into(a->data, g, KIND_SUM, 0, out->data, OP_COUNT_EQ, work->data);
    for (o = 0; o < out->size; o++) work->data[o] = gout->data[o] / work->data[o];
    spread(g, a->size, SPREAD_MATCH, a->data, work->data, out->data, gin->data);
    return AC_OK;
}

/* var: 2 (x - mean) / (N - correction); std: that over 2 std, and 0 where
   std is 0. */
static int variance_backward(int is_std, const AcTensor *a, const AcTensor *out,
                             const AcTensor *gout, AcTensor *work, AcTensor *means, AcTensor *gin,
                             const AcReduceGroups *g, int64_t correction)
{
    int64_t denom = reduced_count(g) - correction, o;
    double inverse = denom > 0 ? 1.0 / (double)denom : INFINITY;
    reduce_into(a->data, g, KIND_MEAN, 0, NULL, OP_SUM, means->data);
    for (o = 0; o < out->size; o++) {
        double grad = gout->data[o];
        if (!is_std)
            work->data[o] = (float)(2.0 * grad * inverse);
        else
            work->data[o] = out->data[o] == 0.0f ? 0.0f : (float)(grad * inverse / out->data[o]);
    }
    spread(g, a->size, SPREAD_DEVIATION, a->data, work->data, means->data, gin->data);
    return AC_OK;
}

int cpu_var_backward(const AcTensor *a, const AcTensor *out, const AcTensor *gout, AcTensor *work,
                     AcTensor *means, AcTensor *gin, const AcReduceGroups *g, int64_t correction)
{
    return variance_backward(0, a, out, gout, work, means, gin, g, correction);
}

int cpu_std_backward(const AcTensor *a, const AcTensor *out, const AcTensor *gout, AcTensor *work,
                     AcTensor *means, AcTensor *gin, const AcReduceGroups *g, int64_t correction)
{
    return variance_backward(1, a, out, gout, work, means, gin, g, correction);
}

/* The sum of an int64 or bool tensor, exact in int64: one walk over a, each
   element added into its output (reduced dims have output stride 0). */
int cpu_sum_integer(const AcTensor *a, AcTensor *out, unsigned mask)
{
    int64_t out_stride[AC_MAX_DIMS], index[AC_MAX_DIMS] = {0};
    int64_t stride = 1, at = 0, i, *sum = data_i64(out);
    int d;
    memset(sum, 0, (size_t)out->size * sizeof *sum);
    for (d = a->ndim - 1; d >= 0; d--) {
        out_stride[d] = mask & (1u << d) ? 0 : stride;
        if (!(mask & (1u << d))) stride *= a->shape[d];
    }
    for (i = 0; i < a->size; i++) {
        sum[at] += a->dtype == AC_INT64 ? data_i64(a)[i] : data_u8(a)[i];
        for (d = a->ndim - 1; d >= 0; d--) {   /* next index, carrying into outer dims */
            at += out_stride[d];
            if (++index[d] < a->shape[d]) break;
            at -= out_stride[d] * a->shape[d];
            index[d] = 0;
        }
    }
    return AC_OK;
}

static int extreme_dim(int want_max, const float *x, float *values, int64_t *indices,
                       int64_t outer, int64_t n, int64_t inner)
{
    ExtremeJob job;
    memset(&job, 0, sizeof job);
    job.x = x;
    job.want_max = want_max;
    job.values = values;
    job.indices = indices;
    extreme_run(&job, outer, n, inner);
    return AC_OK;
}

int cpu_max_dim(const float *x, float *values, int64_t *indices, int64_t outer, int64_t n,
                int64_t inner)
{
    return extreme_dim(1, x, values, indices, outer, n, inner);
}

int cpu_min_dim(const float *x, float *values, int64_t *indices, int64_t outer, int64_t n,
                int64_t inner)
{
    return extreme_dim(0, x, values, indices, outer, n, inner);
}

/* The gradient goes to the first extreme, found again from the input. */
static int extreme_dim_backward(int want_max, const float *x, const float *gout, float *gin,
                                int64_t outer, int64_t n, int64_t inner)
{
    ExtremeJob job;
    memset(gin, 0, (size_t)(outer * n * inner) * sizeof(float));
    memset(&job, 0, sizeof job);
    job.x = x;
    job.want_max = want_max;
    job.grad_out = gout;
    job.grad_in = gin;
    extreme_run(&job, outer, n, inner);
    return AC_OK;
}

int cpu_max_dim_backward(const float *x, const float *gout, float *gin, int64_t outer, int64_t n,
                         int64_t inner)
{
    return extreme_dim_backward(1, x, gout, gin, outer, n, inner);
}

int cpu_min_dim_backward(const float *x, const float *gout, float *gin, int64_t outer, int64_t n,
                         int64_t inner)
{
    return extreme_dim_backward(0, x, gout, gin, outer, n, inner);
}
