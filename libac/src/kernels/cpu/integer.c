/*
 * cpu/integer.c - the CPU's typed elementwise kernel (typed_map in kernels.h):
 * integer and bool arithmetic, bitwise ops and shifts, and the float32 ops
 * that have no graph (floor_divide, remainder, maximum, minimum).
 *
 * It walks an AcMap like cpu/elementwise.c (runs along the innermost merged
 * dim, split among threads) but the operands may have any dtype: each run is
 * done in blocks of BLOCK elements, read into int64 (or float) buffers already
 * converted to the output's dtype, computed with the op's loop (the switch is
 * outside the loops, which the compiler vectorises), and stored narrowed to
 * the output's dtype. int64 arithmetic wraps as two's complement (done on
 * uint64_t, so no signed overflow is ever undefined).
 */
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>

#define BLOCK 256
#define TYPED_GRAIN 16384

typedef struct {
    const AcMap *map;
    const int *in_dtype;
    int out_dtype, op;
} TypedWalk;

/* v in dtype's range: integers wrap into a narrower type, bool is v != 0. */
static inline int64_t narrow(int64_t v, int dtype)
{
    switch (dtype) {
    case AC_UINT8: return (int64_t)(uint8_t)v;
    case AC_INT8: return (int64_t)(int8_t)(uint8_t)v;
    case AC_BOOL: return v != 0;
    default: return v;
    }
}

/* n elements of x (dtype, stepping step) into buf, converted to out_dtype. */
static void load_int(const void *x, int dtype, int64_t step, int64_t n, int out_dtype, int64_t *buf)
{
    int64_t j;
    switch (dtype) {
    case AC_INT64: {
        const int64_t *p = x;
        for (j = 0; j < n; j++) buf[j] = p[j * step];
        break;
    }
    case AC_INT8: {
        const int8_t *p = x;
        for (j = 0; j < n; j++) buf[j] = p[j * step];
        break;
    }
    case AC_FLOAT32: {   /* never for an integer output; kept total */
        const float *p = x;
        for (j = 0; j < n; j++) buf[j] = (int64_t)p[j * step];
        break;
    }
    default: {           /* uint8, bool */
        const uint8_t *p = x;
        for (j = 0; j < n; j++) buf[j] = p[j * step];
        break;
    }
    }
    if (out_dtype != AC_INT64 && dtype != out_dtype)
        for (j = 0; j < n; j++) buf[j] = narrow(buf[j], out_dtype);
}

static void load_float(const void *x, int dtype, int64_t step, int64_t n, float *buf)
{
    int64_t j;
    switch (dtype) {
    case AC_FLOAT32: {
        const float *p = x;
        for (j = 0; j < n; j++) buf[j] = p[j * step];
        break;
    }
    case AC_INT64: {
        const int64_t *p = x;
        for (j = 0; j < n; j++) buf[j] = (float)p[j * step];
        break;
    }
    case AC_INT8: {
        const int8_t *p = x;
        for (j = 0; j < n; j++) buf[j] = (float)p[j * step];
        break;
    }
    default: {
        const uint8_t *p = x;
        for (j = 0; j < n; j++) buf[j] = (float)p[j * step];
        break;
    }
    }
}

static inline int64_t wrap_add(int64_t u, int64_t v) { return (int64_t)((uint64_t)u + (uint64_t)v); }
static inline int64_t wrap_sub(int64_t u, int64_t v) { return (int64_t)((uint64_t)u - (uint64_t)v); }
static inline int64_t wrap_mul(int64_t u, int64_t v) { return (int64_t)((uint64_t)u * (uint64_t)v); }

/* Python's u // v and u % v (v != 0; INT64_MIN // -1 wraps, as torch). */
static inline int64_t floor_div(int64_t u, int64_t v)
{
    int64_t q, r;
    if (v == -1) return wrap_sub(0, u);
    q = u / v;
    r = u % v;
    return r != 0 && ((r < 0) != (v < 0)) ? q - 1 : q;
}

static inline int64_t floor_mod(int64_t u, int64_t v)
{
    int64_t r;
    if (v == -1) return 0;
    r = u % v;
    return r != 0 && ((r < 0) != (v < 0)) ? r + v : r;
}

/* u ** v by squaring, wrapping; a negative v gives 1 / u ** -v truncated. */
static int64_t int_pow(int64_t u, int64_t v)
{
    uint64_t result = 1, base = (uint64_t)u;
    if (v < 0) return u == 1 ? 1 : u == -1 ? ((v & 1) ? -1 : 1) : 0;
    while (v) {
        if (v & 1) result *= base;
        base *= base;
        v >>= 1;
    }
    return (int64_t)result;
}

static inline int64_t shift_left(int64_t u, int64_t v)
{
    return v < 0 || v >= 64 ? 0 : (int64_t)((uint64_t)u << v);
}

/* Arithmetic shift: past 63 places only the sign is left. */
static inline int64_t shift_right(int64_t u, int64_t v)
{
    if (v < 0 || v >= 64) return u < 0 ? -1 : 0;
    return u < 0 ? ~(int64_t)(~(uint64_t)u >> v) : (int64_t)((uint64_t)u >> v);
}

/* o = op(u, v) (v unused by the unary ops) over n elements in out_dtype. */
static void int_compute(int op, int out_dtype, const int64_t *restrict u, const int64_t *restrict v,
                        int64_t *restrict o, int64_t n)
{
    const int logic = out_dtype == AC_BOOL;
    int64_t j;
    switch (op) {
    case AC_OP_ADD:
        if (logic) for (j = 0; j < n; j++) o[j] = u[j] | v[j];
        else for (j = 0; j < n; j++) o[j] = wrap_add(u[j], v[j]);
        break;
    case AC_OP_SUB: for (j = 0; j < n; j++) o[j] = wrap_sub(u[j], v[j]); break;
    case AC_OP_MUL:
        if (logic) for (j = 0; j < n; j++) o[j] = u[j] & v[j];
        else for (j = 0; j < n; j++) o[j] = wrap_mul(u[j], v[j]);
        break;
    case AC_OP_FLOOR_DIVIDE: for (j = 0; j < n; j++) o[j] = floor_div(u[j], v[j]); break;
    case AC_OP_REMAINDER: for (j = 0; j < n; j++) o[j] = floor_mod(u[j], v[j]); break;
    case AC_OP_POW: for (j = 0; j < n; j++) o[j] = int_pow(u[j], v[j]); break;
    case AC_OP_BITWISE_AND: for (j = 0; j < n; j++) o[j] = u[j] & v[j]; break;
    case AC_OP_BITWISE_OR: for (j = 0; j < n; j++) o[j] = u[j] | v[j]; break;
    case AC_OP_BITWISE_XOR: for (j = 0; j < n; j++) o[j] = u[j] ^ v[j]; break;
    case AC_OP_LSHIFT: for (j = 0; j < n; j++) o[j] = shift_left(u[j], v[j]); break;
    case AC_OP_RSHIFT: for (j = 0; j < n; j++) o[j] = shift_right(u[j], v[j]); break;
    case AC_OP_MAXIMUM: for (j = 0; j < n; j++) o[j] = u[j] > v[j] ? u[j] : v[j]; break;
    case AC_OP_MINIMUM: for (j = 0; j < n; j++) o[j] = u[j] < v[j] ? u[j] : v[j]; break;
    case TYPED_NEG: for (j = 0; j < n; j++) o[j] = wrap_sub(0, u[j]); break;
    case TYPED_ABS: for (j = 0; j < n; j++) o[j] = u[j] < 0 ? wrap_sub(0, u[j]) : u[j]; break;
    case TYPED_BITWISE_NOT:
        if (logic) for (j = 0; j < n; j++) o[j] = !u[j];
        else for (j = 0; j < n; j++) o[j] = ~u[j];
        break;
    case TYPED_SIGN: for (j = 0; j < n; j++) o[j] = (u[j] > 0) - (u[j] < 0); break;
    default: for (j = 0; j < n; j++) o[j] = 0; break;
    }
}

/* Python's float u // v and u % v, as torch computes them. */
static inline float float_floor_div(float u, float v)
{
    float mod, div, q;
    if (v == 0.0f) return u / v;
    mod = fmodf(u, v);
    div = (u - mod) / v;
    if (mod != 0.0f && ((v < 0.0f) != (mod < 0.0f))) div -= 1.0f;
    if (div == 0.0f) return copysignf(0.0f, u / v);
    q = floorf(div);
    return div - q > 0.5f ? q + 1.0f : q;
}

static inline float float_mod(float u, float v)
{
    float mod = fmodf(u, v);
    return mod != 0.0f && ((v < 0.0f) != (mod < 0.0f)) ? mod + v : mod;
}

static void float_compute(int op, const float *restrict u, const float *restrict v, float *restrict o,
                          int64_t n)
{
    int64_t j;
    switch (op) {
    case AC_OP_FLOOR_DIVIDE: for (j = 0; j < n; j++) o[j] = float_floor_div(u[j], v[j]); break;
    case AC_OP_REMAINDER: for (j = 0; j < n; j++) o[j] = float_mod(u[j], v[j]); break;
    case AC_OP_MAXIMUM:
        for (j = 0; j < n; j++) o[j] = u[j] != u[j] || u[j] > v[j] ? u[j] : v[j];
        break;
    case AC_OP_MINIMUM:
        for (j = 0; j < n; j++) o[j] = u[j] != u[j] || u[j] < v[j] ? u[j] : v[j];
        break;
    case TYPED_SIGN: for (j = 0; j < n; j++) o[j] = (float)((u[j] > 0.0f) - (u[j] < 0.0f)); break;
    default: for (j = 0; j < n; j++) o[j] = NAN; break;
    }
}

static size_t dtype_bytes(int dtype) { return dtype == AC_INT64 ? 8 : dtype == AC_FLOAT32 ? 4 : 1; }

/* One run of n outputs starting at out index pos; x[k] are the inputs' element
   offsets, stepping step[k]. */
static void typed_run(const TypedWalk *w, const int64_t *at, const int64_t *step, int64_t pos, int64_t n)
{
    const AcMap *m = w->map;
    const int R = w->out_dtype;
    int64_t ibuf[2][BLOCK], obuf[BLOCK];
    float fbuf[2][BLOCK], fobuf[BLOCK];
    int64_t done, j;
    int k;
    for (done = 0; done < n; done += BLOCK) {
        const int64_t len = n - done < BLOCK ? n - done : BLOCK;
        if (R == AC_FLOAT32) {
            float *out = (float *)(void *)m->out + pos + done;
            for (k = 0; k < m->n_in; k++)
                load_float((const char *)m->in[k] + (size_t)(at[k] + done * step[k]) * dtype_bytes(w->in_dtype[k]),
                           w->in_dtype[k], step[k], len, fbuf[k]);
            float_compute(w->op, fbuf[0], m->n_in > 1 ? fbuf[1] : fbuf[0], fobuf, len);
            for (j = 0; j < len; j++) out[j] = fobuf[j];
            continue;
        }
        for (k = 0; k < m->n_in; k++)
            load_int((const char *)m->in[k] + (size_t)(at[k] + done * step[k]) * dtype_bytes(w->in_dtype[k]),
                     w->in_dtype[k], step[k], len, R, ibuf[k]);
        int_compute(w->op, R, ibuf[0], m->n_in > 1 ? ibuf[1] : ibuf[0], obuf, len);
        if (R == AC_INT64) {
            int64_t *out = (int64_t *)(void *)m->out + pos + done;
            for (j = 0; j < len; j++) out[j] = obuf[j];
        } else {
            uint8_t *out = (uint8_t *)(void *)m->out + pos + done;
            if (R == AC_BOOL)
                for (j = 0; j < len; j++) out[j] = obuf[j] != 0;
            else
                for (j = 0; j < len; j++) out[j] = (uint8_t)obuf[j];
        }
    }
}

/* Outputs [begin, end): find where begin sits, then go run by run. */
static void typed_chunk(void *ctx, int64_t begin, int64_t end)
{
    const TypedWalk *w = ctx;
    const AcMap *m = w->map;
    const int last = m->ndim - 1;
    int64_t index[AC_MAX_DIMS], at[AC_MAP_MAX_IN], step[AC_MAP_MAX_IN], rest = begin, pos = begin;
    int d, k;
    for (k = 0; k < m->n_in; k++) {
        at[k] = 0;
        step[k] = m->strides[k][last];
    }
    for (d = last; d >= 0; d--) {
        index[d] = rest % m->shape[d];
        rest /= m->shape[d];
        for (k = 0; k < m->n_in; k++) at[k] += index[d] * m->strides[k][d];
    }
    while (pos < end) {
        int64_t n = m->shape[last] - index[last];
        if (n > end - pos) n = end - pos;
        typed_run(w, at, step, pos, n);
        pos += n;
        index[last] += n;
        for (k = 0; k < m->n_in; k++) at[k] += n * step[k];
        for (d = last; d > 0 && index[d] == m->shape[d]; d--) {
            index[d] = 0;
            index[d - 1]++;
            for (k = 0; k < m->n_in; k++) at[k] += m->strides[k][d - 1] - m->shape[d] * m->strides[k][d];
        }
    }
}

int cpu_typed_map(const AcMap *m, const int *in_dtype, int out_dtype, int op)
{
    TypedWalk walk;
    walk.map = m;
    walk.in_dtype = in_dtype;
    walk.out_dtype = out_dtype;
    walk.op = op;
    if (m->size <= TYPED_GRAIN) typed_chunk(&walk, 0, m->size);
    else parallel_for(m->size, TYPED_GRAIN, typed_chunk, &walk);
    return AC_OK;
}

/* ---- max/min along a dim of an integer tensor --------------------------------- */

static inline int64_t int_at(const AcTensor *a, int64_t i)
{
    switch (a->dtype) {
    case AC_INT64: return ((const int64_t *)(const void *)a->data)[i];
    case AC_INT8: return ((const int8_t *)(const void *)a->data)[i];
    default: return ((const uint8_t *)(const void *)a->data)[i];
    }
}

int cpu_int_extreme(const AcTensor *a, int want_max, void *values, int64_t *indices, int64_t outer,
                    int64_t n, int64_t inner)
{
    int64_t o, j, i;
    for (o = 0; o < outer; o++)
        for (j = 0; j < inner; j++) {
            const int64_t base = o * n * inner + j;
            int64_t best = int_at(a, base), at = 0;
            for (i = 1; i < n; i++) {
                const int64_t v = int_at(a, base + i * inner);
                if (want_max ? v > best : v < best) {
                    best = v;
                    at = i;
                }
            }
            if (values) {
                if (a->dtype == AC_INT64) ((int64_t *)values)[o * inner + j] = best;
                else ((uint8_t *)values)[o * inner + j] = (uint8_t)best;
            }
            if (indices) indices[o * inner + j] = at;
        }
    return AC_OK;
}

/* ---- integer matmul ------------------------------------------------------------- */

typedef struct {
    const MatmulShape *s;
    const AcTensor *a, *b;
    AcTensor *out;
} IntMatmulJob;

/* Output batches [begin, end): row by row, c[i][:] += a[i][p] * b[p][:] (the
   inner loop runs along b's and c's rows), in uint64_t so overflow wraps. */
static void int_matmul_task(void *ctx, int64_t begin, int64_t end)
{
    const IntMatmulJob *job = ctx;
    const MatmulShape *s = job->s;
    const int wide = job->out->dtype == AC_INT64;
    int64_t t, i, p, j;
    for (t = begin; t < end; t++) {
        const int64_t am = matmul_batch_matrix(s, s->a_stride, t) * s->n * s->k;
        const int64_t bm = matmul_batch_matrix(s, s->b_stride, t) * s->k * s->m;
        const int64_t cm = t * s->n * s->m;
        for (i = 0; i < s->n; i++) {
            if (wide) {
                const uint64_t *a = (const uint64_t *)(const void *)job->a->data + am + i * s->k;
                const uint64_t *b = (const uint64_t *)(const void *)job->b->data + bm;
                uint64_t *c = (uint64_t *)(void *)job->out->data + cm + i * s->m;
                for (j = 0; j < s->m; j++) c[j] = 0;
                for (p = 0; p < s->k; p++) {
                    const uint64_t u = a[p];
                    for (j = 0; j < s->m; j++) c[j] += u * b[p * s->m + j];
                }
            } else {
                const uint8_t *a = (const uint8_t *)(const void *)job->a->data + am + i * s->k;
                const uint8_t *b = (const uint8_t *)(const void *)job->b->data + bm;
                uint8_t *c = (uint8_t *)(void *)job->out->data + cm + i * s->m;
                for (j = 0; j < s->m; j++) {
                    uint64_t acc = 0;
                    for (p = 0; p < s->k; p++) acc += (uint64_t)a[p] * b[p * s->m + j];
                    c[j] = (uint8_t)acc;
                }
            }
        }
    }
}

int cpu_int_matmul(const MatmulShape *s, const AcTensor *a, const AcTensor *b, AcTensor *out)
{
    IntMatmulJob job;
    int64_t work = s->n * s->k * s->m;
    job.s = s;
    job.a = a;
    job.b = b;
    job.out = out;
    if (s->batches * s->n * s->m == 0) return AC_OK;
    parallel_for(s->batches, work >= 65536 ? 1 : 65536 / (work > 0 ? work : 1), int_matmul_task, &job);
    return AC_OK;
}
