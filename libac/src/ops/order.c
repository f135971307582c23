/*
 * order.c - statistics that order the elements along a dim: kthvalue, median
 * and nanmedian, mode, cummax/cummin, unique and unique_consecutive,
 * searchsorted, bincount and histc.
 *
 * Every dtype is ordered through one key: a uint64 that sorts as the value
 * does (float32: its bits flipped so that negatives come first, -0 as +0, and
 * every NaN one key above +inf, as PyTorch orders NaN largest; int64: the
 * sign bit flipped; bool and uint8: the value). So int64 is compared exactly,
 * never through float32. The ops that pick elements (kthvalue, median, mode,
 * cummax) find int64 positions here and take the values with ac_gather, whose
 * backward scatters the gradient back to the picked positions.
 *
 * Not here: sort, topk and cumsum (sort.c); prod, cumprod and logcumsumexp
 * (scan.c).
 */
#include "internal.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

#define NAN_KEY UINT64_C(0xFFFFFFFF)

/* The order key of element i of t (see above). */
static uint64_t order_key(const AcTensor *t, int64_t i)
{
    uint32_t bits;
    float f;
    switch (t->dtype) {
    case AC_FLOAT32:
        f = t->data[i];
        if (isnan(f)) return NAN_KEY;
        if (f == 0.0f) f = 0.0f;            /* -0 orders as +0 */
        memcpy(&bits, &f, sizeof bits);
        bits = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
        return bits;
    case AC_INT64:
        return (uint64_t)data_i64(t)[i] ^ UINT64_C(0x8000000000000000);
    case AC_INT8:
        return (uint64_t)(int64_t)((const int8_t *)(const void *)t->data)[i] ^ UINT64_C(0x8000000000000000);
    default:
        return data_u8(t)[i];
    }
}

static int is_nan_key(const AcTensor *t, uint64_t key) { return t->dtype == AC_FLOAT32 && key == NAN_KEY; }

/* Stable merge sort of pos[0..n) by keys[pos[i]], bottom up, through tmp. */
static void sort_positions(const uint64_t *keys, int64_t *pos, int64_t *tmp, int64_t n)
{
    int64_t width, lo, *src = pos, *dst = tmp, *swap;
    for (width = 1; width < n; width *= 2) {
        for (lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = keys[src[j]] < keys[src[i]] ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        swap = src;
        src = dst;
        dst = swap;
    }
    if (src != pos) memcpy(pos, src, (size_t)n * sizeof(int64_t));
}

/* Sizes of the dims before and after dim. */
static void split_at(const AcTensor *a, int dim, int64_t *outer, int64_t *n, int64_t *inner)
{
    int d;
    *outer = *inner = 1;
    *n = a->shape[dim];
    for (d = 0; d < a->ndim; d++) {
        if (d < dim) *outer *= a->shape[d];
        if (d > dim) *inner *= a->shape[d];
    }
}

static int check_input(const char *op, const AcTensor *a, int *dim)
{
    if (tensor_check_any(op, a, "input") || cpu_only(op, &a, 1)) return -1;
    if (a->ndim == 0) return error_set(AC_ERR_SHAPE, "%s: input must have at least 1 dim", op);
    *dim = dim_normalize(op, *dim, a->ndim);
    return *dim < 0 ? -1 : 0;
}

/* ---- picks along a dim: kthvalue, median, nanmedian, mode ------------------ */

enum { PICK_KTH, PICK_MEDIAN, PICK_NANMEDIAN, PICK_MODE };

/* Hoare's selection with a median-of-three pivot (as in Numerical Recipes' select):
   rearranges keys[0..n) and pos alongside so that keys[k] is the k-th smallest
   (from 0). kthvalue picks with it, so that among tied values the position it
   reports is the one PyTorch's CPU kthvalue reports. */
static void select_kth(uint64_t *keys, int64_t *pos, int64_t n, int64_t k, int by_position)
{
    int64_t lo = 0, hi = n - 1, i, j, t, pivot_pos;
    uint64_t pivot, u;
#define SWAP(a, b) (u = keys[a], keys[a] = keys[b], keys[b] = u, t = pos[a], pos[a] = pos[b], pos[b] = t)
/* key x at position px after key y at py: by value, then (by_position) by position */
#define AFTER(x, px, y, py) ((x) > (y) || (by_position && (x) == (y) && (px) > (py)))
    for (;;) {
        if (hi <= lo) return;
        if (hi == lo + 1) {
            if (AFTER(keys[lo], pos[lo], keys[hi], pos[hi])) SWAP(lo, hi);
            return;
        }
        i = lo + (hi - lo) / 2;
        SWAP(i, lo + 1);
        if (AFTER(keys[lo + 1], pos[lo + 1], keys[hi], pos[hi])) SWAP(lo + 1, hi);
        if (AFTER(keys[lo], pos[lo], keys[hi], pos[hi])) SWAP(lo, hi);
        if (AFTER(keys[lo + 1], pos[lo + 1], keys[lo], pos[lo])) SWAP(lo + 1, lo);
        i = lo + 1;
        j = hi;
        pivot = keys[lo];
        pivot_pos = pos[lo];
        for (;;) {
            do i++; while (AFTER(pivot, pivot_pos, keys[i], pos[i]));
            do j--; while (AFTER(keys[j], pos[j], pivot, pivot_pos));
            if (j < i) break;
            SWAP(i, j);
        }
        SWAP(lo, j);
        if (j <= k) lo = i;
        if (j >= k) hi = j - 1;
    }
#undef AFTER
#undef SWAP
}

/* ---- mode's sort: the introsort of the C++ library PyTorch is built with ----------- */
/* PyTorch's CPU mode sorts (value, position) pairs by value alone with std::sort, which
   is not stable, and reports the last position of the mode's run in that order. To
   report the same position among equal values, mode sorts the same way: introsort
   (median-of-three pivot, unguarded partition, heapsort past 2 log2(n) levels) down to
   runs of 16, then one insertion sort. */

typedef struct {
    uint64_t key;     /* the order key; for float32 rows the float compares instead */
    float value;
    int64_t pos;
} KeyPos;

/* std::sort's comparison as PyTorch's mode makes it: value < value (for floats, NaN
   compares false both ways, however that leaves them). */
static int pair_less(const KeyPos *x, const KeyPos *y, int floats)
{
    return floats ? x->value < y->value : x->key < y->key;
}

static void heap_adjust(KeyPos *a, int64_t hole, int64_t len, KeyPos value, int fl)
{
    int64_t top = hole, child = hole, parent;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (pair_less(&a[child], &a[child - 1], fl)) child--;
        a[hole] = a[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        a[hole] = a[child - 1];
        hole = child - 1;
    }
    parent = (hole - 1) / 2;
    while (hole > top && pair_less(&a[parent], &value, fl)) {
        a[hole] = a[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    a[hole] = value;
}

static void heap_sort(KeyPos *a, int64_t n, int fl)
{
    int64_t parent, last;
    if (n >= 2)
        for (parent = (n - 2) / 2;; parent--) {
            heap_adjust(a, parent, n, a[parent], fl);
            if (parent == 0) break;
        }
    for (last = n - 1; last > 0; last--) {
        KeyPos value = a[last];
        a[last] = a[0];
        heap_adjust(a, 0, last, value, fl);
    }
}

static void swap_pairs(KeyPos *a, int64_t i, int64_t j)
{
    KeyPos t = a[i];
    a[i] = a[j];
    a[j] = t;
}

static void intro_loop(KeyPos *a, int64_t first, int64_t last, int depth, int fl)
{
    while (last - first > 16) {
        int64_t mid = first + (last - first) / 2, x = first + 1, z = last - 1, lo, hi;
        if (depth == 0) {
            heap_sort(a + first, last - first, fl);
            return;
        }
        depth--;
        if (pair_less(&a[x], &a[mid], fl)) {
            if (pair_less(&a[mid], &a[z], fl)) swap_pairs(a, first, mid);
            else if (pair_less(&a[x], &a[z], fl)) swap_pairs(a, first, z);
            else swap_pairs(a, first, x);
        } else if (pair_less(&a[x], &a[z], fl)) {
            swap_pairs(a, first, x);
        } else if (pair_less(&a[mid], &a[z], fl)) {
            swap_pairs(a, first, z);
        } else {
            swap_pairs(a, first, mid);
        }
        lo = first + 1;
        hi = last;
        for (;;) {
            while (pair_less(&a[lo], &a[first], fl)) lo++;
            hi--;
            while (pair_less(&a[first], &a[hi], fl)) hi--;
            if (!(lo < hi)) break;
            swap_pairs(a, lo, hi);
            lo++;
        }
        intro_loop(a, lo, last, depth, fl);
        last = lo;
    }
}

static void insertion_sort_pairs(KeyPos *a, int64_t first, int64_t last, int guarded, int fl)
{
    int64_t i, j;
    for (i = guarded ? first + 1 : first; i < last; i++) {
        KeyPos value = a[i];
        if (guarded && pair_less(&value, &a[first], fl)) {
            memmove(a + first + 1, a + first, (size_t)(i - first) * sizeof(KeyPos));
            a[first] = value;
            continue;
        }
        for (j = i; pair_less(&value, &a[j - 1], fl); j--) a[j] = a[j - 1];
        a[j] = value;
    }
}

static void library_sort(KeyPos *a, int64_t n, int fl)
{
    int depth = 0;
    int64_t m = n;
    if (n < 2) return;
    while (m > 1) {
        m >>= 1;
        depth++;
    }
    intro_loop(a, 0, n, 2 * depth, fl);
    if (n > 16) {
        insertion_sort_pairs(a, 0, 16, 1, fl);
        insertion_sort_pairs(a, 16, n, 0, fl);
    } else {
        insertion_sort_pairs(a, 0, n, 1, fl);
    }
}

/* The mode of a row: sorted as PyTorch does, the first longest run (the smallest value
   among equally frequent ones, NaN never repeating), at its last position in that order. */
static int64_t mode_in_row(const AcTensor *a, const uint64_t *keys, int64_t base, int64_t inner, KeyPos *pairs,
                           int64_t n)
{
    int64_t j, run = 0, best = 0, best_run = 0;
    const int fl = a->dtype == AC_FLOAT32;
    for (j = 0; j < n; j++) {
        pairs[j].key = keys[j];
        pairs[j].value = fl ? a->data[base + j * inner] : 0.0f;
        pairs[j].pos = j;
    }
    library_sort(pairs, n, fl);
    for (j = 0; j < n; j++) {
        run++;
        if (j == n - 1 || (fl ? pairs[j].value != pairs[j + 1].value : pairs[j].key != pairs[j + 1].key)) {
            if (run > best_run) {
                best_run = run;
                best = pairs[j].pos;
            }
            run = 0;
        }
    }
    return best;
}

/* The position in [0, n) that `how` picks from a row whose keys are keys[0..n),
   sorted as pos[0..n). */
/* The median's position in a row: the first NaN for median when there is one, else
   the lower median by (value, position), the order PyTorch's nth_element uses, so
   that among equal values the position is PyTorch's; NaN keys order last. */
static int64_t median_in_row(int how, const AcTensor *a, uint64_t *keys, int64_t *pos, int64_t n)
{
    int64_t nan_count = 0, j, k;
    for (j = 0; j < n; j++)
        if (is_nan_key(a, keys[j])) {
            if (how == PICK_MEDIAN) return j;
            nan_count++;
        }
    k = nan_count < n ? (n - nan_count - 1) / 2 : 0;
    select_kth(keys, pos, n, k, 1);
    return pos[k];
}

static AcTensor *pick_along(const char *op, int how, const AcTensor *a, int64_t k, int dim, int keepdim,
                            AcTensor **indices)
{
    int64_t shape[AC_MAX_DIMS], outer, n, inner, o, r, j;
    AcTensor *idx, *values, *squeezed;
    uint64_t *keys;
    int64_t *pos, *tmp;
    size_t bytes;
    if (!indices) return error_null(AC_ERR_ARG, "%s: indices is NULL", op);
    if (check_input(op, a, &dim)) return NULL;
    split_at(a, dim, &outer, &n, &inner);
    if (how == PICK_KTH && (k < 1 || k > n))
        return error_null(AC_ERR_INDEX, "%s: k %lld is out of range for dim %d of %s", op, (long long)k,
                          dim, tensor_shape_str(a));
    if (n == 0)
        return error_null(AC_ERR_INDEX, "%s: dim %d of %s has no elements", op, dim, tensor_shape_str(a));
    memcpy(shape, a->shape, sizeof shape);
    shape[dim] = 1;
    idx = tensor_create(op, shape, a->ndim, AC_INT64, NULL, 0, 0);
    if (!idx) return NULL;
    bytes = (size_t)n * (sizeof(int64_t) + sizeof(KeyPos) + sizeof(uint64_t));  /* tmp: n KeyPos for mode */
    pos = scratch_alloc(bytes);
    if (!pos) {
        ac_tensor_free(idx);
        return NULL;
    }
    tmp = pos + n;
    keys = (uint64_t *)(void *)((KeyPos *)(void *)tmp + n);
    for (o = 0; o < outer; o++)
        for (r = 0; r < inner; r++) {
            for (j = 0; j < n; j++) {
                keys[j] = order_key(a, (o * n + j) * inner + r);
                pos[j] = j;
            }
            if (how == PICK_KTH) {
                select_kth(keys, pos, n, k - 1, 0);
                data_i64(idx)[o * inner + r] = pos[k - 1];
                continue;
            }
            if (how == PICK_MODE) {
                data_i64(idx)[o * inner + r] = mode_in_row(a, keys, o * n * inner + r, inner, (KeyPos *)(void *)tmp, n);
                continue;
            }
            data_i64(idx)[o * inner + r] = median_in_row(how, a, keys, pos, n);
        }
    scratch_free(pos, bytes);
    values = ac_gather(a, dim, idx);
    if (values && !keepdim) {
        squeezed = ac_squeeze(values, &dim, 1);
        ac_tensor_free(values);
        values = squeezed;
        if (values) {
            squeezed = ac_squeeze(idx, &dim, 1);
            ac_tensor_free(idx);
            idx = squeezed;
            if (!idx) {
                ac_tensor_free(values);
                return NULL;
            }
        }
    }
    if (!values) {
        ac_tensor_free(idx);
        return NULL;
    }
    *indices = idx;
    return values;
}

AcTensor *ac_kthvalue(const AcTensor *a, int64_t k, int dim, int keepdim, AcTensor **indices)
{
    return pick_along("kthvalue", PICK_KTH, a, k, dim, keepdim, indices);
}

AcTensor *ac_median_dim(const AcTensor *a, int dim, int keepdim, int ignore_nan, AcTensor **indices)
{
    return pick_along(ignore_nan ? "nanmedian" : "median", ignore_nan ? PICK_NANMEDIAN : PICK_MEDIAN, a, 0,
                      dim, keepdim, indices);
}

AcTensor *ac_mode(const AcTensor *a, int dim, int keepdim, AcTensor **indices)
{
    return pick_along("mode", PICK_MODE, a, 0, dim, keepdim, indices);
}

/* ---- cummax, cummin ---------------------------------------------------------- */

AcTensor *ac_cummax(const AcTensor *a, int dim, int largest, AcTensor **indices)
{
    const char *op = largest ? "cummax" : "cummin";
    int64_t outer, n, inner, o, r, j;
    AcTensor *idx, *values;
    if (!indices) return error_null(AC_ERR_ARG, "%s: indices is NULL", op);
    if (check_input(op, a, &dim)) return NULL;
    split_at(a, dim, &outer, &n, &inner);
    idx = tensor_create(op, a->shape, a->ndim, AC_INT64, NULL, 0, 0);
    if (!idx) return NULL;
    for (o = 0; o < outer; o++)
        for (r = 0; r < inner; r++) {
            int64_t best = 0;
            uint64_t best_key = 0;
            for (j = 0; j < n; j++) {
                int64_t at = (o * n + j) * inner + r;
                uint64_t key = order_key(a, at);
                /* a later equal value takes over, and NaN once seen stays (each NaN takes over) */
                if (j == 0 || is_nan_key(a, key) ||
                    (!is_nan_key(a, best_key) && (largest ? key >= best_key : key <= best_key))) {
                    best = j;
                    best_key = key;
                }
                data_i64(idx)[at] = best;
            }
        }
    values = ac_gather(a, dim, idx);
    if (!values) {
        ac_tensor_free(idx);
        return NULL;
    }
    *indices = idx;
    return values;
}

/* ---- unique ------------------------------------------------------------------ */

/* Element `from` of a copied to element `to` of out (a's dtype). */
static void copy_elem(AcTensor *out, int64_t to, const AcTensor *a, int64_t from)
{
    size_t size = elem_size(a);
    memcpy((char *)out->data + (size_t)to * size, (const char *)a->data + (size_t)from * size, size);
}

/* unique's last step, in both forms: values (NULL if making it failed), then the
   inverse (run_of, n of them, in inv_shape) and the counts (run_count, runs of them)
   when asked for; NULL with nothing left allocated if any fails. */
static AcTensor *unique_outputs(const char *op, AcTensor *values, const int64_t *inv_shape, int inv_ndim,
                                const int64_t *run_of, int64_t n, const int64_t *run_count, int64_t runs,
                                AcTensor **inverse, AcTensor **counts)
{
    AcTensor *inv = NULL, *cnt = NULL;
    if (values && inverse) {
        inv = tensor_create(op, inv_shape, inv_ndim, AC_INT64, NULL, 0, 0);
        if (inv && n) memcpy(inv->data, run_of, (size_t)n * sizeof(int64_t));
    }
    if (values && (!inverse || inv) && counts) {
        cnt = tensor_create(op, &runs, 1, AC_INT64, NULL, 0, 0);
        if (cnt && runs) memcpy(cnt->data, run_count, (size_t)runs * sizeof(int64_t));
    }
    if (!values || (inverse && !inv) || (counts && !cnt)) {
        if (values) ac_tensor_free(values);
        if (inv) ac_tensor_free(inv);
        return NULL;
    }
    if (inverse) *inverse = inv;
    if (counts) *counts = cnt;
    return values;
}

AcTensor *ac_unique(const AcTensor *a, int consecutive, AcTensor **inverse, AcTensor **counts)
{
    const char *op = consecutive ? "unique_consecutive" : "unique";
    int64_t n, j, runs = 0, *pos, *tmp, *run_of, *run_count;
    uint64_t *keys;
    size_t bytes;
    AcTensor *values = NULL;
    if (tensor_check_any(op, a, "input") || cpu_only(op, &a, 1)) return NULL;
    n = a->size;
    bytes = (size_t)(n + 1) * (4 * sizeof(int64_t) + sizeof(uint64_t));
    pos = scratch_alloc(bytes);
    if (!pos) return NULL;
    tmp = pos + n + 1;
    run_of = tmp + n + 1;
    run_count = run_of + n + 1;
    keys = (uint64_t *)(void *)(run_count + n + 1);
    for (j = 0; j < n; j++) {
        keys[j] = order_key(a, j);
        pos[j] = j;
    }
    if (!consecutive) sort_positions(keys, pos, tmp, n);
    for (j = 0; j < n; j++) {
        /* NaN never equals NaN: each is its own value, as in PyTorch */
        if (j == 0 || keys[pos[j]] != keys[pos[j - 1]] || is_nan_key(a, keys[pos[j]])) {
            tmp[runs] = pos[j];          /* the run's first element */
            run_count[runs++] = 0;
        }
        run_count[runs - 1]++;
        run_of[pos[j]] = runs - 1;
    }
    values = tensor_create(op, &runs, 1, a->dtype, NULL, 0, 0);
    if (values)
        for (j = 0; j < runs; j++) copy_elem(values, j, a, tmp[j]);
    values = unique_outputs(op, values, a->shape, a->ndim, run_of, n, run_count, runs, inverse, counts);
    scratch_free(pos, bytes);
    return values;
}

/* ---- unique along a dim: distinct slices ------------------------------------------ */

/* Lexicographic order of rows of m keys; ties keep their input order (stable). */
static int row_before(const uint64_t *keys, int64_t m, int64_t u, int64_t v)
{
    int64_t j;
    for (j = 0; j < m; j++) {
        uint64_t x = keys[u * m + j], y = keys[v * m + j];
        if (x != y) return x < y;
    }
    return 0;
}

static void sort_rows(const uint64_t *keys, int64_t m, int64_t *pos, int64_t *tmp, int64_t n)
{
    int64_t width, lo, *src = pos, *dst = tmp, *swap;
    for (width = 1; width < n; width *= 2) {
        for (lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = row_before(keys, m, src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        swap = src;
        src = dst;
        dst = swap;
    }
    if (src != pos) memcpy(pos, src, (size_t)n * sizeof(int64_t));
}

AcTensor *ac_unique_dim(const AcTensor *a, int dim, int consecutive, AcTensor **inverse, AcTensor **counts)
{
    const char *op = consecutive ? "unique_consecutive" : "unique";
    int64_t outer, n, inner, m, o, r, i, j, runs = 0, shape[AC_MAX_DIMS];
    int64_t *pos, *tmp, *run_of, *run_count;
    uint64_t *keys;
    size_t bytes, esize;
    AcTensor *values = NULL;
    if (check_input(op, a, &dim)) return NULL;
    split_at(a, dim, &outer, &n, &inner);
    m = outer * inner;
    bytes = (size_t)(n + 1) * 4 * sizeof(int64_t) + (size_t)(n * m + 1) * sizeof(uint64_t);
    pos = scratch_alloc(bytes);
    if (!pos) return NULL;
    tmp = pos + n + 1;
    run_of = tmp + n + 1;
    run_count = run_of + n + 1;
    keys = (uint64_t *)(void *)(run_count + n + 1);
    for (i = 0; i < n; i++) {          /* row i: the slice at i, row-major over the other dims */
        pos[i] = i;
        for (o = 0; o < outer; o++)
            for (r = 0; r < inner; r++) keys[i * m + o * inner + r] = order_key(a, (o * n + i) * inner + r);
    }
    if (!consecutive) sort_rows(keys, m, pos, tmp, n);
    for (j = 0; j < n; j++) {
        if (j == 0 || row_before(keys, m, pos[j - 1], pos[j]) || row_before(keys, m, pos[j], pos[j - 1])) {
            tmp[runs] = pos[j];
            run_count[runs++] = 0;
        }
        run_count[runs - 1]++;
        run_of[pos[j]] = runs - 1;
    }
    memcpy(shape, a->shape, sizeof shape);
    shape[dim] = runs;
    values = tensor_create(op, shape, a->ndim, a->dtype, NULL, 0, 0);
    esize = elem_size(a);
    if (values)
        for (o = 0; o < outer; o++)
            for (j = 0; j < runs; j++)
                memcpy((char *)values->data + (size_t)((o * runs + j) * inner) * esize,
                       (const char *)a->data + (size_t)((o * n + tmp[j]) * inner) * esize, (size_t)inner * esize);
    values = unique_outputs(op, values, &n, 1, run_of, n, run_count, runs, inverse, counts);
    scratch_free(pos, bytes);
    return values;
}

/* ---- searchsorted -------------------------------------------------------------- */

/* For each of values, the position in its row of sorted (the last dim; sorted 1-D
   serves every value, else its leading dims match values') where it would go:
   before the first element >= it, or > it when right. sorted and values must
   share a dtype (the caller promotes). int64 out, values' shape. */
AcTensor *ac_searchsorted(const AcTensor *sorted, const AcTensor *values, int right)
{
    const char *op = "searchsorted";
    int64_t row, rows, m, per_row, i;
    AcTensor *out;
    int d;
    if (tensor_check_any(op, sorted, "sorted_sequence") || tensor_check_any(op, values, "values") ||
        cpu_only(op, (const AcTensor *[]){sorted, values}, 2))
        return NULL;
    if (sorted->dtype != values->dtype)
        return error_null(AC_ERR_DTYPE, "%s: sorted_sequence is %s and values %s; they must match", op,
                          ac_dtype_name(sorted->dtype), ac_dtype_name(values->dtype));
    if (sorted->ndim == 0)
        return error_null(AC_ERR_SHAPE, "%s: sorted_sequence must have at least 1 dim", op);
    m = sorted->shape[sorted->ndim - 1];
    rows = m > 0 ? sorted->size / m : 0;
    if (sorted->ndim > 1) {
        int same = values->ndim == sorted->ndim;
        for (d = 0; same && d < sorted->ndim - 1; d++) same = sorted->shape[d] == values->shape[d];
        if (!same)
            return error_null(AC_ERR_SHAPE, "%s: sorted_sequence %s and values %s must have the same leading "
                              "dims", op, tensor_shape_str(sorted), tensor_shape_str(values));
        if (m == 0) {
            rows = 1;
            for (d = 0; d < sorted->ndim - 1; d++) rows *= sorted->shape[d];
        }
    } else {
        rows = 1;
    }
    per_row = rows > 0 ? values->size / rows : 0;
    out = tensor_create(op, values->shape, values->ndim, AC_INT64, NULL, 0, 0);
    if (!out) return NULL;
    for (i = 0; i < values->size; i++) {
        uint64_t key = order_key(values, i);
        int64_t lo = 0, hi = m;
        row = sorted->ndim > 1 ? i / per_row : 0;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            uint64_t k = order_key(sorted, row * m + mid);
            if (right ? k <= key : k < key) lo = mid + 1;
            else hi = mid;
        }
        data_i64(out)[i] = lo;
    }
    return out;
}

/* ---- bincount, histc ------------------------------------------------------------ */

AcTensor *ac_bincount(const AcTensor *a, const AcTensor *weights, int64_t minlength)
{
    const char *op = "bincount";
    int64_t i, bins = minlength;
    AcTensor *out;
    if (tensor_check_any(op, a, "input") || cpu_only(op, &a, 1)) return NULL;
    if (a->dtype != AC_INT64 && a->dtype != AC_BOOL && a->dtype != AC_UINT8)
        return error_null(AC_ERR_DTYPE, "%s: input is %s; it must be an integer tensor", op,
                          ac_dtype_name(a->dtype));
    if (a->ndim != 1) return error_null(AC_ERR_SHAPE, "%s: input %s must be 1-d", op, tensor_shape_str(a));
    if (minlength < 0) return error_null(AC_ERR_ARG, "%s: minlength %lld must be >= 0", op, (long long)minlength);
    if (weights) {
        if (tensor_check(op, weights, "weights") || cpu_only(op, &weights, 1)) return NULL;
        if (weights->ndim != 1 || weights->size != a->size)
            return error_null(AC_ERR_SHAPE, "%s: weights %s must be 1-d of input's length %lld", op,
                              tensor_shape_str(weights), (long long)a->size);
    }
    for (i = 0; i < a->size; i++) {
        int64_t v = (int64_t)elem_get(a, i);
        if (a->dtype == AC_INT64) v = data_i64(a)[i];
        if (v < 0) return error_null(AC_ERR_ARG, "%s: input has a negative value %lld", op, (long long)v);
        if (v >= bins) bins = v + 1;
    }
    out = tensor_create(op, &bins, 1, weights ? AC_FLOAT32 : AC_INT64, NULL, 0, 0);
    if (!out) return NULL;
    memset(out->data, 0, (size_t)bins * elem_size(out));
    for (i = 0; i < a->size; i++) {
        int64_t v = a->dtype == AC_INT64 ? data_i64(a)[i] : (int64_t)data_u8(a)[i];
        if (weights) out->data[v] += weights->data[i];
        else data_i64(out)[v]++;
    }
    return out;
}

/* Bin edge i of bins between lo and hi, as PyTorch's linspace computes it in float32. */
static float bin_edge(float lo, float hi, int64_t bins, int64_t i)
{
    float step = (hi - lo) / (float)bins;
    return i < bins / 2 ? lo + step * (float)i : hi - step * (float)(bins - i);
}

AcTensor *ac_histc(const AcTensor *a, int64_t bins, double min, double max)
{
    const char *op = "histc";
    float lo = (float)min, hi = (float)max;
    int64_t i;
    AcTensor *out;
    if (tensor_check(op, a, "input") || cpu_only(op, &a, 1)) return NULL;
    if (bins <= 0) return error_null(AC_ERR_ARG, "%s: bins must be > 0, got %lld", op, (long long)bins);
    if (lo > hi) return error_null(AC_ERR_ARG, "%s: max %g must be larger than min %g", op, max, min);
    if (lo == hi && a->size > 0) {      /* the data's range */
        lo = hi = a->data[0];
        for (i = 0; i < a->size; i++) {
            float v = a->data[i];
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
    }
    if (lo == hi) {
        lo -= 1.0f;
        hi += 1.0f;
    }
    if (!isfinite(lo) || !isfinite(hi))
        return error_null(AC_ERR_ARG, "%s: range of [%g, %g] is not finite", op, (double)lo, (double)hi);
    out = tensor_create(op, &bins, 1, AC_FLOAT32, NULL, 0, 0);
    if (!out) return NULL;
    memset(out->data, 0, (size_t)bins * sizeof(float));
    for (i = 0; i < a->size; i++) {
        float v = a->data[i];
        int64_t b;
        if (!(v >= lo && v <= hi)) continue;
        b = (int64_t)((double)(v - lo) / (double)(hi - lo) * (double)bins);
        if (b >= bins) b = bins - 1;
        /* the computed bin may be one off the edges' bins by rounding: the edges decide */
        if (b > 0 && v < bin_edge(lo, hi, bins, b)) b--;
        else if (b + 1 < bins && v >= bin_edge(lo, hi, bins, b + 1)) b++;
        out->data[b] += 1.0f;
    }
    return out;
}
