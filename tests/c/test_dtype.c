/* test_dtype.c - int64 and bool tensors: making, converting, comparing, where,
   integer sums, int64 targets and ids, and the errors of ops that compute. */
#include "ac.h"
#include "test.h"

#include <string.h>

static int64_t *i64(const AcTensor *t) { return (int64_t *)(void *)t->data; }
static uint8_t *u8(const AcTensor *t) { return (uint8_t *)(void *)t->data; }

static void test_typed_tensors_are_made_and_converted(void)
{
    int64_t shape[1] = {4}, values[4] = {-3, 0, 5, (int64_t)1 << 40};
    float f[4] = {-1.5f, 0.0f, 2.7f, NAN};
    AcTensor *t = ac_tensor_from_typed(values, shape, 1, AC_INT64);
    AcTensor *x = ac_tensor_from_data(f, shape, 1), *l, *b, *back, *z;
    CHECK(t && t->dtype == AC_INT64 && t->device == AC_CPU && i64(t)[3] == (int64_t)1 << 40);
    l = ac_to_dtype(x, AC_INT64);
    CHECK(l && i64(l)[0] == -1 && i64(l)[1] == 0 && i64(l)[2] == 2 && i64(l)[3] == 0);
    b = ac_to_dtype(x, AC_BOOL);
    CHECK(b && u8(b)[0] == 1 && u8(b)[1] == 0 && u8(b)[2] == 1 && u8(b)[3] == 1);
    back = ac_to_dtype(t, AC_FLOAT32);
    CHECK(back && back->data[0] == -3.0f && back->data[2] == 5.0f);
    z = ac_to_dtype(t, AC_UINT8);   /* -3, 0, 5, 2^40 wrap modulo 256 */
    CHECK(z && z->dtype == AC_UINT8 && u8(z)[0] == 253 && u8(z)[1] == 0 && u8(z)[2] == 5 &&
          u8(z)[3] == 0);
    ac_tensor_free(z);
    z = ac_tensor_new_typed(shape, 1, AC_BOOL);
    CHECK(z && z->dtype == AC_BOOL && u8(z)[0] == 0 && u8(z)[3] == 0);
    CHECK(ac_tensor_fill_(z, 3.0) == AC_OK && u8(z)[2] == 1);
    CHECK(ac_tensor_copy_(t, x) == AC_OK && i64(t)[2] == 2);
    CHECK(ac_dtype_size(AC_INT64) == 8 && ac_dtype_size(AC_UINT8) == 1 && ac_dtype_size(9) < 0);
    CHECK(strcmp(ac_dtype_name(AC_BOOL), "bool") == 0);
    ac_tensor_free(t);
    ac_tensor_free(x);
    ac_tensor_free(l);
    ac_tensor_free(b);
    ac_tensor_free(back);
    ac_tensor_free(z);
}

static void test_comparisons_broadcast_and_sum_exactly(void)
{
    float a[6] = {1, 2, 3, 4, 5, 6};
    int64_t sa[2] = {2, 3}, sb[1] = {3}, b[3] = {2, 2, 6}, none_dims = 0;
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *x = ac_tensor_from_data(a, sa, 2), *y = ac_tensor_from_typed(b, sb, 1, AC_INT64);
    AcTensor *ge = ac_compare(x, y, AC_GE), *n, *s, *lt, *both;
    int dim = 1;
    (void)none_dims;
    CHECK(ge && ge->dtype == AC_BOOL && ge->ndim == 2);
    CHECK(u8(ge)[0] == 0 && u8(ge)[1] == 1 && u8(ge)[2] == 0 && u8(ge)[3] == 1 && u8(ge)[5] == 1);
    n = ac_sum(ge, NULL, 0, 0);
    CHECK(n && n->dtype == AC_INT64 && n->ndim == 0 && i64(n)[0] == 4);
    s = ac_sum(ge, &dim, 1, 1);
    CHECK(s && s->ndim == 2 && s->shape[1] == 1 && i64(s)[0] == 1 && i64(s)[1] == 3);
    lt = ac_compare_scalar(x, 3.5, AC_LT);
    CHECK(lt && u8(lt)[2] == 1 && u8(lt)[3] == 0);
    both = ac_logical(ge, lt, AC_AND);
    CHECK(both && u8(both)[1] == 1 && u8(both)[3] == 0);
    both = ac_logical_not(both);
    CHECK(both && u8(both)[1] == 0 && u8(both)[3] == 1);
    CHECK(ac_mem_restore(cp) == AC_OK);
}

static AcTensor *where_fn(AcTensor *const *in, int n, void *user)
{
    (void)n;
    return ac_where((AcTensor *)user, ac_mul(in[0], in[0]), in[1]);
}

static void test_where_picks_and_its_gradients_check(void)
{
    float a[6] = {0.5f, -1, 2, 3, -0.25f, 1}, b[3] = {7, 8, 9};
    uint8_t c[6] = {1, 0, 1, 0, 0, 1};
    int64_t sa[2] = {2, 3}, sb[1] = {3};
    AcTensor *x = ac_tensor_from_data(a, sa, 2), *y = ac_tensor_from_data(b, sb, 1);
    AcTensor *cond = ac_tensor_from_typed(c, sa, 2, AC_BOOL), *out, *in[2];
    float err = 0;
    out = ac_where(cond, x, y);
    CHECK(out && out->data[0] == 0.5f && out->data[1] == 8.0f && out->data[3] == 7.0f);
    ac_tensor_set_requires_grad(x, 1);
    ac_tensor_set_requires_grad(y, 1);
    in[0] = x;
    in[1] = y;
    CHECK(ac_gradient_check(where_fn, in, 2, cond, 1e-3f, 1e-2f, 1e-2f, &err) == AC_OK);
    ac_tensor_free(out);
    ac_tensor_free(x);
    ac_tensor_free(y);
    ac_tensor_free(cond);
}

static void test_int64_targets_and_ids_equal_float_ones(void)
{
    float logits[6] = {1, 2, 0.5f, -1, 0, 3}, ft[2] = {1, 2};
    int64_t sl[2] = {2, 3}, st[1] = {2}, it[2] = {1, 2}, rows[2] = {1, 0};
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *x = ac_tensor_from_data(logits, sl, 2);
    AcTensor *a = ac_cross_entropy(x, ac_tensor_from_data(ft, st, 1), AC_REDUCTION_MEAN, 0.0f);
    AcTensor *b = ac_cross_entropy(x, ac_tensor_from_typed(it, st, 1, AC_INT64), AC_REDUCTION_MEAN, 0.0f);
    AcTensor *e = ac_embedding(ac_tensor_from_typed(rows, st, 1, AC_INT64), x, -1);
    CHECK(a && b && a->data[0] == b->data[0]);
    CHECK(e && e->shape[0] == 2 && e->data[0] == -1.0f && e->data[5] == 0.5f);
    it[1] = 3;
    CHECK(!ac_cross_entropy(x, ac_tensor_from_typed(it, st, 1, AC_INT64), AC_REDUCTION_MEAN, 0.0f) &&
          ac_last_error_code() == AC_ERR_INDEX);
    CHECK(ac_mem_restore(cp) == AC_OK);
}

static void test_shape_ops_move_int64_and_bool_elements(void)
{
    int64_t s[2] = {2, 3}, v[6] = {1, 2, 3, 4, 5, (int64_t)1 << 50};
    int perm[2] = {1, 0};
    AcSlice sl[2];
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *t = ac_tensor_from_typed(v, s, 2, AC_INT64), *p, *c, *parts[2];
    p = ac_permute(t, perm, 2);
    CHECK(p && p->dtype == AC_INT64 && i64(p)[1] == 4 && i64(p)[5] == (int64_t)1 << 50);
    memset(sl, 0, sizeof sl);
    sl[0].step = 1;
    sl[1].start = 2;
    sl[1].has_start = 1;
    sl[1].is_index = 1;
    sl[1].step = 1;
    c = ac_slice(t, sl, 2);
    CHECK(c && c->ndim == 1 && i64(c)[0] == 3 && i64(c)[1] == (int64_t)1 << 50);
    parts[0] = t;
    parts[1] = p;
    CHECK(!ac_cat(parts, 2, 0) && ac_last_error_code() == AC_ERR_SHAPE);
    parts[1] = ac_to_dtype(t, AC_FLOAT32);
    CHECK(!ac_cat(parts, 2, 0) && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(ac_mem_restore(cp) == AC_OK);
}

static void test_ops_that_compute_refuse_other_dtypes(void)
{
    int64_t s[1] = {2}, v[2] = {1, 2};
    AcTensor *t = ac_tensor_from_typed(v, s, 1, AC_INT64), *f = ac_full(s, 1, 1.0f), *e;
    /* float math of integers promotes to float32, as torch (ops/elementwise.c) */
    CHECK((e = ac_exp(t)) && e->dtype == AC_FLOAT32);
    ac_tensor_free(e);
    CHECK((e = ac_add(f, t)) && e->dtype == AC_FLOAT32 && e->data[1] == 3.0f);
    ac_tensor_free(e);
    CHECK(!ac_matmul(t, f) && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(!ac_mean(t, NULL, 0, 0) && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(!ac_where(f, f, f) && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(!ac_where(NULL, f, f) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_tensor_set_requires_grad(t, 1) == AC_ERR_DTYPE && !t->requires_grad);
    CHECK(!ac_tensor_new_typed(s, 1, 7) && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(!ac_to_dtype(f, -1) && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(!ac_compare(f, f, 6) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_compare(f, NULL, AC_EQ) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_logical(f, f, 3) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_tensor_from_typed(NULL, s, 1, AC_INT64) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_tensor_uniform_(t, 0.0f, 1.0f) == AC_ERR_DTYPE);
    CHECK(ac_tensor_fill_(t, 4.0) == AC_OK && i64(t)[1] == 4);   /* still usable */
    ac_tensor_free(t);
    ac_tensor_free(f);
}

int main(void)
{
    RUN(test_typed_tensors_are_made_and_converted);
    RUN(test_comparisons_broadcast_and_sum_exactly);
    RUN(test_where_picks_and_its_gradients_check);
    RUN(test_int64_targets_and_ids_equal_float_ones);
    RUN(test_shape_ops_move_int64_and_bool_elements);
    RUN(test_ops_that_compute_refuse_other_dtypes);
    return TEST_REPORT();
}
