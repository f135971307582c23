/*
 * test_ops_shape.c - reductions, matmul and shape ops from C: forward values
 * against plain loops written here, gradients through ac_backward and
 * ac_gradient_check, and every bad input returning NULL with the right code.
 */
#include "ac.h"
#include "test.h"

#include <string.h>

static AcTensor *ramp(const int64_t *shape, int ndim, float scale)
{
    AcTensor *t = ac_tensor_new(shape, ndim);
    int64_t i;
    for (i = 0; i < t->size; i++) t->data[i] = scale * (float)((i * 7) % 11) - 3.0f + 0.01f * (float)i;
    return t;
}

static int error_names(int code, const char *op)
{
    return ac_last_error_code() == code && strncmp(ac_last_error(), op, strlen(op)) == 0;
}

/* ---- reductions ---------------------------------------------------------- */

static void test_sum_over_dims_matches_loops(void)
{
    int64_t shape[3] = {2, 3, 4};
    int dims[2] = {0, -1};
    AcTensor *x = ramp(shape, 3, 1.0f);
    AcTensor *s = ac_sum(x, dims, 2, 0), *k = ac_sum(x, dims, 2, 1), *all = ac_sum(x, NULL, 0, 0);
    double total = 0;
    int i, j, l;
    CHECK(s && s->ndim == 1 && s->shape[0] == 3);
    CHECK(k && k->ndim == 3 && k->shape[0] == 1 && k->shape[1] == 3 && k->shape[2] == 1);
    CHECK(all && all->ndim == 0);
    for (j = 0; j < 3; j++) {
        double want = 0;
        for (i = 0; i < 2; i++)
            for (l = 0; l < 4; l++) want += x->data[i * 12 + j * 4 + l];
        total += want;
        CHECK_NEAR(s->data[j], want, 1e-4);
        CHECK_NEAR(k->data[j], want, 1e-4);
    }
    CHECK_NEAR(all->data[0], total, 1e-4);
    ac_tensor_free(x); ac_tensor_free(s); ac_tensor_free(k); ac_tensor_free(all);
}

static void test_mean_var_std_match_loops(void)
{
    int64_t shape[2] = {3, 5};
    int dim = 1;
    AcTensor *x = ramp(shape, 2, 0.5f);
    AcTensor *m = ac_mean(x, &dim, 1, 0), *v1 = ac_var(x, &dim, 1, 1, 0);
    AcTensor *v0 = ac_var(x, &dim, 1, 0, 1), *sd = ac_std(x, &dim, 1, 1, 0);
    int i, j;
    CHECK(m && v1 && v0 && sd && v0->ndim == 2 && v0->shape[1] == 1);
    for (i = 0; i < 3; i++) {
        double mean = 0, ss = 0;
        for (j = 0; j < 5; j++) mean += x->data[i * 5 + j] / 5.0;
        for (j = 0; j < 5; j++) ss += (x->data[i * 5 + j] - mean) * (x->data[i * 5 + j] - mean);
        CHECK_NEAR(m->data[i], mean, 1e-5);
        CHECK_NEAR(v1->data[i], ss / 4.0, 1e-5);
        CHECK_NEAR(v0->data[i], ss / 5.0, 1e-5);
        CHECK_NEAR(sd->data[i], sqrt(ss / 4.0), 1e-5);
    }
    ac_tensor_free(x); ac_tensor_free(m); ac_tensor_free(v1); ac_tensor_free(v0); ac_tensor_free(sd);
}

static void test_max_splits_gradient_among_ties(void)
{
    float data[5] = {1, 3, -2, 3, 0};
    int64_t n = 5;
    AcTensor *x = ac_tensor_from_data(data, &n, 1), *m;
    ac_tensor_set_requires_grad(x, 1);
    m = ac_max(x, NULL, 0, 0);
    CHECK(m && m->data[0] == 3.0f);
    CHECK(ac_backward(m) == AC_OK);
    CHECK(x->grad && x->grad->data[1] == 0.5f && x->grad->data[3] == 0.5f);
    CHECK(x->grad && x->grad->data[0] == 0.0f && x->grad->data[2] == 0.0f);
    ac_tensor_free(m);
    ac_tensor_zero_grad(x);
    m = ac_min(x, NULL, 0, 0);
    CHECK(m && m->data[0] == -2.0f);
    CHECK(ac_backward(m) == AC_OK);
    CHECK(x->grad && x->grad->data[2] == 1.0f && x->grad->data[1] == 0.0f);
    ac_tensor_free(m);
    ac_tensor_free(x);
}

static void test_max_dim_returns_first_index_and_routes_gradient(void)
{
    float data[6] = {4, 1, 4, 2, 7, 7};   /* (2, 3) */
    int64_t shape[2] = {2, 3};
    AcTensor *x = ac_tensor_from_data(data, shape, 2), *idx = NULL, *v, *am, *mn, *loss;
    ac_tensor_set_requires_grad(x, 1);
    v = ac_max_dim(x, 1, 0, &idx);
    CHECK(v && idx && v->ndim == 1 && idx->ndim == 1);
    CHECK(v->data[0] == 4.0f && v->data[1] == 7.0f);
    CHECK(idx->dtype == AC_INT64);
    CHECK(((int64_t *)idx->data)[0] == 0 && ((int64_t *)idx->data)[1] == 1);
    am = ac_argmax(x, 0, 1);
    CHECK(am && am->ndim == 2 && am->shape[0] == 1 && am->dtype == AC_INT64);
    CHECK(((int64_t *)am->data)[0] == 0 && ((int64_t *)am->data)[1] == 1 &&
          ((int64_t *)am->data)[2] == 1);
    mn = ac_min_dim(x, -1, 1, NULL);
    CHECK(mn && mn->ndim == 2 && mn->data[0] == 1.0f && mn->data[1] == 2.0f);
    loss = ac_sum(v, NULL, 0, 0);
    CHECK(ac_backward(loss) == AC_OK);
    CHECK(x->grad && x->grad->data[0] == 1.0f && x->grad->data[2] == 0.0f);
    CHECK(x->grad && x->grad->data[4] == 1.0f && x->grad->data[5] == 0.0f);
    ac_tensor_free(v); ac_tensor_free(idx); ac_tensor_free(am); ac_tensor_free(mn);
    ac_tensor_free(loss); ac_tensor_free(x);
}

static void test_big_sum_is_the_same_for_any_thread_count(void)
{
    int64_t n = 3000001;
    AcTensor *x = ac_randn(&n, 1), *one, *two;
    int previous = ac_get_num_threads();
    double want = 0;
    int64_t i;
    for (i = 0; i < n; i++) want += x->data[i];
    ac_set_num_threads(1);
    one = ac_sum(x, NULL, 0, 0);
    ac_set_num_threads(2);
    two = ac_sum(x, NULL, 0, 0);
    ac_set_num_threads(previous);
    CHECK(one && two && memcmp(one->data, two->data, sizeof(float)) == 0);
    CHECK_NEAR(one->data[0], want, 1e-2);
    ac_tensor_free(x); ac_tensor_free(one); ac_tensor_free(two);
}

typedef struct {
    int kind;
    int dims[2];
    int n_dims;
} ReduceCase;

static AcTensor *reduce_case(AcTensor *const *in, int n, void *user)
{
    const ReduceCase *c = user;
    (void)n;
    switch (c->kind) {
    case 0: return ac_sum(in[0], c->dims, c->n_dims, 1);
    case 1: return ac_mean(in[0], c->dims, c->n_dims, 0);
    case 2: return ac_var(in[0], c->dims, c->n_dims, 1, 0);
    case 3: return ac_std(in[0], c->dims, c->n_dims, 0, 1);
    case 4: return ac_max(in[0], c->dims, c->n_dims, 0);
    default: return ac_min_dim(in[0], c->dims[0], 0, NULL);
    }
}

static void test_reduction_gradients_pass_gradient_check(void)
{
    int64_t shape[3] = {3, 4, 5};
    AcTensor *x = ramp(shape, 3, 0.37f);
    ReduceCase c;
    float err = 0;
    ac_tensor_set_requires_grad(x, 1);
    for (c.kind = 0; c.kind < 6; c.kind++) {
        c.dims[0] = 0;
        c.dims[1] = 2;
        c.n_dims = 2;
        CHECK(ac_gradient_check(reduce_case, &x, 1, &c, 1e-2f, 2e-2f, 2e-2f, &err) == AC_OK);
        c.dims[0] = 1;
        c.n_dims = 1;
        CHECK(ac_gradient_check(reduce_case, &x, 1, &c, 1e-2f, 2e-2f, 2e-2f, &err) == AC_OK);
    }
    ac_tensor_free(x);
}

/* ---- matmul -------------------------------------------------------------- */

static void naive_matmul(const float *a, const float *b, float *c, int64_t n, int64_t k, int64_t m)
{
    int64_t i, j, p;
    for (i = 0; i < n; i++)
        for (j = 0; j < m; j++) {
            double s = 0;
            for (p = 0; p < k; p++) s += (double)a[i * k + p] * b[p * m + j];
            c[i * m + j] = (float)s;
        }
}

static void test_matmul_2d_and_vectors(void)
{
    int64_t as[2] = {3, 4}, bs[2] = {4, 5}, vs = 4, ws = 3;
    AcTensor *a = ramp(as, 2, 1.0f), *b = ramp(bs, 2, 0.5f), *v = ramp(&vs, 1, 1.0f);
    AcTensor *w = ramp(&ws, 1, 2.0f);
    AcTensor *c = ac_matmul(a, b), *av = ac_matmul(a, v), *wa = ac_matmul(w, a), *dot = ac_matmul(v, v);
    float want[15];
    double s;
    int64_t i, j;
    naive_matmul(a->data, b->data, want, 3, 4, 5);
    CHECK(c && c->ndim == 2 && c->shape[0] == 3 && c->shape[1] == 5);
    for (i = 0; i < 15; i++) CHECK_NEAR(c->data[i], want[i], 1e-4);
    CHECK(av && av->ndim == 1 && av->shape[0] == 3);
    naive_matmul(a->data, v->data, want, 3, 4, 1);
    for (i = 0; i < 3; i++) CHECK_NEAR(av->data[i], want[i], 1e-4);
    CHECK(wa && wa->ndim == 1 && wa->shape[0] == 4);
    naive_matmul(w->data, a->data, want, 1, 3, 4);
    for (i = 0; i < 4; i++) CHECK_NEAR(wa->data[i], want[i], 1e-4);
    CHECK(dot && dot->ndim == 0);
    for (s = 0, j = 0; j < 4; j++) s += v->data[j] * v->data[j];
    CHECK_NEAR(dot->data[0], s, 1e-4);
    ac_tensor_free(a); ac_tensor_free(b); ac_tensor_free(v); ac_tensor_free(w);
    ac_tensor_free(c); ac_tensor_free(av); ac_tensor_free(wa); ac_tensor_free(dot);
}

static void test_matmul_broadcasts_batch_dims(void)
{
    int64_t as[4] = {2, 1, 3, 4}, bs[3] = {5, 4, 2};
    AcTensor *a = ramp(as, 4, 1.0f), *b = ramp(bs, 3, 0.25f), *c = ac_matmul(a, b);
    float want[6];
    int64_t i, j, e;
    CHECK(c && c->ndim == 4 && c->shape[0] == 2 && c->shape[1] == 5 && c->shape[2] == 3 &&
          c->shape[3] == 2);
    for (i = 0; c && i < 2; i++)
        for (j = 0; j < 5; j++) {
            naive_matmul(a->data + i * 12, b->data + j * 8, want, 3, 4, 2);
            for (e = 0; e < 6; e++) CHECK_NEAR(c->data[(i * 5 + j) * 6 + e], want[e], 1e-4);
        }
    ac_tensor_free(a); ac_tensor_free(b); ac_tensor_free(c);
}

static AcTensor *matmul_case(AcTensor *const *in, int n, void *user)
{
    (void)n;
    (void)user;
    return ac_matmul(in[0], in[1]);
}

static void test_matmul_gradients_pass_gradient_check(void)
{
    int64_t shapes[6][2][4] = {
        {{3, 4}, {4, 2}}, {{2, 1, 3, 4}, {5, 4, 2}}, {{3, 4}, {2, 4, 2}},
        {{2, 3, 4}, {4, 5}}, {{4}, {2, 4, 3}}, {{2, 3, 4}, {4}},
    };
    int ndims[6][2] = {{2, 2}, {4, 3}, {2, 3}, {3, 2}, {1, 3}, {3, 1}};
    int i;
    float err = 0;
    for (i = 0; i < 6; i++) {
        AcTensor *in[2];
        in[0] = ramp(shapes[i][0], ndims[i][0], 0.3f);
        in[1] = ramp(shapes[i][1], ndims[i][1], 0.2f);
        ac_tensor_set_requires_grad(in[0], 1);
        ac_tensor_set_requires_grad(in[1], 1);
        CHECK(ac_gradient_check(matmul_case, in, 2, NULL, 1e-2f, 2e-2f, 2e-2f, &err) == AC_OK);
        ac_tensor_free(in[0]);
        ac_tensor_free(in[1]);
    }
}

/* ---- shape ops ----------------------------------------------------------- */

static void test_reshape_shares_data_and_infers_one_dim(void)
{
    int64_t shape[2] = {3, 4}, want[3] = {2, -1, 3};
    AcTensor *x = ramp(shape, 2, 1.0f), *r = ac_reshape(x, want, 3), *f, *u, *s;
    CHECK(r && r->ndim == 3 && r->shape[1] == 2 && r->data == x->data && r->base == x);
    f = ac_flatten(r, 0, -1);
    CHECK(f && f->ndim == 1 && f->shape[0] == 12 && f->data == x->data && f->base == x);
    u = ac_unsqueeze(x, -1);
    CHECK(u && u->ndim == 3 && u->shape[2] == 1 && u->data == x->data);
    s = ac_squeeze(u, NULL, 0);
    CHECK(s && s->ndim == 2 && s->shape[0] == 3 && s->shape[1] == 4);
    ac_tensor_free(x);   /* the views keep the data alive */
    CHECK(f->data[11] == r->data[11]);
    ac_tensor_free(r); ac_tensor_free(f); ac_tensor_free(u); ac_tensor_free(s);
}

static void test_transpose_and_permute_move_elements(void)
{
    int64_t shape2[2] = {70, 45}, shape4[4] = {2, 3, 4, 5};
    int perm[4] = {2, 0, 3, 1};
    AcTensor *x = ramp(shape2, 2, 1.0f), *t = ac_transpose(x, 0, 1);
    AcTensor *y = ramp(shape4, 4, 1.0f), *p = ac_permute(y, perm, 4);
    int64_t i, j, a, b, c, d, bad = 0;
    CHECK(t && t->shape[0] == 45 && t->shape[1] == 70);
    for (i = 0; t && i < 70; i++)
        for (j = 0; j < 45; j++) bad += t->data[j * 70 + i] != x->data[i * 45 + j];
    CHECK(bad == 0);
    CHECK(p && p->shape[0] == 4 && p->shape[1] == 2 && p->shape[2] == 5 && p->shape[3] == 3);
    for (a = 0; p && a < 2; a++)
        for (b = 0; b < 3; b++)
            for (c = 0; c < 4; c++)
                for (d = 0; d < 5; d++)
                    bad += p->data[((c * 2 + a) * 5 + d) * 3 + b] != y->data[((a * 3 + b) * 4 + c) * 5 + d];
    CHECK(bad == 0);
    ac_tensor_free(x); ac_tensor_free(t); ac_tensor_free(y); ac_tensor_free(p);
}

static void test_slice_follows_python_rules(void)
{
    int64_t shape[2] = {5, 6};
    AcSlice s[2];
    AcTensor *x = ramp(shape, 2, 1.0f), *y, *z;
    memset(s, 0, sizeof s);
    s[0].start = -4; s[0].has_start = 1; s[0].stop = 100; s[0].has_stop = 1; s[0].step = 2;
    s[1].start = 1; s[1].has_start = 1; s[1].step = 3;    /* 1::3 */
    y = ac_slice(x, s, 2);                                /* x[-4:100:2, 1::3] */
    CHECK(y && y->ndim == 2 && y->shape[0] == 2 && y->shape[1] == 2);
    CHECK(y && y->data[0] == x->data[1 * 6 + 1] && y->data[1] == x->data[1 * 6 + 4]);
    CHECK(y && y->data[2] == x->data[3 * 6 + 1] && y->data[3] == x->data[3 * 6 + 4]);
    memset(s, 0, sizeof s);
    s[0].start = -1; s[0].has_start = 1; s[0].is_index = 1;   /* x[-1] */
    z = ac_slice(x, s, 1);
    CHECK(z && z->ndim == 1 && z->shape[0] == 6 && z->data[5] == x->data[29]);
    ac_tensor_free(z);
    s[0].start = 4; s[0].is_index = 0; s[0].stop = 2; s[0].has_stop = 1; s[0].step = 1;
    z = ac_slice(x, s, 1);                                    /* x[4:2] is empty */
    CHECK(z && z->ndim == 2 && z->shape[0] == 0 && z->shape[1] == 6);
    ac_tensor_free(x); ac_tensor_free(y); ac_tensor_free(z);
}

static void test_cat_and_stack_of_many_tensors_backpropagate(void)
{
    int64_t shape[2] = {2, 3};
    AcTensor *parts[6], *c, *s, *loss, *both[2];
    AcCheckpoint cp = ac_mem_checkpoint();
    int i, j;
    for (i = 0; i < 6; i++) {
        parts[i] = ramp(shape, 2, (float)(i + 1));
        ac_tensor_set_requires_grad(parts[i], 1);
    }
    c = ac_cat(parts, 6, 1);
    s = ac_stack(parts, 6, 0);
    CHECK(c && c->ndim == 2 && c->shape[0] == 2 && c->shape[1] == 18);
    CHECK(s && s->ndim == 3 && s->shape[0] == 6 && s->shape[1] == 2);
    for (i = 0; c && s && i < 6; i++)
        for (j = 0; j < 6; j++) {
            CHECK(c->data[(j / 3) * 18 + i * 3 + j % 3] == parts[i]->data[j]);
            CHECK(s->data[i * 6 + j] == parts[i]->data[j]);
        }
    both[0] = ac_sum(c, NULL, 0, 0);
    both[1] = ac_mul_scalar(ac_sum(s, NULL, 0, 0), 2.0f);
    loss = ac_stack(both, 2, 0);
    loss = ac_sum(loss, NULL, 0, 0);
    CHECK(ac_backward(loss) == AC_OK);
    for (i = 0; i < 6; i++)
        for (j = 0; j < 6; j++) CHECK(parts[i]->grad && parts[i]->grad->data[j] == 3.0f);
    CHECK(ac_mem_restore(cp) == AC_OK);
}

static AcTensor *shape_case(AcTensor *const *in, int n, void *user)
{
    int which = *(const int *)user, perm[3] = {1, 2, 0};
    int64_t shape[2] = {4, -1};
    AcSlice s[2];
    (void)n;
    memset(s, 0, sizeof s);
    switch (which) {
    case 0: return ac_reshape(in[0], shape, 2);
    case 1: return ac_permute(in[0], perm, 3);
    case 2: return ac_transpose(in[0], 0, 2);
    case 3:
        s[0].start = 1; s[0].has_start = 1; s[0].is_index = 1;
        s[1].start = -1; s[1].has_start = 1; s[1].step = 2; s[1].stop = -5; s[1].has_stop = 0;
        return ac_slice(in[0], s, 2);
    case 4: return ac_cat(in, 2, 1);
    default: return ac_stack(in, 2, -1);
    }
}

static void test_shape_gradients_pass_gradient_check(void)
{
    int64_t shape[3] = {2, 3, 4};
    AcTensor *in[2];
    int which;
    float err = 0;
    in[0] = ramp(shape, 3, 0.5f);
    in[1] = ramp(shape, 3, 0.25f);
    ac_tensor_set_requires_grad(in[0], 1);
    ac_tensor_set_requires_grad(in[1], 1);
    for (which = 0; which < 6; which++)
        CHECK(ac_gradient_check(shape_case, in, which < 4 ? 1 : 2, &which, 1e-2f, 1e-2f, 1e-2f,
                                &err) == AC_OK);
    ac_tensor_free(in[0]);
    ac_tensor_free(in[1]);
}

/* ---- bad input ----------------------------------------------------------- */

static void test_bad_input_fails_cleanly(void)
{
    int64_t s34[2] = {3, 4}, s56[2] = {5, 6}, s23[2] = {2, 3}, two_holes[2] = {-1, -1}, bad[2] = {5, 3};
    int dup[2] = {1, -1}, far = 2, perm_dup[2] = {0, 0};
    AcTensor *a = ramp(s34, 2, 1.0f), *b = ramp(s56, 2, 1.0f), *c = ramp(s23, 2, 1.0f), *list[2], *r;
    AcSlice sl;
    memset(&sl, 0, sizeof sl);

    CHECK(!ac_sum(NULL, NULL, 0, 0) && error_names(AC_ERR_ARG, "sum"));
    CHECK(!ac_mean(a, &far, 1, 0) && error_names(AC_ERR_INDEX, "mean"));
    CHECK(!ac_max(a, dup, 2, 0) && error_names(AC_ERR_ARG, "max"));
    CHECK(!ac_var(a, NULL, 0, -1, 0) && error_names(AC_ERR_ARG, "var"));
    CHECK(!ac_std(NULL, NULL, 0, 1, 0) && error_names(AC_ERR_ARG, "std"));
    CHECK(!ac_min(a, dup, -1, 0) && error_names(AC_ERR_ARG, "min"));
    CHECK(!ac_max_dim(a, 5, 0, NULL) && error_names(AC_ERR_INDEX, "max"));
    CHECK(!ac_min_dim(NULL, 0, 0, NULL) && error_names(AC_ERR_ARG, "min"));
    CHECK(!ac_argmax(a, -3, 0) && error_names(AC_ERR_INDEX, "argmax"));

    CHECK(!ac_matmul(a, b) && error_names(AC_ERR_SHAPE, "matmul"));
    CHECK(strcmp(ac_last_error(), "matmul: shapes (3, 4) and (5, 6) are not aligned (4 != 5)") == 0);
    CHECK(!ac_matmul(a, NULL) && error_names(AC_ERR_ARG, "matmul"));
    r = ac_sum(a, NULL, 0, 0);
    CHECK(!ac_matmul(r, a) && error_names(AC_ERR_SHAPE, "matmul"));
    ac_tensor_free(r);

    CHECK(!ac_reshape(a, bad, 2) && error_names(AC_ERR_SHAPE, "reshape"));
    CHECK(!ac_reshape(a, two_holes, 2) && error_names(AC_ERR_ARG, "reshape"));
    CHECK(!ac_reshape(a, NULL, 2) && error_names(AC_ERR_ARG, "reshape"));
    CHECK(!ac_reshape(a, s34, 9) && error_names(AC_ERR_ARG, "reshape"));
    CHECK(!ac_flatten(a, 1, 0) && error_names(AC_ERR_ARG, "flatten"));
    CHECK(!ac_transpose(a, 0, 2) && error_names(AC_ERR_INDEX, "transpose"));
    CHECK(!ac_permute(a, perm_dup, 2) && error_names(AC_ERR_ARG, "permute"));
    CHECK(!ac_permute(a, perm_dup, 1) && error_names(AC_ERR_ARG, "permute"));
    CHECK(!ac_squeeze(a, &far, 1) && error_names(AC_ERR_INDEX, "squeeze"));
    CHECK(!ac_unsqueeze(a, 4) && error_names(AC_ERR_INDEX, "unsqueeze"));

    sl.step = 0;
    CHECK(!ac_slice(a, &sl, 1) && error_names(AC_ERR_ARG, "slice"));
    sl.step = 1;
    sl.is_index = 1;
    sl.has_start = 1;
    sl.start = 3;
    CHECK(!ac_slice(a, &sl, 1) && error_names(AC_ERR_INDEX, "slice"));
    sl.start = -4;
    CHECK(!ac_slice(a, &sl, 1) && error_names(AC_ERR_INDEX, "slice"));
    CHECK(!ac_slice(a, &sl, 3) && error_names(AC_ERR_INDEX, "slice"));
    CHECK(!ac_slice(a, NULL, 1) && error_names(AC_ERR_ARG, "slice"));

    list[0] = a;
    list[1] = c;
    CHECK(!ac_cat(list, 2, 0) && error_names(AC_ERR_SHAPE, "cat"));
    CHECK(!ac_cat(list, 0, 0) && error_names(AC_ERR_ARG, "cat"));
    CHECK(!ac_cat(NULL, 1, 0) && error_names(AC_ERR_ARG, "cat"));
    CHECK(!ac_stack(list, 2, 0) && error_names(AC_ERR_SHAPE, "stack"));
    list[1] = NULL;
    CHECK(!ac_stack(list, 2, 0) && error_names(AC_ERR_ARG, "stack"));

    /* still working afterwards */
    ac_clear_error();
    r = ac_sum(c, NULL, 0, 0);
    CHECK(r && r->ndim == 0);
    CHECK_NEAR(r->data[0], c->data[0] + c->data[1] + c->data[2] + c->data[3] + c->data[4] + c->data[5], 1e-5);
    ac_tensor_free(r);
    list[1] = a;
    r = ac_cat(list, 2, 0);
    CHECK(r && r->shape[0] == 6 && r->data[12] == a->data[0] && ac_last_error_code() == AC_OK);
    ac_tensor_free(r); ac_tensor_free(a); ac_tensor_free(b); ac_tensor_free(c);
}

static void test_nothing_leaks(void)
{
    AcMemStats before, after;
    AcCheckpoint cp;
    ac_memory_stats(&before);
    cp = ac_mem_checkpoint();
    test_cat_and_stack_of_many_tensors_backpropagate();
    test_matmul_broadcasts_batch_dims();
    ac_mem_restore(cp);
    ac_memory_stats(&after);
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.live_tensors == before.live_tensors);
    CHECK(after.live_nodes == before.live_nodes);
}

int main(void)
{
    AcMemStats start, end;
    ac_manual_seed(7);
    ac_memory_stats(&start);
    RUN(test_sum_over_dims_matches_loops);
    RUN(test_mean_var_std_match_loops);
    RUN(test_max_splits_gradient_among_ties);
    RUN(test_max_dim_returns_first_index_and_routes_gradient);
    RUN(test_big_sum_is_the_same_for_any_thread_count);
    RUN(test_reduction_gradients_pass_gradient_check);
    RUN(test_matmul_2d_and_vectors);
    RUN(test_matmul_broadcasts_batch_dims);
    RUN(test_matmul_gradients_pass_gradient_check);
    RUN(test_reshape_shares_data_and_infers_one_dim);
    RUN(test_transpose_and_permute_move_elements);
    RUN(test_slice_follows_python_rules);
    RUN(test_shape_gradients_pass_gradient_check);
    RUN(test_bad_input_fails_cleanly);
    RUN(test_nothing_leaks);
    ac_memory_stats(&end);
    CHECK(end.live_tensors == start.live_tensors);
    CHECK(end.bytes_in_use == start.bytes_in_use);
    return TEST_REPORT();
}
