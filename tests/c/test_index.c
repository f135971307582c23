/*
 * test_index.c - the indexing ops from C: ac_index (int64 and bool), the writes
 * ac_index_put_ and ac_slice_put_, gather, index_select, expand, sort, topk and
 * cumsum against plain loops, gradients by ac_gradient_check, and every bad
 * input failing with the right code and nothing leaked.
 */
#include "ac.h"
#include "test.h"

#include <string.h>

static AcTensor *ramp(const int64_t *shape, int ndim)
{
    AcTensor *t = ac_tensor_new(shape, ndim);
    int64_t i;
    for (i = 0; i < t->size; i++) t->data[i] = (float)((i * 7) % 11) - 3.0f + 0.01f * (float)i;
    return t;
}

static AcTensor *ids(const int64_t *values, int64_t n)
{
    int64_t shape[1];
    shape[0] = n;
    return ac_tensor_from_typed(values, shape, 1, AC_INT64);
}

static void test_index_picks_rows_and_masks(void)
{
    int64_t shape[2] = {3, 4}, picks[3] = {2, -3, 2};
    uint8_t mask_data[4] = {1, 0, 0, 1};
    int64_t mask_shape[1] = {4};
    AcTensor *x = ramp(shape, 2), *index = ids(picks, 3);
    AcTensor *mask = ac_tensor_from_typed(mask_data, mask_shape, 1, AC_BOOL);
    AcTensor *rows = ac_index(x, 0, index), *cols = ac_index(x, 1, mask);
    int i;
    CHECK(rows && rows->ndim == 2 && rows->shape[0] == 3 && rows->shape[1] == 4);
    CHECK(cols && cols->ndim == 2 && cols->shape[0] == 3 && cols->shape[1] == 2);
    for (i = 0; rows && i < 4; i++) {
        CHECK(rows->data[i] == x->data[8 + i]);
        CHECK(rows->data[4 + i] == x->data[i]);
    }
    for (i = 0; cols && i < 3; i++) {
        CHECK(cols->data[2 * i] == x->data[4 * i]);
        CHECK(cols->data[2 * i + 1] == x->data[4 * i + 3]);
    }
    ac_tensor_free(rows);
    ac_tensor_free(cols);
    ac_tensor_free(mask);
    ac_tensor_free(index);
    ac_tensor_free(x);
}

static void test_writes_broadcast_and_convert(void)
{
    int64_t shape[2] = {2, 3}, picks[1] = {-1}, one[1] = {1};
    AcTensor *x = ac_tensor_new_typed(shape, 2, AC_INT64), *index = ids(picks, 1);
    AcTensor *value = ac_full(one, 1, 7.9f);
    AcSlice rows[1];
    memset(rows, 0, sizeof rows);
    rows[0].start = 1;
    rows[0].has_start = 1;
    rows[0].is_index = 1;
    ac_tensor_fill_(x, 0.0);
    CHECK(ac_slice_put_(x, rows, 1, value) == AC_OK);          /* x[1] = 7.9 -> 7 */
    CHECK(ac_index_put_(x, 1, index, value) == AC_OK);         /* x[:, -1] = 7 */
    {
        const int64_t *d = (const int64_t *)(const void *)x->data;
        CHECK(d[0] == 0 && d[1] == 0 && d[2] == 7 && d[3] == 7 && d[4] == 7 && d[5] == 7);
    }
    ac_tensor_free(value);
    ac_tensor_free(index);
    ac_tensor_free(x);
}

static void test_sort_topk_cumsum_match_loops(void)
{
    float data[6] = {3.0f, 1.0f, 3.0f, 0.0f, 2.0f, 5.0f};
    int64_t shape[2] = {2, 3};
    AcTensor *x = ac_tensor_from_data(data, shape, 2), *indices = NULL, *top_idx = NULL;
    AcTensor *sorted = ac_sort(x, 1, 1, &indices), *top = ac_topk(x, 1, 0, 0, &top_idx);
    AcTensor *sums = ac_cumsum(x, 1);
    const int64_t *d;
    CHECK(sorted && indices && indices->dtype == AC_INT64);
    d = indices ? (const int64_t *)(const void *)indices->data : NULL;
    CHECK(d && d[0] == 0 && d[1] == 2 && d[2] == 1 && d[3] == 2 && d[4] == 1 && d[5] == 0);
    CHECK(sorted && sorted->data[0] == 3.0f && sorted->data[2] == 1.0f && sorted->data[3] == 5.0f);
    CHECK(top && top->shape[0] == 1 && top->data[0] == 0.0f && top->data[1] == 1.0f && top->data[2] == 3.0f);
    CHECK(sums && sums->data[2] == 7.0f && sums->data[5] == 7.0f);
    ac_tensor_free(sorted);
    ac_tensor_free(indices);
    ac_tensor_free(top);
    ac_tensor_free(top_idx);
    ac_tensor_free(sums);
    ac_tensor_free(x);
}

static AcTensor *gather_case(AcTensor *const *in, int n, void *index)
{
    (void)n;
    return ac_gather(in[0], 1, index);
}

static AcTensor *select_case(AcTensor *const *in, int n, void *index)
{
    (void)n;
    return ac_index_select(in[0], 0, index);
}

static AcTensor *expand_case(AcTensor *const *in, int n, void *user)
{
    int64_t shape[3] = {2, -1, 4};
    (void)n;
    (void)user;
    return ac_expand(in[0], shape, 3);
}

static AcTensor *sort_cumsum_case(AcTensor *const *in, int n, void *user)
{
    AcTensor *indices = NULL, *sorted = ac_sort(in[0], 0, 0, &indices), *out;
    (void)n;
    (void)user;
    ac_tensor_free(indices);
    out = sorted ? ac_cumsum(sorted, 1) : NULL;
    ac_tensor_free(sorted);
    return out;
}

static void test_gradients_pass_gradient_check(void)
{
    int64_t shape[2] = {3, 1}, picks[4] = {0, 2, 2, 1}, gshape[2] = {3, 2};
    int64_t gather_ids[6] = {0, 0, 0, 0, 0, 0};
    AcTensor *x = ramp(shape, 2), *select = ids(picks, 4);
    AcTensor *gather = ac_tensor_from_typed(gather_ids, gshape, 2, AC_INT64);
    float err;
    ac_tensor_set_requires_grad(x, 1);
    CHECK(ac_gradient_check(gather_case, &x, 1, gather, 1e-2f, 2e-2f, 2e-2f, &err) == AC_OK);
    CHECK(ac_gradient_check(select_case, &x, 1, select, 1e-2f, 2e-2f, 2e-2f, &err) == AC_OK);
    CHECK(ac_gradient_check(expand_case, &x, 1, NULL, 1e-2f, 2e-2f, 2e-2f, &err) == AC_OK);
    CHECK(ac_gradient_check(sort_cumsum_case, &x, 1, NULL, 1e-2f, 2e-2f, 2e-2f, &err) == AC_OK);
    ac_tensor_free(gather);
    ac_tensor_free(select);
    ac_tensor_free(x);
}

static void test_bad_input_fails_cleanly(void)
{
    int64_t shape[2] = {2, 3}, far[1] = {3}, neg[1] = {-1}, big[2] = {4, 4}, one[1] = {1};
    AcTensor *x = ramp(shape, 2), *out_of_range = ids(far, 1), *negative = ids(neg, 1);
    AcTensor *floats = ac_full(one, 1, 0.0f), *wide = ac_tensor_new(big, 2), *idx = NULL;
    CHECK(!ac_index(NULL, 0, negative) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_index(x, 1, out_of_range) && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(!ac_index(x, 2, negative) && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(!ac_index(x, 0, floats) && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(!ac_index_select(x, 0, negative) && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(!ac_gather(x, 0, negative) && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(!ac_gather(x, 0, floats) && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(ac_index_put_(x, 0, negative, wide) == AC_ERR_SHAPE);
    CHECK(ac_index_put_(x, 1, out_of_range, floats) == AC_ERR_INDEX);
    CHECK(ac_slice_put_(x, NULL, 1, floats) == AC_ERR_ARG);
    CHECK(ac_slice_put_(x, NULL, 0, NULL) == AC_ERR_ARG);
    CHECK(!ac_expand(wide, far, 1) && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(!ac_expand(x, big, 2) && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(!ac_sort(x, 0, 0, NULL) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_sort(wide, 0, 0, NULL) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_topk(x, 4, 1, 1, &idx) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_cumsum(x, 2) && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(idx == NULL);
    idx = ac_log1p(negative);   /* float math of int64 gives float32, as torch */
    CHECK(idx && idx->dtype == AC_FLOAT32);
    ac_tensor_free(idx);
    idx = NULL;
    ac_tensor_free(x);
    ac_tensor_free(out_of_range);
    ac_tensor_free(negative);
    ac_tensor_free(floats);
    ac_tensor_free(wide);
}

int main(void)
{
    AcMemStats start, end;
    ac_manual_seed(7);
    ac_memory_stats(&start);
    RUN(test_index_picks_rows_and_masks);
    RUN(test_writes_broadcast_and_convert);
    RUN(test_sort_topk_cumsum_match_loops);
    RUN(test_gradients_pass_gradient_check);
    RUN(test_bad_input_fails_cleanly);
    ac_memory_stats(&end);
    CHECK(end.live_tensors == start.live_tensors);
    CHECK(end.bytes_in_use == start.bytes_in_use);
    return TEST_REPORT();
}
