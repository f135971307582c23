/*
 * test_layout_scatter.c - layout.c and scatter.c from C: flip, tril/triu,
 * diagonal/diag_embed, unfold, repeat, nonzero, scatter with each reduction, one_hot and the
 * index helpers against plain loops, int64 values kept exact, gradients by
 * ac_gradient_check, and every bad input failing with its code, nothing leaked.
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

static AcTensor *ints(const int64_t *values, const int64_t *shape, int ndim)
{
    return ac_tensor_from_typed(values, shape, ndim, AC_INT64);
}

static void test_flip_tri_diagonal_match_loops(void)
{
    int64_t shape[2] = {3, 4}, i, j;
    int dims[2] = {0, -1};
    AcTensor *x = ramp(shape, 2);
    AcTensor *flipped = ac_flip(x, dims, 2), *lower = ac_tril(x, -1), *upper = ac_triu(x, 1);
    AcTensor *diag = ac_diagonal(x, 1, 0, 1), *embedded = diag ? ac_diag_embed(diag, 0, 0, 1) : NULL;
    CHECK(flipped && lower && upper && diag && embedded);
    for (i = 0; flipped && i < 3; i++)
        for (j = 0; j < 4; j++) {
            CHECK(flipped->data[i * 4 + j] == x->data[(2 - i) * 4 + 3 - j]);
            CHECK(lower->data[i * 4 + j] == (j <= i - 1 ? x->data[i * 4 + j] : 0.0f));
            CHECK(upper->data[i * 4 + j] == (j >= i + 1 ? x->data[i * 4 + j] : 0.0f));
        }
    CHECK(diag && diag->ndim == 1 && diag->shape[0] == 3);
    for (i = 0; diag && i < 3; i++) CHECK(diag->data[i] == x->data[i * 4 + i + 1]);
    CHECK(embedded && embedded->ndim == 2 && embedded->shape[0] == 3 && embedded->shape[1] == 3);
    for (i = 0; embedded && i < 9; i++) CHECK(embedded->data[i] == (i % 4 == 0 ? diag->data[i / 4] : 0.0f));
    ac_tensor_free(flipped);
    ac_tensor_free(lower);
    ac_tensor_free(upper);
    ac_tensor_free(embedded);
    ac_tensor_free(diag);
    ac_tensor_free(x);
}

static void test_int64_moves_exactly(void)
{
    int64_t shape[2] = {2, 2}, values[4] = {INT64_MAX, (1LL << 53) + 1, -(1LL << 62) - 3, 5};
    int64_t index_values[2] = {1, 1}, index_shape[2] = {1, 2};
    AcTensor *x = ints(values, shape, 2), *index = ints(index_values, index_shape, 2);
    int dims[1] = {1};
    AcTensor *flipped = ac_flip(x, dims, 1), *upper = ac_triu(x, 0);
    AcTensor *summed = ac_scatter(x, 0, index, x, AC_SCATTER_SUM, 1);
    AcTensor *where = ac_nonzero(x);
    CHECK(flipped && upper);
    CHECK(((int64_t *)(void *)flipped->data)[0] == (1LL << 53) + 1);
    CHECK(((int64_t *)(void *)upper->data)[1] == (1LL << 53) + 1 && ((int64_t *)(void *)upper->data)[2] == 0);
    /* out[1][j] = x[1][j] + x[0][j]: INT64_MAX + -(2^62 + 3) and 2^53 + 1 + 5 */
    CHECK(summed && ((int64_t *)(void *)summed->data)[2] == INT64_MAX - (1LL << 62) - 3);
    CHECK(summed && ((int64_t *)(void *)summed->data)[3] == (1LL << 53) + 6);
    CHECK(where && where->shape[0] == 4 && where->shape[1] == 2);
    ac_tensor_free(flipped);
    ac_tensor_free(upper);
    ac_tensor_free(summed);
    ac_tensor_free(where);
    ac_tensor_free(index);
    ac_tensor_free(x);
}

static void test_scatter_reductions_match_loops(void)
{
    int64_t shape[1] = {3}, src_shape[1] = {4}, index_values[4] = {0, 2, 0, 0};
    float src_values[4] = {2.0f, -1.0f, 5.0f, -4.0f};
    AcTensor *x = ramp(shape, 1), *index = ints(index_values, src_shape, 1);
    AcTensor *src = ac_tensor_from_data(src_values, src_shape, 1);
    AcTensor *sum = ac_scatter(x, 0, index, src, AC_SCATTER_SUM, 1);
    AcTensor *mean = ac_scatter(x, 0, index, src, AC_SCATTER_MEAN, 0);
    AcTensor *amax = ac_scatter(x, 0, index, src, AC_SCATTER_AMAX, 0);
    AcTensor *prod = ac_scatter(x, 0, index, src, AC_SCATTER_PROD, 1);
    AcTensor *plain = ac_scatter(x, 0, index, src, AC_SCATTER_NONE, 1);
    CHECK(sum && mean && amax && prod && plain);
    CHECK_NEAR(sum->data[0], x->data[0] + 3.0f, 1e-6);
    CHECK_NEAR(sum->data[1], x->data[1], 0);
    CHECK_NEAR(sum->data[2], x->data[2] - 1.0f, 1e-6);
    CHECK_NEAR(mean->data[0], 1.0f, 1e-6);
    CHECK_NEAR(mean->data[1], x->data[1], 0);
    CHECK_NEAR(amax->data[0], 5.0f, 0);
    CHECK_NEAR(prod->data[0], x->data[0] * -40.0f, 1e-4);
    CHECK_NEAR(plain->data[2], -1.0f, 0);
    ac_tensor_free(sum);
    ac_tensor_free(mean);
    ac_tensor_free(amax);
    ac_tensor_free(prod);
    ac_tensor_free(plain);
    ac_tensor_free(src);
    ac_tensor_free(index);
    ac_tensor_free(x);
}

static AcTensor *scatter_case(AcTensor *const *in, int n, void *user)
{
    /* a plain write has one writer per target (the last would win; the gradient check
       cannot see the others), so it writes three of src's four values */
    int64_t index_values[4] = {1, 1, 0, 2}, plain_values[3] = {2, 0, 1}, shape[1] = {4}, three[1] = {3};
    const int *reduce = user;
    AcTensor *index = *reduce == AC_SCATTER_NONE ? ac_tensor_from_typed(plain_values, three, 1, AC_INT64)
                                                 : ac_tensor_from_typed(index_values, shape, 1, AC_INT64);
    AcTensor *out;
    (void)n;
    out = ac_scatter(in[0], 0, index, in[1], *reduce, reduce[1]);
    ac_tensor_free(index);
    return out;
}

static AcTensor *layout_case(AcTensor *const *in, int n, void *user)
{
    int dims[1] = {1};
    AcTensor *a = ac_flip(in[0], dims, 1), *b = a ? ac_tril(a, 0) : NULL;
    AcTensor *c = b ? ac_diag_embed(b, 1, 0, 2) : NULL, *e = c ? ac_diagonal(c, 0, 1, 2) : NULL;
    int64_t reps[3] = {2, 1, 2};
    AcTensor *f = e ? ac_unfold(e, 1, 2, 1) : NULL;   /* overlapping windows add up */
    AcTensor *d = f ? ac_repeat(f, reps, 3) : NULL;
    (void)n;
    (void)user;
    ac_tensor_free(f);
    ac_tensor_free(e);
    ac_tensor_free(a);
    ac_tensor_free(b);
    ac_tensor_free(c);
    return d;
}

static void test_gradients_pass_gradient_check(void)
{
    int64_t shape[1] = {3}, src_shape[1] = {4}, mat[2] = {3, 3};
    AcTensor *in[2], *m = ramp(mat, 2);
    int reduce[2], kind, self;
    float err;
    float src_values[4] = {0.5f, 1.7f, -2.2f, 3.1f};
    in[0] = ramp(shape, 1);
    in[1] = ac_tensor_from_data(src_values, src_shape, 1);
    ac_tensor_set_requires_grad(in[0], 1);
    ac_tensor_set_requires_grad(in[1], 1);
    ac_tensor_set_requires_grad(m, 1);
    for (kind = AC_SCATTER_NONE; kind <= AC_SCATTER_AMIN; kind++)
        for (self = 0; self <= 1; self++) {
            reduce[0] = kind;
            reduce[1] = self;
            CHECK(ac_gradient_check(scatter_case, in, 2, reduce, 1e-3f, 2e-2f, 2e-2f, &err) == AC_OK);
        }
    CHECK(ac_gradient_check(layout_case, &m, 1, NULL, 1e-2f, 2e-2f, 2e-2f, &err) == AC_OK);
    ac_tensor_free(in[0]);
    ac_tensor_free(in[1]);
    ac_tensor_free(m);
}

static void test_one_hot_and_index_helpers(void)
{
    int64_t shape[1] = {3}, labels[3] = {2, 0, 2}, repeats[3] = {2, 0, 1}, rows[3] = {-1, 0, 1};
    AcTensor *l = ints(labels, shape, 1), *r = ints(repeats, shape, 1), *i = ints(rows, shape, 1);
    AcTensor *hot = ac_one_hot(l, -1), *rep = ac_repeat_index(r);
    int64_t grid[2] = {2, 5};
    AcTensor *flat = ac_ravel_index(&i, 1, grid, 2);
    CHECK(hot && hot->shape[0] == 3 && hot->shape[1] == 3);
    CHECK(hot && ((int64_t *)(void *)hot->data)[2] == 1 && ((int64_t *)(void *)hot->data)[3] == 1);
    CHECK(rep && rep->size == 3 && ((int64_t *)(void *)rep->data)[2] == 2);
    CHECK(flat && ((int64_t *)(void *)flat->data)[0] == 1 && ((int64_t *)(void *)flat->data)[2] == 1);
    ac_tensor_free(hot);
    ac_tensor_free(rep);
    ac_tensor_free(flat);
    ac_tensor_free(l);
    ac_tensor_free(r);
    ac_tensor_free(i);
}

static void test_bad_input_fails_cleanly(void)
{
    int64_t shape[2] = {2, 3}, one[1] = {1}, far_v[1] = {9}, neg_v[1] = {-1}, two[2] = {1, 1};
    int64_t far2_v[1] = {3};
    int dims[2] = {0, 0}, bad_dim[1] = {2};
    AcTensor *x = ramp(shape, 2), *vec = ramp(one, 1), *far = ints(far_v, one, 1), *neg = ints(neg_v, one, 1);
    AcTensor *index = ints(far2_v, two, 2), *src = ramp(two, 2), *ok = ints(neg_v, two, 2);
    CHECK(!ac_flip(NULL, dims, 1) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_flip(x, dims, 2) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_flip(x, bad_dim, 1) && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(!ac_flip(x, NULL, 1) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_tril(vec, 0) && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(!ac_triu(NULL, 0) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_diagonal(vec, 0, 0, 1) && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(!ac_diagonal(x, 0, 1, -1) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_diag_embed(x, 0, 0, 3) && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(!ac_diag_embed(x, (int64_t)1 << 40, 0, 1) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_nonzero(NULL) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_unfold(x, 1, 4, 1) && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(!ac_unfold(x, 1, 2, 0) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_unfold(x, 2, 1, 1) && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(!ac_unfold(NULL, 0, 1, 1) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_repeat(x, one, 1) && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(!ac_repeat(x, neg_v, 1) && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(!ac_repeat(vec, neg_v, 1) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_repeat(x, NULL, 2) && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(!ac_scatter(x, 0, index, src, AC_SCATTER_SUM, 1) && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(!ac_scatter(x, 0, ok, src, AC_SCATTER_NONE, 1) && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(!ac_scatter(x, 0, src, src, AC_SCATTER_NONE, 1) && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(!ac_scatter(x, 0, far, vec, AC_SCATTER_NONE, 1) && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(!ac_scatter(x, 0, ok, far, AC_SCATTER_NONE, 1) && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(!ac_scatter(x, 0, ok, src, 9, 1) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_scatter(x, 5, ok, src, 0, 1) && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(!ac_scatter(x, 0, NULL, src, 0, 1) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_one_hot(neg, 3) && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(!ac_one_hot(far, 3) && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(!ac_one_hot(far, -2) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_one_hot(x, 3) && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(!ac_repeat_index(neg) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_repeat_index(x) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_ravel_index(&far, 1, shape, 2) && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(!ac_ravel_index(&far, 3, shape, 2) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_ravel_index(NULL, 1, shape, 2) && ac_last_error_code() == AC_ERR_ARG);
    ac_tensor_free(x);
    ac_tensor_free(vec);
    ac_tensor_free(far);
    ac_tensor_free(neg);
    ac_tensor_free(index);
    ac_tensor_free(src);
    ac_tensor_free(ok);
}

int main(void)
{
    AcMemStats start, end;
    ac_manual_seed(7);
    ac_memory_stats(&start);
    RUN(test_flip_tri_diagonal_match_loops);
    RUN(test_int64_moves_exactly);
    RUN(test_scatter_reductions_match_loops);
    RUN(test_gradients_pass_gradient_check);
    RUN(test_one_hot_and_index_helpers);
    RUN(test_bad_input_fails_cleanly);
    ac_memory_stats(&end);
    CHECK(end.live_tensors == start.live_tensors);
    CHECK(end.bytes_in_use == start.bytes_in_use);
    return TEST_REPORT();
}
