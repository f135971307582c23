/*
 * creation.c - the factories (filled, from caller data, ranges, identity), the
 * per-thread random generator and the tensors it fills.
 *
 * Each thread has its own xoshiro128+ state, so threads never contend and a
 * seed gives the same draws on any thread (ac_manual_seed seeds the caller's).
 */
#include "graph.h"

#include <math.h>
#include <string.h>

AcTensor *ac_tensor_new(const int64_t *shape, int ndim)
{
    return ac_full(shape, ndim, 0.0f);
}

AcTensor *ac_full(const int64_t *shape, int ndim, float value)
{
    AcTensor *t = tensor_alloc("full", shape, ndim);
    int64_t i;
    if (!t) return NULL;
    for (i = 0; i < t->size; i++) t->data[i] = value;
    return t;
}

AcTensor *ac_tensor_from_data(const float *data, const int64_t *shape, int ndim)
{
    int64_t size = 0;   /* set by shape_check; GCC cannot tell when it inlines it */
    AcTensor *t;
    if (shape_check("tensor_from_data", shape, ndim, &size)) return NULL;
    if (!data && size > 0) return error_null(AC_ERR_ARG, "tensor_from_data: data is NULL");
    t = tensor_alloc("tensor_from_data", shape, ndim);
    if (t && size > 0) memcpy(t->data, data, (size_t)size * sizeof(float));
    return t;
}

AcTensor *ac_tensor_new_typed(const int64_t *shape, int ndim, int dtype)
{
    AcTensor *t = tensor_create("tensor_new", shape, ndim, dtype, NULL, 0, 0);
    if (t) memset(t->data, 0, (size_t)t->size * elem_size(t));
    return t;
}

AcTensor *ac_tensor_from_typed(const void *data, const int64_t *shape, int ndim, int dtype)
{
    int64_t size = 0;   /* set by shape_check; GCC cannot tell when it inlines it */
    int64_t i;
    AcTensor *t;
    if (shape_check("tensor_from_typed", shape, ndim, &size)) return NULL;
    if (!data && size > 0) return error_null(AC_ERR_ARG, "tensor_from_typed: data is NULL");
    t = tensor_create("tensor_from_typed", shape, ndim, dtype, NULL, 0, 0);
    if (!t || size == 0) return t;
    memcpy(t->data, data, (size_t)size * elem_size(t));
    if (dtype == AC_BOOL)   /* a bool byte is 0 or 1, whatever the caller's bytes held */
        for (i = 0; i < size; i++) data_u8(t)[i] = data_u8(t)[i] != 0;
    return t;
}

AcTensor *ac_arange(double start, double stop, double step)
{
    double count;
    int64_t n, i;
    AcTensor *t;
    if (!isfinite(start) || !isfinite(stop) || !isfinite(step) || step == 0.0)
        return error_null(AC_ERR_ARG, "arange: start %g, stop %g, step %g must be finite, step nonzero",
                          start, stop, step);
    count = ceil((stop - start) / step);
    if (count > (double)(INT64_MAX / 8))
        return error_null(AC_ERR_MEMORY, "arange: %g elements are too many", count);
    n = count > 0 ? (int64_t)count : 0;
    t = tensor_alloc("arange", &n, 1);
    if (!t) return NULL;
    for (i = 0; i < n; i++) t->data[i] = (float)(start + (double)i * step);
    return t;
}

AcTensor *ac_eye(int64_t n, int64_t m)
{
    int64_t shape[2], i;
    AcTensor *t;
    shape[0] = n;
    shape[1] = m;
    t = ac_full(shape, 2, 0.0f);
    if (!t) return NULL;
    for (i = 0; i < n && i < m; i++) t->data[i * m + i] = 1.0f;
    return t;
}

/* xoshiro128+ seeded by splitmix64: small, fast, and good enough for init and dropout. */
static AC_THREAD_LOCAL uint32_t rng_state[4] = {0x9e3779b9u, 0x243f6a88u, 0xb7e15162u, 0x1badb002u};
static AC_THREAD_LOCAL int rng_has_spare;
static AC_THREAD_LOCAL float rng_spare;

static uint32_t rng_next(void) { return xoshiro_next(rng_state); }

int ac_manual_seed(uint64_t seed)
{
    if (graph_recording) graph_unsupported("manual_seed");
    xoshiro_seed(rng_state, seed);
    rng_has_spare = 0;
    return AC_OK;
}

/* The generator's whole state (ac.Generator swaps its own in and out around an op). */
int ac_rng_get_state(uint32_t state[AC_RNG_STATE_WORDS])
{
    uint32_t spare_bits;
    if (!state) return error_set(AC_ERR_ARG, "rng_get_state: state is NULL");
    memcpy(state, rng_state, sizeof rng_state);
    memcpy(&spare_bits, &rng_spare, sizeof spare_bits);
    state[4] = (uint32_t)rng_has_spare;
    state[5] = spare_bits;
    return AC_OK;
}

int ac_rng_set_state(const uint32_t state[AC_RNG_STATE_WORDS])
{
    if (!state) return error_set(AC_ERR_ARG, "rng_set_state: state is NULL");
    if (state[4] > 1) return error_set(AC_ERR_ARG, "rng_set_state: word 4 (has spare) is %u, not 0 or 1",
                                       (unsigned)state[4]);
    if (!(state[0] | state[1] | state[2] | state[3]))
        return error_set(AC_ERR_ARG, "rng_set_state: an all-zero xoshiro state never leaves zero");
    memcpy(rng_state, state, sizeof rng_state);
    rng_has_spare = (int)state[4];
    memcpy(&rng_spare, &state[5], sizeof rng_spare);
    return AC_OK;
}

float rng_uniform(void) { return uniform_from_bits(rng_next()); }

uint64_t rng_next64(void)
{
    const uint64_t high = rng_next();
    return high << 32 | rng_next();
}

float rng_normal(void)
{
    float u1, u2, r;
    if (rng_has_spare) {
        rng_has_spare = 0;
        return rng_spare;
    }
    do u1 = rng_uniform(); while (u1 <= 0.0f);
    u2 = rng_uniform();
    r = sqrtf(-2.0f * logf(u1));
    rng_spare = r * sinf(6.2831853f * u2);
    rng_has_spare = 1;
    return r * cosf(6.2831853f * u2);
}

AcTensor *ac_rand(const int64_t *shape, int ndim)
{
    AcTensor *t = tensor_alloc("rand", shape, ndim);
    int64_t i;
    if (!t) return NULL;
    for (i = 0; i < t->size; i++) t->data[i] = rng_uniform();
    return t;
}

AcTensor *ac_randn(const int64_t *shape, int ndim)
{
    AcTensor *t = tensor_alloc("randn", shape, ndim);
    int64_t i;
    if (!t) return NULL;
    for (i = 0; i < t->size; i++) t->data[i] = rng_normal();
    return t;
}

int ac_tensor_uniform_(AcTensor *t, float lo, float hi)
{
    if (graph_recording) graph_unsupported("uniform_");
    int64_t i;
    if (tensor_check("uniform_", t, "tensor") || cpu_only("uniform_", (const AcTensor *[]){t}, 1))
        return ac_last_error_code();
    if (!isfinite(lo) || !isfinite(hi) || lo > hi)
        return error_set(AC_ERR_ARG, "uniform_: bounds [%g, %g) must be finite and ordered", lo, hi);
    for (i = 0; i < t->size; i++) t->data[i] = lo + (hi - lo) * rng_uniform();
    return AC_OK;
}

int ac_tensor_normal_(AcTensor *t, float mean, float std)
{
    if (graph_recording) graph_unsupported("normal_");
    int64_t i;
    if (tensor_check("normal_", t, "tensor") || cpu_only("normal_", (const AcTensor *[]){t}, 1))
        return ac_last_error_code();
    if (!isfinite(mean) || !isfinite(std) || std < 0)
        return error_set(AC_ERR_ARG, "normal_: mean %g and std %g must be finite, std >= 0", mean, std);
    for (i = 0; i < t->size; i++) t->data[i] = mean + std * rng_normal();
    return AC_OK;
}
