/*
 * random_draws.c - draws of indices from this thread's generator: randperm (a
 * permutation) and multinomial (categories by weight, with or without
 * replacement). Neither is differentiable; both give int64 tensors.
 *
 * multinomial with replacement: each row's weights as a running sum (double),
 * then one binary search per draw for the first category whose running sum
 * exceeds u * total; a zero-weight category never has such a sum, so it is
 * never drawn. Without replacement: each category gets the key -log(u) / w
 * (an exponential with rate w), and the num_samples smallest keys, in order,
 * are the draws: the same distribution as drawing one category at a time by
 * weight and removing it (the "exponential race").
 */
#include "graph.h"

#include <math.h>
#include <stdlib.h>   /* qsort */

/* A draw uniform in [0, bound) from 64 random bits (Lemire's multiply-shift;
   its bias is below bound / 2^64). */
static int64_t draw_below(int64_t bound)
{
    const uint64_t r = rng_next64();
    const uint64_t hi_r = r >> 32, lo_r = r & 0xffffffffu;
    const uint64_t b = (uint64_t)bound, hi_b = b >> 32, lo_b = b & 0xffffffffu;
    /* the high 64 bits of r * b, from 32-bit halves (C99 has no 128-bit integer) */
    const uint64_t lo_lo = lo_r * lo_b, hi_lo = hi_r * lo_b, lo_hi = lo_r * hi_b, hi_hi = hi_r * hi_b;
    const uint64_t mid = (lo_lo >> 32) + (hi_lo & 0xffffffffu) + (lo_hi & 0xffffffffu);
    return (int64_t)(hi_hi + (hi_lo >> 32) + (lo_hi >> 32) + (mid >> 32));
}

AcTensor *ac_randperm(int64_t n)
{
    AcTensor *t;
    int64_t *v, i;
    if (n < 0) return error_null(AC_ERR_ARG, "randperm: n must be >= 0, got %lld", (long long)n);
    if (graph_recording) graph_unsupported("randperm");
    t = tensor_create("randperm", &n, 1, AC_INT64, NULL, 0, 0);
    if (!t) return NULL;
    v = data_i64(t);
    for (i = 0; i < n; i++) v[i] = i;
    for (i = n - 1; i > 0; i--) {
        const int64_t j = draw_below(i + 1), tmp = v[i];
        v[i] = v[j];
        v[j] = tmp;
    }
    return t;
}

typedef struct {
    double key;
    int64_t index;
} KeyedIndex;

static int by_key(const void *a, const void *b)
{
    const KeyedIndex *x = (const KeyedIndex *)a, *y = (const KeyedIndex *)b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* One row: checks it, then draws count indices into out. scratch holds cats
   doubles (with replacement) or cats KeyedIndex (without). */
static int draw_row(const float *w, int64_t cats, int64_t count, int replacement, int64_t row,
                    void *scratch, int64_t *out)
{
    int64_t i, nonzero = 0;
    double total = 0.0;
    for (i = 0; i < cats; i++) {
        if (!(w[i] >= 0.0f) || isinf(w[i]))
            return error_set(AC_ERR_ARG, "multinomial: probability tensor contains either inf, nan or "
                             "element < 0 (row %lld, category %lld: %g)", (long long)row, (long long)i, w[i]);
        total += w[i];
        nonzero += w[i] > 0.0f;
    }
    if (!(total > 0.0))
        return error_set(AC_ERR_ARG, "multinomial: row %lld of the weights sums to zero", (long long)row);
    if (replacement) {
        double *cdf = (double *)scratch, acc = 0.0;
        for (i = 0; i < cats; i++) cdf[i] = acc += w[i];
        for (i = 0; i < count; i++) {
            const double x = (double)rng_next64() * (1.0 / 18446744073709551616.0) * acc;
            int64_t lo = 0, hi = cats - 1;
            while (lo < hi) {   /* the first category whose running sum exceeds x */
                const int64_t mid = lo + (hi - lo) / 2;
                if (cdf[mid] > x) hi = mid;
                else lo = mid + 1;
            }
            while (w[lo] <= 0.0f && lo > 0) lo--;   /* x rounded up to the total: the last positive one */
            out[i] = lo;
        }
        return AC_OK;
    }
    if (count > nonzero)
        return error_set(AC_ERR_ARG, "multinomial: cannot draw %lld samples without replacement from "
                         "row %lld, which has %lld non-zero weights", (long long)count, (long long)row,
                         (long long)nonzero);
    {
        KeyedIndex *keys = (KeyedIndex *)scratch;
        for (i = 0; i < cats; i++) {
            double u;
            do u = (double)rng_next64() * (1.0 / 18446744073709551616.0); while (u <= 0.0);
            keys[i].key = w[i] > 0.0f ? -log(u) / (double)w[i] : HUGE_VAL;
            keys[i].index = i;
        }
        qsort(keys, (size_t)cats, sizeof *keys, by_key);
        for (i = 0; i < count; i++) out[i] = keys[i].index;
    }
    return AC_OK;
}

AcTensor *ac_multinomial(const AcTensor *probs, int64_t num_samples, int replacement)
{
    int64_t shape[2], rows, cats, r, scratch_words;
    AcTensor *t, *scratch;
    if (tensor_check("multinomial", probs, "probs") ||
        cpu_only("multinomial", (const AcTensor *[]){probs}, 1))
        return NULL;
    if (probs->ndim != 1 && probs->ndim != 2)
        return error_null(AC_ERR_SHAPE, "multinomial: probs must be 1-d or 2-d, got %s",
                          shape_str(probs->shape, probs->ndim));
    cats = probs->shape[probs->ndim - 1];
    rows = probs->ndim == 2 ? probs->shape[0] : 1;
    if (cats == 0) return error_null(AC_ERR_ARG, "multinomial: probs has no categories");
    if (num_samples <= 0)
        return error_null(AC_ERR_ARG, "multinomial: num_samples must be positive, got %lld", (long long)num_samples);
    if (!replacement && num_samples > cats)
        return error_null(AC_ERR_ARG, "multinomial: cannot sample n_sample > prob_dist.size(-1) samples "
                          "without replacement (%lld > %lld)", (long long)num_samples, (long long)cats);
    if (graph_recording) graph_unsupported("multinomial");
    shape[0] = rows;
    shape[1] = num_samples;
    t = probs->ndim == 2 ? tensor_create("multinomial", shape, 2, AC_INT64, NULL, 0, 0)
                         : tensor_create("multinomial", &shape[1], 1, AC_INT64, NULL, 0, 0);
    if (!t) return NULL;
    /* a row's running sums (doubles) or keys (KeyedIndex: two 8-byte words each) */
    scratch_words = cats * (int64_t)(sizeof(KeyedIndex) / sizeof(int64_t));
    scratch = tensor_create("multinomial", &scratch_words, 1, AC_INT64, NULL, 0, 0);
    if (!scratch) {
        ac_tensor_free(t);
        return NULL;
    }
    for (r = 0; r < rows; r++)
        if (draw_row(probs->data + r * cats, cats, num_samples, replacement, r, scratch->data,
                     data_i64(t) + r * num_samples) < 0) {
            ac_tensor_free(scratch);
            ac_tensor_free(t);
            return NULL;
        }
    ac_tensor_free(scratch);
    return t;
}
