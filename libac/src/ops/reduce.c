/*
 * reduce.c - reductions: sum, mean, max, min, var and std over any set of
 * dims, max/min along one dim with the index of the extreme, and argmax;
 * each forward with its backward right under it.
 *
 * Sums accumulate in double over fixed chunks of REDUCE_CHUNK elements whose
 * partial results are combined in order, so a result is bit-identical
 * whatever the thread count: threads only decide who computes a chunk or an
 * output, never how values are grouped.
 *
 * Not here: softmax and log_softmax (activation.c), losses (loss.c).
 */
#include "graph.h"

#include <math.h>
#include <string.h>

#define REDUCE_CHUNK 4096
#define REDUCE_ROUND 1024      /* chunk partials computed per parallel round */
#define REDUCE_BLOCK 1024      /* outputs accumulated at once: rows are read 4 KB at a time */
#define REDUCE_GRAIN 16384     /* elements of work per parallel task, at least */

enum { OP_SUM, OP_MAX, OP_MIN, OP_SQDEV, OP_COUNT_EQ };
enum { KIND_SUM, KIND_MEAN, KIND_MAX, KIND_MIN, KIND_VAR, KIND_STD };

/* ---- planning: which dims, what shape ------------------------------------ */

/* dims as a bit mask over a's dims; a 0-d tensor accepts dim 0 or -1, as in PyTorch. */
static int reduce_mask(const char *op, const AcTensor *a, const int *dims, int n_dims,
                       unsigned *mask)
{
    int rank = a->ndim > 0 ? a->ndim : 1;
    int i;
    *mask = 0;
    if (n_dims < 0 || n_dims > AC_MAX_DIMS)
        return error_set(AC_ERR_ARG, "%s: %d dims given for a tensor of shape %s", op,
                         n_dims, tensor_shape_str(a));
    if (!dims || n_dims == 0) {
        *mask = (1u << a->ndim) - 1u;
        return AC_OK;
    }
    for (i = 0; i < n_dims; i++) {
        int d = dim_normalize(op, dims[i], rank);
        if (d < 0) return ac_last_error_code();
        if (*mask & (1u << d))
            return error_set(AC_ERR_ARG, "%s: dim %d appears more than once", op, dims[i]);
        *mask |= 1u << d;
    }
    if (a->ndim == 0) *mask = 0;
    return AC_OK;
}

/* The output shape: reduced dims become 1 (keepdim) or go. Returns its ndim. */
static int reduced_shape(const AcTensor *a, unsigned mask, int keepdim, int64_t *shape)
{
    int d, n = 0;
    for (d = 0; d < a->ndim; d++) {
        if (!(mask & (1u << d))) shape[n++] = a->shape[d];
        else if (keepdim) shape[n++] = 1;
    }
    return n;
}

static int64_t reduced_count(const AcTensor *a, unsigned mask)
{
    int64_t count = 1;
    int d;
    for (d = 0; d < a->ndim; d++)
        if (mask & (1u << d)) count *= a->shape[d];
    return count;
}

/*
 * a's dims with size-1 dims dropped and neighbours of the same kind merged:
 * a contiguous tensor's adjacent dims always merge, so every reduction is an
 * alternation of kept and reduced groups, the last of them contiguous.
 */
typedef struct {
    int n;
    int64_t size[AC_MAX_DIMS];
    int64_t stride[AC_MAX_DIMS];      /* in a's elements */
    int64_t out_stride[AC_MAX_DIMS];  /* in the output's elements; 0 for reduced groups */
    int reduced[AC_MAX_DIMS];
} Groups;

static void group_dims(const AcTensor *a, unsigned mask, Groups *g)
{
    int d, i;
    int64_t stride = 1, out_stride = 1;
    g->n = 0;
    for (d = 0; d < a->ndim; d++) {
        int red = (mask >> d) & 1u;
        if (a->shape[d] == 1) continue;
        if (g->n > 0 && g->reduced[g->n - 1] == red) {
            g->size[g->n - 1] *= a->shape[d];
        } else {
            g->size[g->n] = a->shape[d];
            g->reduced[g->n] = red;
            g->n++;
        }
    }
    for (i = g->n - 1; i >= 0; i--) {
        g->stride[i] = stride;
        stride *= g->size[i];
        g->out_stride[i] = g->reduced[i] ? 0 : out_stride;
        if (!g->reduced[i]) out_stride *= g->size[i];
    }
}

/* Offset of the index-th element of a row-major walk over n dims. */
static int64_t index_offset(int64_t index, const int64_t *size, const int64_t *stride, int n)
{
    int64_t offset = 0;
    int d;
    for (d = n - 1; d >= 0; d--) {
        offset += (index % size[d]) * stride[d];
        index /= size[d];
    }
    return offset;
}

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

/* Fill job's layout from a's groups. */
static void job_layout(ReduceJob *job, const AcTensor *a, unsigned mask)
{
    Groups g;
    int i, last;
    group_dims(a, mask, &g);
    last = g.n - 1;
    job->inner_reduced = g.n == 0 || g.reduced[last];
    job->inner = g.n == 0 ? 1 : g.size[last];
    job->n_kept = job->n_red = 0;
    job->outer = job->combos = 1;
    for (i = 0; i < last; i++) {
        if (g.reduced[i]) {
            job->red_size[job->n_red] = g.size[i];
            job->red_stride[job->n_red++] = g.stride[i];
            job->combos *= g.size[i];
        } else {
            job->kept_size[job->n_kept] = g.size[i];
            job->kept_stride[job->n_kept++] = g.stride[i];
            job->outer *= g.size[i];
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

/* Reduce a over mask into out (contiguous, the kept dims in order). */
static void reduce_into(const AcTensor *a, unsigned mask, int kind, int correction,
                        const float *centers, int op, float *out)
{
    ReduceJob job;
    int64_t count = reduced_count(a, mask);
    memset(&job, 0, sizeof job);
    job_layout(&job, a, mask);
    job.x = a->data;
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
    const float *x;          /* the input */
    const float *g;          /* per output: the factor to spread */
    const float *values;     /* per output: the extreme (MATCH) or the mean (DEVIATION) */
    float *gin;
    Groups groups;
    int64_t inner;
} SpreadJob;

static void spread_task(void *ctx, int64_t begin, int64_t end)
{
    const SpreadJob *job = ctx;
    const Groups *gr = &job->groups;
    int n_outer = gr->n > 0 ? gr->n - 1 : 0;
    int inner_kept = gr->n > 0 && !gr->reduced[gr->n - 1];
    int64_t q, j;
    for (q = begin; q < end; q++) {
        int64_t o = index_offset(q, gr->size, gr->out_stride, n_outer);
        const float *x = job->x + q * job->inner;
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

/* gin (a's shape) from per-output factors g, spread back over the reduced dims. */
static AcTensor *spread(const char *op, const AcTensor *a, unsigned mask, int mode,
                        const float *g, const float *values)
{
    AcTensor *gin = tensor_alloc(op, a->shape, a->ndim);
    SpreadJob job;
    int64_t rows, per_task;
    if (!gin) return NULL;
    job.mode = mode;
    job.x = a->data;
    job.g = g;
    job.values = values;
    job.gin = gin->data;
    group_dims(a, mask, &job.groups);
    job.inner = job.groups.n > 0 ? job.groups.size[job.groups.n - 1] : 1;
    rows = job.inner > 0 ? a->size / job.inner : 0;
    per_task = job.inner < REDUCE_GRAIN ? REDUCE_GRAIN / (job.inner > 0 ? job.inner : 1) : 1;
    parallel_for(rows, per_task, spread_task, &job);
    return gin;
}

/* ---- sum, mean, max, min, var, std --------------------------------------- */

typedef struct {
    unsigned mask;
    int kind;
    int correction;
} ReduceCtx;

static const char *kind_name(int kind)
{
    static const char *const names[] = {"sum", "mean", "max", "min", "var", "std"};
    return names[kind];
}

/*
 * sum and mean spread the gradient evenly over what they reduced. max and min
 * split it evenly among the inputs that tie for the extreme, as PyTorch's
 * amax/amin (and full max/min) do. var: 2 (x - mean) / (N - correction);
 * std: that over 2 std, and 0 where std is 0, as PyTorch does.
 */
static int reduce_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const ReduceCtx *ctx = node->context;
    const AcTensor *a = node->inputs[0];
    const AcTensor *out = node->output;
    const char *op = kind_name(ctx->kind);
    int64_t count = reduced_count(a, ctx->mask), o;
    AcTensor *factor, *values = NULL;
    if (!input_needs_grad(node, 0)) return AC_OK;
    factor = tensor_alloc(op, out->shape, out->ndim);   /* scratch in backward's scope */
    if (!factor) return ac_last_error_code();
    if (ctx->kind == KIND_SUM || ctx->kind == KIND_MEAN) {
        float scale = ctx->kind != KIND_MEAN ? 1.0f : count > 0 ? (float)(1.0 / (double)count) : NAN;
        for (o = 0; o < out->size; o++) factor->data[o] = gout->data[o] * scale;
        gin[0] = spread(op, a, ctx->mask, SPREAD_BROADCAST, factor->data, NULL);
    } else if (ctx->kind == KIND_MAX || ctx->kind == KIND_MIN) {
        reduce_into(a, ctx->mask, KIND_SUM, 0, out->data, OP_COUNT_EQ, factor->data);
        for (o = 0; o < out->size; o++) factor->data[o] = gout->data[o] / factor->data[o];
        gin[0] = spread(op, a, ctx->mask, SPREAD_MATCH, factor->data, out->data);
    } else {
        int64_t denom = count - ctx->correction;
        double inverse = denom > 0 ? 1.0 / (double)denom : INFINITY;
        values = tensor_alloc(op, out->shape, out->ndim);
        if (!values) return ac_last_error_code();
        reduce_into(a, ctx->mask, KIND_MEAN, 0, NULL, OP_SUM, values->data);
        for (o = 0; o < out->size; o++) {
            double g = gout->data[o];
            if (ctx->kind == KIND_VAR)
                factor->data[o] = (float)(2.0 * g * inverse);
            else
                factor->data[o] = out->data[o] == 0.0f ? 0.0f
                                                       : (float)(g * inverse / out->data[o]);
        }
        gin[0] = spread(op, a, ctx->mask, SPREAD_DEVIATION, factor->data, values->data);
    }
    return gin[0] ? AC_OK : ac_last_error_code();
}

/* The sum of an int64 or bool tensor, exact in int64: one walk over a, each
   element added into its output (reduced dims have output stride 0). */
static AcTensor *integer_sum(const AcTensor *a, unsigned mask, int keepdim)
{
    int64_t shape[AC_MAX_DIMS], out_stride[AC_MAX_DIMS], index[AC_MAX_DIMS] = {0};
    int64_t stride = 1, at = 0, i, *sum;
    int d, ndim = reduced_shape(a, mask, keepdim, shape);
    AcTensor *out = tensor_create("sum", shape, ndim, AC_INT64, NULL, 0, 0);
    if (!out) return NULL;
    sum = data_i64(out);
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
    return out;
}

static AcTensor *reduce_op(int kind, const AcTensor *a, const int *dims, int n_dims,
                           int correction, int keepdim);

/* attr: kind, correction, keepdim, n_dims (-1 for all), then the dims */
int reduce_replay(AcTensor **t, const double *attr)
{
    int dims[AC_MAX_DIMS], i, n_dims = (int)attr[3];
    for (i = 0; i < n_dims; i++) dims[i] = (int)attr[4 + i];
    return graph_made(t[1] = reduce_op((int)attr[0], t[0], n_dims < 0 ? NULL : dims, n_dims < 0 ? 0 : n_dims,
                                       (int)attr[1], (int)attr[2]));
}

static AcTensor *reduce_record(int kind, const AcTensor *a, const int *dims, int n_dims,
                               int correction, int keepdim)
{
    double attr[4 + AC_MAX_DIMS];
    int i;
    attr[0] = kind;
    attr[1] = correction;
    attr[2] = keepdim;
    attr[3] = dims ? n_dims : -1;
    for (i = 0; dims && i < n_dims; i++) attr[4 + i] = dims[i];
    return graph_op(kind_name(kind), reduce_replay, 1, &a, attr, 4 + (dims ? n_dims : 0));
}

static AcTensor *reduce_op(int kind, const AcTensor *a, const int *dims, int n_dims,
                           int correction, int keepdim)
{
    const char *op = kind_name(kind);
    int64_t shape[AC_MAX_DIMS];
    unsigned mask;
    int ndim;
    AcTensor *out;
    ReduceCtx *ctx;
    if (ops_observed && (!dims || (n_dims >= 0 && n_dims <= AC_MAX_DIMS)))
        return reduce_record(kind, a, dims, n_dims, correction, keepdim);
    if (kind == KIND_SUM && a && a->dtype != AC_FLOAT32)
        return reduce_mask(op, a, dims, n_dims, &mask) ? NULL : integer_sum(a, mask, keepdim);
    if (tensor_check(op, a, "a")) return NULL;
    if (reduce_mask(op, a, dims, n_dims, &mask)) return NULL;
    if (correction < 0)
        return error_null(AC_ERR_ARG, "%s: correction must be >= 0, got %d", op, correction);
    ndim = reduced_shape(a, mask, keepdim, shape);
    /* max and min of nothing have no value (sum is 0, mean NaN) */
    if ((kind == KIND_MAX || kind == KIND_MIN) && reduced_count(a, mask) == 0 &&
        reduced_count(a, ~mask & ((1u << a->ndim) - 1u)) > 0)
        return error_null(AC_ERR_SHAPE, "%s: cannot reduce shape %s over a dim of size 0", op,
                          tensor_shape_str(a));
    out = op_output(op, shape, ndim, &a, 1, reduce_backward, sizeof(ReduceCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) {
        ctx->mask = mask;
        ctx->kind = kind;
        ctx->correction = correction;
    }
    if (out->size > 0)
        reduce_into(a, mask, kind, correction, NULL,
                    kind == KIND_MAX ? OP_MAX : kind == KIND_MIN ? OP_MIN : OP_SUM, out->data);
    return out;
}

AcTensor *ac_sum(const AcTensor *a, const int *dims, int n_dims, int keepdim)
{
    return reduce_op(KIND_SUM, a, dims, n_dims, 0, keepdim);
}

AcTensor *ac_mean(const AcTensor *a, const int *dims, int n_dims, int keepdim)
{
    return reduce_op(KIND_MEAN, a, dims, n_dims, 0, keepdim);
}

AcTensor *ac_max(const AcTensor *a, const int *dims, int n_dims, int keepdim)
{
    return reduce_op(KIND_MAX, a, dims, n_dims, 0, keepdim);
}

AcTensor *ac_min(const AcTensor *a, const int *dims, int n_dims, int keepdim)
{
    return reduce_op(KIND_MIN, a, dims, n_dims, 0, keepdim);
}

AcTensor *ac_var(const AcTensor *a, const int *dims, int n_dims, int correction, int keepdim)
{
    return reduce_op(KIND_VAR, a, dims, n_dims, correction, keepdim);
}

AcTensor *ac_std(const AcTensor *a, const int *dims, int n_dims, int correction, int keepdim)
{
    return reduce_op(KIND_STD, a, dims, n_dims, correction, keepdim);
}

/* ---- max/min along one dim, with indices --------------------------------- */

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

/* Along the last dim: find the extreme, then the first element equal to it. */
static void extreme_rows(const ExtremeJob *job, int64_t begin, int64_t end)
{
    int64_t o, at;
    for (o = begin; o < end; o++) {
        const float *x = job->x + o * job->n;
        float best = (float)chunk_extreme(job->want_max, x, job->n);
        for (at = 0; !same_value(x[at], best); at++) {
        }
        if (job->values) job->values[o] = best;
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

static void extreme_run(ExtremeJob *job, const AcTensor *a, int dim)
{
    int d;
    job->x = a->data;
    job->outer = job->inner = 1;
    job->n = a->ndim > 0 ? a->shape[dim] : 1;
    for (d = 0; d < a->ndim; d++) {
        if (d < dim) job->outer *= a->shape[d];
        if (d > dim) job->inner *= a->shape[d];
    }
    job->blocks = (job->inner + REDUCE_BLOCK - 1) / REDUCE_BLOCK;
    if (job->outer * job->inner == 0) return;
    parallel_for(job->outer * job->blocks,
                 REDUCE_GRAIN / (job->n * (job->inner < REDUCE_BLOCK ? job->inner : REDUCE_BLOCK)) + 1,
                 extreme_task, job);
}

typedef struct {
    int dim;
    int want_max;
} ExtremeCtx;

/* The gradient goes to the index forward returned (the first extreme), as
   PyTorch's max(dim) does; the indices are found again from the input. */
static int extreme_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const ExtremeCtx *ctx = node->context;
    const AcTensor *a = node->inputs[0];
    ExtremeJob job;
    if (!input_needs_grad(node, 0)) return AC_OK;
    gin[0] = tensor_alloc(ctx->want_max ? "max" : "min", a->shape, a->ndim);
    if (!gin[0]) return ac_last_error_code();
    if (a->size > 0) memset(gin[0]->data, 0, (size_t)a->size * sizeof(float));
    memset(&job, 0, sizeof job);
    job.want_max = ctx->want_max;
    job.grad_out = gout->data;
    job.grad_in = gin[0]->data;
    extreme_run(&job, a, ctx->dim);
    return AC_OK;
}

/* Validate a and dim; fill the output shape. Returns the normalised dim or -1. */
static int extreme_plan(const char *op, const AcTensor *a, int dim, int keepdim,
                        int64_t *shape, int *ndim)
{
    unsigned mask;
    if (tensor_check(op, a, "a")) return -1;
    dim = dim_normalize(op, dim, a->ndim > 0 ? a->ndim : 1);
    if (dim < 0) return -1;
    mask = a->ndim > 0 ? 1u << dim : 0;
    if (a->ndim > 0 && a->shape[dim] == 0) {
        error_set(AC_ERR_SHAPE, "%s: cannot reduce dim %d of shape %s: it has size 0", op, dim,
                  tensor_shape_str(a));
        return -1;
    }
    *ndim = reduced_shape(a, mask, keepdim, shape);
    return a->ndim > 0 ? dim : 0;
}

static AcTensor *extreme_dim(const char *op, int want_max, const AcTensor *a, int dim,
                             int keepdim, AcTensor **indices)
{
    int64_t shape[AC_MAX_DIMS];
    int ndim;
    AcTensor *values, *index = NULL;
    ExtremeCtx *ctx;
    ExtremeJob job;
    if (indices) *indices = NULL;
    dim = extreme_plan(op, a, dim, keepdim, shape, &ndim);
    if (dim < 0) return NULL;
    if (indices) {
        index = tensor_create(op, shape, ndim, AC_INT64, NULL, 0, 0);
        if (!index) return NULL;
    }
    values = op_output(op, shape, ndim, &a, 1, extreme_backward, sizeof(ExtremeCtx));
    if (!values) {
        if (index) ac_tensor_free(index);
        return NULL;
    }
    ctx = op_context(values);
    if (ctx) {
        ctx->dim = dim;
        ctx->want_max = want_max;
    }
    memset(&job, 0, sizeof job);
    job.want_max = want_max;
    job.values = values->data;
    job.indices = index ? data_i64(index) : NULL;
    extreme_run(&job, a, dim);
    if (indices) *indices = index;
    return values;
}

AcTensor *ac_max_dim(const AcTensor *a, int dim, int keepdim, AcTensor **indices)
{
    return extreme_dim("max", 1, a, dim, keepdim, indices);
}

AcTensor *ac_min_dim(const AcTensor *a, int dim, int keepdim, AcTensor **indices)
{
    return extreme_dim("min", 0, a, dim, keepdim, indices);
}

AcTensor *ac_argmax(const AcTensor *a, int dim, int keepdim)
{
    int64_t shape[AC_MAX_DIMS];
    int ndim;
    AcTensor *index;
    ExtremeJob job;
    dim = extreme_plan("argmax", a, dim, keepdim, shape, &ndim);
    if (dim < 0) return NULL;
    index = tensor_create("argmax", shape, ndim, AC_INT64, NULL, 0, 0);
    if (!index) return NULL;
    memset(&job, 0, sizeof job);
    job.want_max = 1;
    job.indices = data_i64(index);
    extreme_run(&job, a, dim);
    return index;
}
