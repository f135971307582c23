/*
 * test_set_grad.c - gradients in a caller's buffer (ac_tensor_set_grad,
 * ac_tensor_view_flat): backward accumulates into the installed grad in place;
 * zero_grad drops the grad and the next backward fills the same memory again,
 * with no allocation; the buffer lives as long as a view of it; the flat
 * helpers leave a grad that is the bucket's own slice in place; bad calls are
 * refused.
 */
#include "ac.h"
#include "test.h"

#include <string.h>

static AcMemStats stats(void)
{
    AcMemStats s;
    ac_memory_stats(&s);
    return s;
}

/* loss = sum(w * x): d/dw = x */
static int backward_of_w_times_x(AcTensor *w, AcTensor *x)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    int rc = ac_backward(ac_sum(ac_mul(w, x), NULL, 0, 0));
    ac_mem_restore(cp);
    return rc;
}

/* w (2, 3) with its grad at flat[2..8); flat's other elements hold -1. */
typedef struct {
    AcTensor *flat, *w, *x, *view;
} Bucket;

static Bucket bucket_new(void)
{
    const int64_t n = 10, shape[2] = {2, 3};
    Bucket b;
    b.flat = ac_full(&n, 1, -1.0f);
    b.w = leaf_randn(shape, 2, 1.0f);
    b.x = ac_randn(shape, 2);
    b.view = ac_tensor_view_flat(b.flat, 2, shape, 2);
    return b;
}

static void bucket_free(Bucket *b)
{
    ac_tensor_free(b->view);
    ac_tensor_free(b->flat);
    ac_tensor_free(b->w);
    ac_tensor_free(b->x);
}

static int untouched_outside(const Bucket *b)
{
    return b->flat->data[0] == -1.0f && b->flat->data[1] == -1.0f && b->flat->data[8] == -1.0f &&
           b->flat->data[9] == -1.0f;
}

static void test_backward_accumulates_into_the_installed_grad(void)
{
    Bucket b = bucket_new();
    int i;
    CHECK(b.view && b.view->data == b.flat->data + 2 && b.view->ndim == 2 && b.view->shape[1] == 3);
    memset(b.view->data, 0, 6 * sizeof(float));
    CHECK(ac_tensor_set_grad(b.w, b.view) == AC_OK);
    CHECK(b.w->grad == b.view);
    CHECK(backward_of_w_times_x(b.w, b.x) == AC_OK);
    CHECK(backward_of_w_times_x(b.w, b.x) == AC_OK);
    CHECK(b.w->grad == b.view);
    for (i = 0; i < 6; i++) CHECK_NEAR(b.flat->data[2 + i], 2.0 * b.x->data[i], 1e-6);
    CHECK(untouched_outside(&b));
    bucket_free(&b);
}

/* As PyTorch's zero_grad with set_to_none: the grad reads NULL; the next backward
   writes the gradient (not a sum) into the same memory, allocating nothing. */
static void test_zero_grad_drops_the_grad_and_backward_refills_its_home(void)
{
    Bucket b = bucket_new();
    AcMemStats before;
    int step, i;
    CHECK(ac_tensor_set_grad(b.w, b.view) == AC_OK);
    CHECK(backward_of_w_times_x(b.w, b.x) == AC_OK);
    before = stats();
    for (step = 0; step < 3; step++) {
        CHECK(ac_tensor_zero_grad(b.w) == AC_OK);
        CHECK(b.w->grad == NULL);
        CHECK(backward_of_w_times_x(b.w, b.x) == AC_OK);
        CHECK(b.w->grad == b.view);
    }
    CHECK(stats().heap_allocations == before.heap_allocations);
    CHECK(stats().live_tensors == before.live_tensors);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    for (i = 0; i < 6; i++) CHECK_NEAR(b.flat->data[2 + i], b.x->data[i], 1e-6);
    CHECK(untouched_outside(&b));
    bucket_free(&b);
}

/* grad NULL forgets the home: the next backward makes a grad of the leaf's own. */
static void test_set_grad_null_forgets_the_home(void)
{
    Bucket b = bucket_new();
    CHECK(ac_tensor_set_grad(b.w, b.view) == AC_OK);
    CHECK(ac_tensor_set_grad(b.w, NULL) == AC_OK);
    CHECK(b.w->grad == NULL);
    CHECK(backward_of_w_times_x(b.w, b.x) == AC_OK);
    CHECK(b.w->grad && b.w->grad != b.view);
    CHECK(b.view->data[0] == -1.0f);
    CHECK_NEAR(b.w->grad->data[5], b.x->data[5], 1e-6);
    bucket_free(&b);
}

/* A grad from backward, then a spare kept by zero_grad, then a home: each step
   gives back what it replaces; freeing everything leaves no tensor behind. */
static void test_references_are_given_back(void)
{
    const int64_t start_tensors = stats().live_tensors;
    Bucket b = bucket_new();
    CHECK(backward_of_w_times_x(b.w, b.x) == AC_OK);
    CHECK(ac_tensor_zero_grad(b.w) == AC_OK);
    CHECK(stats().spare_grad_bytes > 0);
    CHECK(ac_tensor_set_grad(b.w, b.view) == AC_OK);
    CHECK(stats().spare_grad_bytes == 0);
    CHECK(ac_tensor_set_grad(b.w, b.view) == AC_OK);   /* again: no reference gained */
    ac_tensor_free(b.flat);                              /* the view keeps flat's memory */
    b.flat = NULL;
    CHECK(backward_of_w_times_x(b.w, b.x) == AC_OK);   /* added to what the view held */
    CHECK_NEAR(b.view->data[0], b.x->data[0] - 1.0, 1e-6);
    bucket_free(&b);
    CHECK(stats().live_tensors == start_tensors);
    CHECK(stats().spare_grad_bytes == 0);
}

/* ac_grads_to_flat leaves a grad that is flat's own slice where it is; the
   mean of flats refuses a grad inside a flat it reads. */
static void test_flat_helpers_and_grads_in_the_bucket(void)
{
    const int64_t shape[2] = {2, 3}, n = 6;
    AcTensor *w = leaf_randn(shape, 2, 1.0f), *x = ac_randn(shape, 2);
    AcTensor *flat = ac_full(&n, 1, 0.0f), *view = ac_tensor_view_flat(flat, 0, shape, 2);
    AcTensor *flats[1];
    CHECK(ac_tensor_set_grad(w, view) == AC_OK);
    CHECK(backward_of_w_times_x(w, x) == AC_OK);
    CHECK(ac_grads_to_flat(&w, 1, flat) == AC_OK);
    CHECK_NEAR(flat->data[4], x->data[4], 1e-6);
    CHECK(ac_grads_from_flat(&w, 1, 0.5f, flat) == AC_OK);   /* in place */
    CHECK_NEAR(view->data[4], 0.5 * x->data[4], 1e-6);
    flats[0] = flat;
    CHECK(ac_grads_mean_of_flats(&w, 1, 1.0f, flats, 1) == AC_ERR_ARG);
    CHECK(strstr(ac_last_error(), "grads_mean_of_flats: params[0] (2, 3) has a grad in flats[0]") != NULL);
    ac_tensor_free(view);
    ac_tensor_free(flat);
    ac_tensor_free(w);
    ac_tensor_free(x);
}

static void check_error(int rc, int code, const char *message)
{
    CHECK(rc == code);
    CHECK(strstr(ac_last_error(), message) != NULL);
    if (!strstr(ac_last_error(), message)) fprintf(stderr, "  got: %s\n", ac_last_error());
}

static void test_bad_calls_are_refused(void)
{
    const int64_t shape[2] = {2, 3}, other[2] = {3, 2}, n = 8;
    Bucket b = bucket_new();
    AcTensor *plain = ac_full(shape, 2, 0.0f), *wrong = ac_full(other, 2, 0.0f);
    AcTensor *ints = ac_tensor_new_typed(shape, 2, AC_INT64), *flat_ints = ac_tensor_new_typed(&n, 1, AC_INT64);
    AcTensor *needs_grad = leaf_randn(shape, 2, 1.0f), *made = ac_mul(b.w, b.x), *same = ac_tensor_detach(b.w);
    AcCheckpoint cp;
    check_error(ac_tensor_set_grad(NULL, plain), AC_ERR_ARG, "set_grad: leaf is NULL");
    check_error(ac_tensor_set_grad(made, plain), AC_ERR_STATE, "set_grad: tensor of shape (2, 3) is not a leaf (made by mul)");
    check_error(ac_tensor_set_grad(plain, b.view), AC_ERR_STATE, "set_grad: tensor of shape (2, 3) does not require grad");
    check_error(ac_tensor_set_grad(b.w, wrong), AC_ERR_SHAPE, "set_grad: grad of shape (3, 2) for a leaf of shape (2, 3)");
    check_error(ac_tensor_set_grad(b.w, ints), AC_ERR_DTYPE, "set_grad: grad is int64");
    check_error(ac_tensor_set_grad(b.w, needs_grad), AC_ERR_ARG, "set_grad: grad of shape (2, 3) requires grad");
    check_error(ac_tensor_set_grad(b.w, same), AC_ERR_ARG, "set_grad: grad of shape (2, 3) shares memory with its leaf");
    cp = ac_mem_checkpoint();
    check_error(ac_tensor_set_grad(b.w, ac_full(shape, 2, 0.0f)), AC_ERR_STATE,
                "set_grad: grad of shape (2, 3) was made in a scope, which ends before the leaf");
    check_error(ac_tensor_set_grad(leaf_randn(shape, 2, 1.0f), plain), AC_ERR_STATE,
                "set_grad: leaf of shape (2, 3) was made in a scope");
    CHECK(ac_tensor_view_flat(ac_full(&n, 1, 0.0f), 0, shape, 2) == NULL);
    CHECK(strstr(ac_last_error(), "view_flat: flat of shape (8,) was made in a scope") != NULL);
    ac_mem_restore(cp);
    CHECK(ac_tensor_view_flat(NULL, 0, shape, 2) == NULL);
    CHECK(strstr(ac_last_error(), "view_flat: flat is NULL") != NULL);
    CHECK(ac_tensor_view_flat(flat_ints, 0, shape, 2) == NULL);
    CHECK(ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(ac_tensor_view_flat(b.flat, 5, shape, 2) == NULL);
    CHECK(strstr(ac_last_error(), "view_flat: 6 elements from offset 5 do not fit in flat of shape (10,)") != NULL);
    CHECK(ac_tensor_view_flat(b.flat, -1, shape, 2) == NULL);
    CHECK(ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(ac_tensor_view_flat(b.flat, 0, NULL, 2) == NULL);
    CHECK(ac_last_error_code() == AC_ERR_ARG);
    /* nothing was installed: backward still makes the leaf a grad of its own */
    CHECK(b.w->grad == NULL);
    CHECK(backward_of_w_times_x(b.w, b.x) == AC_OK);
    CHECK(b.w->grad && b.w->grad != b.view);
    ac_tensor_free(made);
    ac_tensor_free(same);
    ac_tensor_free(needs_grad);
    ac_tensor_free(flat_ints);
    ac_tensor_free(ints);
    ac_tensor_free(wrong);
    ac_tensor_free(plain);
    bucket_free(&b);
}

int main(void)
{
    RUN(test_backward_accumulates_into_the_installed_grad);
    RUN(test_zero_grad_drops_the_grad_and_backward_refills_its_home);
    RUN(test_set_grad_null_forgets_the_home);
    RUN(test_references_are_given_back);
    RUN(test_flat_helpers_and_grads_in_the_bucket);
    RUN(test_bad_calls_are_refused);
    return TEST_REPORT();
}
