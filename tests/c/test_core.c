/*
 * test_core.c - scopes (and scoped tensors freed early), root reference
 * counting, the backward walk, grad mode, graph dumps, the gradient check and
 * error reporting of libac's core.
 */
#define _POSIX_C_SOURCE 200809L

#include "ac.h"
#include "test.h"

#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)   /* gcc */
#define UNDER_ASAN 1
#elif defined(__has_feature)        /* clang */
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static AcMemStats stats(void)
{
    AcMemStats s;
    ac_memory_stats(&s);
    return s;
}

static AcTensor *vec(const float *data, int64_t n)
{
    return ac_tensor_from_data(data, &n, 1);
}

static void test_restore_frees_everything_made_in_scope(void)
{
    AcMemStats before = stats(), after;
    int64_t shape[2] = {3, 4};
    AcCheckpoint cp = ac_mem_checkpoint();
    int i;
    CHECK(cp.depth == 1);
    CHECK(ac_mem_depth() == 1);
    for (i = 0; i < 100; i++) {
        AcTensor *t = ac_tensor_new(shape, 2);
        CHECK(t && t->scope_depth == 1 && ((uintptr_t)t->data % 64) == 0);
    }
    CHECK(stats().live_tensors == before.live_tensors + 100);
    CHECK(ac_mem_restore(cp) == AC_OK);
    after = stats();
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.live_tensors == before.live_tensors);
    CHECK(ac_mem_depth() == 0);
}

/* A scoped op output is counted (with its node) in the scope it was made in
   until it is freed or its scope ends; one made without grad has no node. */
static void test_scoped_outputs_count_their_tensor_node_and_depth(void)
{
    const float one[3] = {1.0f, 2.0f, 3.0f};
    AcTensor *w = vec(one, 3), *x, *y, *z;
    AcMemStats before, inner;
    AcCheckpoint outer_cp, inner_cp;
    ac_tensor_set_requires_grad(w, 1);
    before = stats();
    outer_cp = ac_mem_checkpoint();
    x = vec(one, 3);
    inner_cp = ac_mem_checkpoint();
    inner = stats();
    y = ac_mul(x, w);
    CHECK(y && y->scope_depth == 2 && y->node != NULL);
    CHECK(stats().live_tensors == inner.live_tensors + 1);
    CHECK(stats().live_nodes == inner.live_nodes + 1);
    ac_set_grad_enabled(0);
    z = ac_mul(x, w);
    ac_set_grad_enabled(1);
    CHECK(z && z->scope_depth == 2 && z->node == NULL);
    CHECK(stats().live_tensors == inner.live_tensors + 2);
    CHECK(stats().live_nodes == inner.live_nodes + 1);
    ac_tensor_free(z);   /* the newest allocation: given back at once */
    CHECK(stats().live_tensors == inner.live_tensors + 1);
    CHECK(ac_mem_restore(inner_cp) == AC_OK);
    CHECK(stats().live_tensors == inner.live_tensors);
    CHECK(stats().live_nodes == inner.live_nodes);
    CHECK(stats().bytes_in_use == inner.bytes_in_use);
    CHECK(x->scope_depth == 1);
    CHECK(ac_mem_restore(outer_cp) == AC_OK);
    CHECK(stats().live_tensors == before.live_tensors);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    ac_tensor_free(w);
}

/* A tape longer than the walk keeps on its stack (its lists then grow into
   the arena): x added to itself 40 times has gradient 41 everywhere. */
static void test_backward_through_a_tape_longer_than_the_stack_lists(void)
{
    const float data[2] = {0.5f, -1.0f};
    AcTensor *x = vec(data, 2), *acc, *loss;
    AcCheckpoint cp = ac_mem_checkpoint();
    int i;
    ac_tensor_set_requires_grad(x, 1);
    acc = x;
    for (i = 0; i < 40; i++) acc = ac_add(acc, x);
    loss = ac_sum(acc, NULL, 0, 0);
    CHECK(ac_backward(loss) == AC_OK);
    CHECK(x->grad && x->grad->data[0] == 41.0f && x->grad->data[1] == 41.0f);
    ac_mem_restore(cp);
    ac_tensor_zero_grad(x);
    ac_tensor_free(x);
}

static void test_restore_outer_ends_inner_scopes(void)
{
    AcMemStats before = stats();
    int64_t n = 1000;
    AcCheckpoint outer = ac_mem_checkpoint(), inner;
    ac_tensor_new(&n, 1);
    inner = ac_mem_checkpoint();
    ac_tensor_new(&n, 1);
    CHECK(inner.depth == 2);
    CHECK(ac_mem_restore(outer) == AC_OK);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(ac_mem_restore(inner) == AC_ERR_SCOPE);   /* already ended */
    CHECK(ac_mem_restore(outer) == AC_ERR_SCOPE);   /* restored twice */
    CHECK(strstr(ac_last_error(), "mem_restore") != NULL);
}

static void test_large_allocations_chain_new_blocks(void)
{
    AcMemStats before = stats();
    int64_t n = 3 << 20;   /* 12 MB, more than a block */
    AcCheckpoint cp = ac_mem_checkpoint();
    int i;
    for (i = 0; i < 4; i++) {
        AcTensor *t = ac_full(&n, 1, 2.0f);
        CHECK(t && t->data[n - 1] == 2.0f);
    }
    ac_mem_restore(cp);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
}

static void test_root_tensors_are_reference_counted(void)
{
    AcMemStats before = stats();
    float d[3] = {1, 2, 3};
    AcTensor *a = vec(d, 3), *b;
    CHECK(a->refcount == 1 && a->scope_depth == 0);
    ac_tensor_retain(a);
    CHECK(a->refcount == 2);
    ac_tensor_free(a);
    b = ac_tensor_detach(a);   /* a view: holds a */
    CHECK(b->data == a->data && a->refcount == 2);
    ac_tensor_free(a);
    CHECK(b->data[2] == 3.0f);
    ac_tensor_free(b);
    CHECK(stats().live_tensors == before.live_tensors);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(ac_tensor_free(NULL) == AC_OK);
}

static void test_scoped_graph_keeps_root_inputs_alive(void)
{
    AcMemStats before = stats();
    float d[2] = {1, 2};
    AcTensor *w = vec(d, 2), *y, *loss;
    AcCheckpoint cp;
    ac_tensor_set_requires_grad(w, 1);
    cp = ac_mem_checkpoint();
    y = ac_mul(w, w);
    ac_tensor_free(w);            /* the caller lets go; the graph still holds w */
    loss = ac_sum(y, NULL, 0, 0);
    CHECK(ac_backward(loss) == AC_OK);
    CHECK(w->grad && w->grad->data[0] == 2.0f && w->grad->data[1] == 4.0f);
    ac_mem_restore(cp);           /* drops the last reference: w and its grad go */
    CHECK(stats().live_tensors == before.live_tensors);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
}

static void test_gradients_accumulate_for_reused_tensors(void)
{
    float d[2] = {3, -1};
    AcTensor *x = vec(d, 2), *y, *loss;
    AcCheckpoint cp = ac_mem_checkpoint();
    ac_tensor_set_requires_grad(x, 1);
    /* loss = sum(x*x + x): dloss/dx = 2x + 1 */
    y = ac_add(ac_mul(x, x), x);
    loss = ac_sum(y, NULL, 0, 0);
    CHECK(ac_backward_ex(loss, NULL, 1) == AC_OK);   /* keep the graph for a second pass */
    CHECK_NEAR(x->grad->data[0], 7.0, 1e-6);
    CHECK_NEAR(x->grad->data[1], -1.0, 1e-6);
    CHECK(ac_backward(loss) == AC_OK);   /* a second pass adds again */
    CHECK_NEAR(x->grad->data[0], 14.0, 1e-6);
    ac_mem_restore(cp);
    ac_tensor_free(x);
}

static void test_scoped_leaf_grad_lives_with_its_scope(void)
{
    AcMemStats before = stats();
    float d[1] = {2};
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *x = vec(d, 1), *y;
    ac_tensor_set_requires_grad(x, 1);
    y = ac_mul(x, x);
    CHECK(ac_backward(y) == AC_OK);
    CHECK_NEAR(x->grad->data[0], 4.0, 1e-6);
    ac_mem_restore(cp);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
}

static void test_long_chain_backward_and_free_without_recursion(void)
{
    AcMemStats before = stats();
    float d[1] = {1};
    AcTensor *x = vec(d, 1), *y;
    int i;
    ac_tensor_set_requires_grad(x, 1);
    y = x;
    ac_tensor_retain(y);
    for (i = 0; i < 100000; i++) {   /* at root: each link owns the previous one */
        AcTensor *next = ac_add_scalar(y, 0.0f);
        ac_tensor_free(y);
        y = next;
    }
    CHECK(ac_backward(y) == AC_OK);
    CHECK(x->grad && x->grad->data[0] == 1.0f);
    ac_tensor_free(y);   /* frees 100,000 nodes iteratively */
    ac_tensor_free(x);
    CHECK(stats().live_tensors == before.live_tensors);
    CHECK(stats().live_nodes == before.live_nodes);
}

static void test_no_graph_without_grad_mode(void)
{
    float d[2] = {1, 2};
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *x = vec(d, 2), *y;
    int previous;
    ac_tensor_set_requires_grad(x, 1);
    previous = ac_set_grad_enabled(0);
    CHECK(previous == 1 && !ac_is_grad_enabled());
    y = ac_mul(x, x);
    CHECK(!y->requires_grad && !y->node);
    CHECK(ac_backward(ac_sum(y, NULL, 0, 0)) == AC_ERR_STATE);
    ac_set_grad_enabled(previous);
    y = ac_mul(x, x);
    CHECK(y->requires_grad && y->node && strcmp(y->node->op, "mul") == 0);
    CHECK(ac_tensor_set_requires_grad(y, 0) == AC_ERR_STATE);
    ac_mem_restore(cp);
}

static void test_backward_checks_its_arguments(void)
{
    float d[2] = {1, 2};
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *x = vec(d, 2), *y, *g;
    int64_t three = 3;
    ac_tensor_set_requires_grad(x, 1);
    y = ac_mul(x, x);
    CHECK(ac_backward(NULL) == AC_ERR_ARG);
    CHECK(ac_backward(y) == AC_ERR_SHAPE);
    CHECK(strstr(ac_last_error(), "(2,)") != NULL);
    g = ac_full(&three, 1, 1.0f);
    CHECK(ac_backward_with(y, g) == AC_ERR_SHAPE);
    CHECK(ac_backward_with(y, NULL) == AC_ERR_ARG);
    g = ac_full(y->shape, 1, 1.0f);
    CHECK(ac_backward_with(y, g) == AC_OK);
    CHECK_NEAR(x->grad->data[1], 4.0, 1e-6);
    ac_mem_restore(cp);
}

static void test_memory_limit_fails_cleanly_then_recovers(void)
{
    int64_t big = 1 << 22, small = 16;
    AcMemStats s = stats();
    AcCheckpoint cp;
    CHECK(ac_set_memory_limit(-1) == AC_ERR_ARG);
    CHECK(ac_set_memory_limit(s.bytes_in_use + (1 << 20)) == AC_OK);
    cp = ac_mem_checkpoint();
    CHECK(ac_tensor_new(&big, 1) == NULL);
    CHECK(ac_last_error_code() == AC_ERR_MEMORY);
    CHECK(strstr(ac_last_error(), "memory limit") != NULL);
    CHECK(ac_tensor_new(&small, 1) != NULL);
    ac_mem_restore(cp);
    ac_set_memory_limit(0);
    CHECK(ac_tensor_free(ac_tensor_new(&big, 1)) == AC_OK);
}

static void test_creation_rejects_bad_shapes(void)
{
    int64_t neg[2] = {2, -1}, huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40}, ok = 2;
    CHECK(ac_tensor_new(neg, 2) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_tensor_new(huge, 2) == NULL && ac_last_error_code() == AC_ERR_MEMORY);
    CHECK(ac_tensor_new(&ok, 9) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_tensor_new(NULL, 1) == NULL);
    CHECK(ac_tensor_from_data(NULL, &ok, 1) == NULL);
    CHECK(ac_arange(0, 1, 0) == NULL);
    CHECK(ac_eye(-1, 2) == NULL);
    CHECK(ac_memory_stats(NULL) == AC_ERR_ARG);
    ac_clear_error();
    CHECK(ac_last_error_code() == AC_OK && ac_last_error()[0] == '\0');
}

static void test_creation_values(void)
{
    AcTensor *r = ac_arange(0, 1, 0.25), *e = ac_eye(2, 3);
    int64_t n = 10000, i;
    AcTensor *u, *g;
    double mean = 0;
    CHECK(r->size == 4 && r->data[3] == 0.75f);
    CHECK(e->data[0] == 1 && e->data[1] == 0 && e->data[4] == 1 && e->data[5] == 0);
    ac_manual_seed(7);
    u = ac_rand(&n, 1);
    ac_manual_seed(7);
    g = ac_rand(&n, 1);
    CHECK(memcmp(u->data, g->data, (size_t)n * sizeof(float)) == 0);
    for (i = 0; i < n; i++) mean += u->data[i];
    CHECK_NEAR(mean / (double)n, 0.5, 0.02);
    ac_tensor_free(g);
    g = ac_randn(&n, 1);
    for (mean = 0, i = 0; i < n; i++) mean += g->data[i];
    CHECK_NEAR(mean / (double)n, 0.0, 0.05);
    ac_tensor_free(r);
    ac_tensor_free(e);
    ac_tensor_free(u);
    ac_tensor_free(g);
}

static void test_graph_dumps_name_ops_and_shapes(void)
{
    float d[2] = {1, 2};
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *x = vec(d, 2), *y;
    char text[512], small[8];
    int64_t len;
    ac_tensor_set_requires_grad(x, 1);
    y = ac_sum(ac_mul(x, x), NULL, 0, 0);
    len = ac_graph_text(y, text, sizeof text);
    CHECK(len > 0 && (size_t)len == strlen(text));
    CHECK(strstr(text, "#0 mul(leaf (2,), leaf (2,)) -> (2,)") != NULL);
    CHECK(strstr(text, "#1 sum(#0) -> ()") != NULL);
    CHECK(ac_graph_text(y, small, sizeof small) == len && strlen(small) == 7);
    len = ac_graph_dot(y, text, sizeof text);
    CHECK(len > 0 && strncmp(text, "digraph", 7) == 0 && strstr(text, "n0 -> n1") != NULL);
    CHECK(ac_graph_text(NULL, text, sizeof text) < 0);
    CHECK(ac_graph_dot(y, NULL, 10) < 0);
    ac_mem_restore(cp);
}

static AcTensor *square_times(AcTensor *const *in, int n, void *user)
{
    (void)n;
    (void)user;
    return ac_mul(ac_mul(in[0], in[0]), in[1]);
}

static AcTensor *detached_output(AcTensor *const *in, int n, void *user)
{
    (void)n;
    (void)user;
    return ac_tensor_detach(ac_mul(in[0], in[0]));
}

/* x * detach(x): its graph claims d/dx = x, the truth is 2x. */
static AcTensor *half_gradient(AcTensor *const *in, int n, void *user)
{
    (void)n;
    (void)user;
    return ac_mul(in[0], ac_tensor_detach(in[0]));
}

static void test_gradient_check_passes_and_catches(void)
{
    float a[3] = {0.5f, -1.0f, 2.0f}, b[3] = {1.5f, 0.25f, -0.75f}, err = -1;
    AcTensor *in[2];
    in[0] = vec(a, 3);
    in[1] = vec(b, 3);
    ac_tensor_set_requires_grad(in[0], 1);
    ac_tensor_set_requires_grad(in[1], 1);
    CHECK(ac_gradient_check(square_times, in, 2, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_OK);
    CHECK(err >= 0 && err < 1e-2);
    CHECK(in[0]->grad == NULL);   /* the check leaves grads as it found them */
    CHECK(ac_gradient_check(half_gradient, in, 1, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_ERR_GRADCHECK);
    CHECK(strstr(ac_last_error(), "analytic") != NULL && err > 0.1f);
    CHECK(ac_gradient_check(detached_output, in, 1, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_ERR_ARG);
    CHECK(ac_gradient_check(NULL, in, 1, NULL, 1e-2f, 1e-2f, 1e-2f, &err) == AC_ERR_ARG);
    CHECK(ac_gradient_check(square_times, in, 2, NULL, 0.0f, 1e-2f, 1e-2f, &err) == AC_ERR_ARG);
    ac_tensor_free(in[0]);
    ac_tensor_free(in[1]);
}

static void *thread_scopes(void *arg)
{
    int64_t n = 256;
    int i, *ok = arg;
    *ok = 1;
    for (i = 0; i < 200; i++) {
        AcCheckpoint cp = ac_mem_checkpoint();
        AcTensor *t = ac_full(&n, 1, (float)i);
        if (!t || cp.depth != 1 || t->data[n - 1] != (float)i) *ok = 0;
        if (ac_mem_restore(cp) != AC_OK) *ok = 0;
    }
    return NULL;
}

static void test_scopes_are_per_thread(void)
{
    pthread_t threads[4];
    int ok[4], i;
    AcCheckpoint mine = ac_mem_checkpoint();
    for (i = 0; i < 4; i++) pthread_create(&threads[i], NULL, thread_scopes, &ok[i]);
    for (i = 0; i < 4; i++) pthread_join(threads[i], NULL);
    for (i = 0; i < 4; i++) CHECK(ok[i]);
    CHECK(ac_mem_depth() == 1);
    CHECK(ac_mem_restore(mine) == AC_OK);
}

/* A tensor whose own block is full, so the next allocations start a fresh block. */
static void fill_block(void)
{
    int64_t n = 1 << 18;   /* 1 MB of data: more than a block, so a block of its own */
    ac_tensor_new(&n, 1);
}

static void test_a_freed_scoped_tensor_is_reused_by_its_scope(void)
{
    AcMemStats before = stats();
    int64_t n = 1 << 16;   /* 256 KB */
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *a, *b, *c;
    float *a_data;
    int64_t both;
    fill_block();
    a = ac_full(&n, 1, -1.0f);
    b = ac_abs(a);                /* no graph: b does not refer to a */
    a_data = a->data;
    both = stats().bytes_in_use;
    CHECK(ac_tensor_free(a) == AC_OK);
    CHECK(stats().bytes_in_use < both);
    c = ac_mul_scalar(b, 2.0f);   /* takes the place a left */
    CHECK(c && c->data == a_data);
    CHECK(c->data[0] == 2.0f && c->data[n - 1] == 2.0f && b->data[n - 1] == 1.0f);
    CHECK(stats().bytes_in_use == both);
    ac_mem_restore(cp);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
}

static void test_freeing_the_newest_tensors_moves_the_top_back(void)
{
    int64_t n = 1 << 14, twice = 1 << 15;
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *a, *b, *c;
    float *a_data;
    int64_t start;
    fill_block();
    start = stats().bytes_in_use;
    a = ac_full(&n, 1, 1.0f);
    b = ac_full(&n, 1, 2.0f);
    a_data = a->data;
    ac_tensor_free(a);            /* below b: kept for reuse */
    ac_tensor_free(b);            /* the newest: popped, and a's space with it */
    CHECK(stats().bytes_in_use == start);
    c = ac_full(&twice, 1, 3.0f); /* too big for a's space alone: fits where a began */
    CHECK(c && c->data == a_data);
    ac_mem_restore(cp);
}

static void test_scoped_tensors_something_refers_to_are_not_reused(void)
{
    int64_t n = 1 << 16;
    float one = 1.0f;
    AcMemStats before = stats();
    AcTensor *w = ac_tensor_from_data(&one, NULL, 0), *a, *view, *product, *kept;
    AcCheckpoint outer;
    int64_t in_use;
    ac_tensor_set_requires_grad(w, 1);
    outer = ac_mem_checkpoint();
    a = ac_full(&n, 1, 5.0f);
    view = ac_reshape(a, &n, 1);          /* a view holds a */
    product = ac_mul(a, w);               /* so does a graph node */
    kept = ac_full(&n, 1, 6.0f);
    ac_tensor_retain(kept);               /* and a retain */
    in_use = stats().bytes_in_use;
    ac_tensor_free(a);
    ac_tensor_free(kept);
    CHECK(stats().bytes_in_use == in_use);
    ac_full(&n, 1, 0.0f);
    CHECK(view->data[n - 1] == 5.0f && kept->data[n - 1] == 6.0f);
    CHECK(ac_backward(ac_sum(product, NULL, 0, 0)) == AC_OK);
    CHECK(w->grad && w->grad->data[0] == 5.0f * (float)n);
    ac_mem_restore(outer);
    ac_tensor_free(w);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
}

/* A tensor of an outer scope freed while an inner one is open: the inner scope
   reuses its memory until it ends, then the outer one does. */
static void test_a_tensor_freed_in_an_inner_scope_is_lent_to_it(void)
{
    int64_t n = 1 << 16, half = 1 << 15;
    AcMemStats before = stats();
    AcCheckpoint outer = ac_mem_checkpoint(), inner;
    AcTensor *a, *b, *c, *d;
    float *a_data;
    int64_t in_use, live, freed;
    fill_block();
    a = ac_full(&n, 1, 7.0f);
    b = ac_full(&n, 1, 8.0f);                /* above a: a is not on top */
    a_data = a->data;
    inner = ac_mem_checkpoint();
    in_use = stats().bytes_in_use;
    live = stats().live_tensors;
    ac_tensor_free(a);
    freed = in_use - stats().bytes_in_use;
    CHECK(freed >= n * 4 && stats().live_tensors == live - 1);
    c = ac_full(&half, 1, 1.0f);             /* the inner scope takes a's place */
    CHECK(c && c->data >= a_data && c->data < a_data + n);
    ac_mem_checkpoint();                     /* a third scope: the rest is not its own */
    d = ac_full(&half, 1, 2.0f);
    CHECK(d && (d->data + half <= a_data || d->data >= a_data + n));
    ac_mem_restore(inner);                   /* ends both: a's place goes back to outer */
    CHECK(stats().bytes_in_use == in_use - freed);
    CHECK(stats().live_tensors == live - 1);
    c = ac_full(&n, 1, 3.0f);                /* the outer scope now reuses it */
    CHECK(c && c->data == a_data && b->data[n - 1] == 8.0f);
    ac_mem_restore(outer);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
}

/* Lent through two ended scopes back to its own. */
static void test_a_lent_chunk_goes_back_through_every_scope_in_between(void)
{
    int64_t n = 1 << 16;
    AcMemStats before = stats();
    AcCheckpoint outer = ac_mem_checkpoint(), middle, inner;
    AcTensor *a, *b, *c;
    float *a_data;
    int64_t in_use;
    fill_block();
    a = ac_full(&n, 1, 7.0f);
    ac_full(&n, 1, 8.0f);
    a_data = a->data;
    middle = ac_mem_checkpoint();
    ac_full(&n, 1, 9.0f);
    inner = ac_mem_checkpoint();
    in_use = stats().bytes_in_use;
    ac_tensor_free(a);                       /* lent to inner */
    CHECK(stats().bytes_in_use < in_use);
    ac_mem_restore(inner);                   /* to middle */
    CHECK(stats().bytes_in_use < in_use);
    b = ac_full(&n, 1, 1.0f);
    CHECK(b && b->data == a_data);
    ac_mem_restore(middle);                  /* to outer, its own */
    c = ac_full(&n, 1, 2.0f);
    CHECK(c && c->data == a_data && c->data[n - 1] == 2.0f);
    ac_mem_restore(outer);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
}

/* In a scope at the same depth as the caller's, which is not the tensor's. */
static void *free_on_another_thread(void *t)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    ac_tensor_free(t);
    ac_mem_restore(cp);
    return NULL;
}

static void test_another_thread_cannot_free_a_scoped_tensor(void)
{
    int64_t n = 1 << 16;
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *a = ac_full(&n, 1, 1.0f);
    int64_t in_use = stats().bytes_in_use;
    pthread_t thread;
    pthread_create(&thread, NULL, free_on_another_thread, a);
    pthread_join(thread, NULL);
    CHECK(stats().bytes_in_use == in_use);
    ac_mem_restore(cp);
}

/* ---- spare grads: zero_grad keeps a dropped grad for the next backward ---- */

/* Backward of sum(p * g), in a scope of its own: p->grad becomes g (plus any grad p had). */
static void backward_weighted(AcTensor *p, const float *g)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *weights = vec(g, p->size);
    CHECK(ac_backward(ac_sum(ac_mul(p, weights), NULL, 0, 0)) == AC_OK);
    ac_mem_restore(cp);
}

static void test_a_dropped_grad_is_reused_by_the_next_backward(void)
{
    const float d[3] = {1, 2, 3}, g1[3] = {1, 2, 3}, g2[3] = {-1, 0.5f, 4};
    AcMemStats before = stats(), with_grad, spared;
    AcTensor *p = vec(d, 3), *first;
    int i;
    ac_tensor_set_requires_grad(p, 1);
    backward_weighted(p, g1);
    first = p->grad;
    with_grad = stats();
    CHECK(ac_tensor_zero_grad(p) == AC_OK);
    spared = stats();
    CHECK(p->grad == NULL);
    CHECK(spared.spare_grad_bytes > before.spare_grad_bytes);
    /* the grad's bytes moved out of bytes_in_use, as if it had been freed */
    CHECK(spared.bytes_in_use == with_grad.bytes_in_use - (spared.spare_grad_bytes - before.spare_grad_bytes));
    CHECK(spared.live_tensors == before.live_tensors + 1);   /* p only: a spare is no tensor */
    backward_weighted(p, g2);
    CHECK(p->grad == first);                                 /* no new allocation */
    CHECK(stats().heap_allocations == spared.heap_allocations);
    CHECK(stats().spare_grad_bytes == before.spare_grad_bytes);
    CHECK(stats().live_tensors == before.live_tensors + 2);
    for (i = 0; i < 3; i++) CHECK(p->grad->data[i] == g2[i]);
    backward_weighted(p, g1);                                /* accumulates into it */
    for (i = 0; i < 3; i++) CHECK(p->grad->data[i] == g1[i] + g2[i]);
    ac_tensor_free(p);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
}

static void test_a_spare_grad_is_freed_with_its_parameter(void)
{
    const float d[4] = {1, 2, 3, 4};
    AcMemStats before = stats();
    AcTensor *p = vec(d, 4);
    ac_tensor_set_requires_grad(p, 1);
    backward_weighted(p, d);
    ac_tensor_zero_grad(p);
    CHECK(stats().spare_grad_bytes > before.spare_grad_bytes);
    ac_tensor_free(p);                  /* under ASan, a spare left behind is a leak */
    CHECK(stats().spare_grad_bytes == before.spare_grad_bytes);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
}

static void test_a_dropped_grad_someone_holds_is_not_reused(void)
{
    const float d[3] = {1, 2, 3}, g1[3] = {1, 2, 3}, g2[3] = {-1, 0.5f, 4};
    AcMemStats before = stats();
    AcTensor *p = vec(d, 3), *held;
    int i;
    ac_tensor_set_requires_grad(p, 1);
    backward_weighted(p, g1);
    held = p->grad;
    ac_tensor_retain(held);
    ac_tensor_zero_grad(p);
    CHECK(stats().spare_grad_bytes == before.spare_grad_bytes);
    backward_weighted(p, g2);
    CHECK(p->grad != held);
    for (i = 0; i < 3; i++) CHECK(held->data[i] == g1[i] && p->grad->data[i] == g2[i]);
    ac_tensor_free(held);
    ac_tensor_free(p);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
}

static void test_taking_a_spare_back_respects_the_memory_limit(void)
{
    int64_t n = 1 << 16;
    AcTensor *p = ac_full(&n, 1, 1.0f), *spare;
    AcMemStats before;
    AcCheckpoint cp;
    size_t grad_bytes = (size_t)n * sizeof(float);
    ac_tensor_set_requires_grad(p, 1);
    cp = ac_mem_checkpoint();
    CHECK(ac_backward(ac_sum(p, NULL, 0, 0)) == AC_OK);
    ac_mem_restore(cp);
    spare = p->grad;
    ac_tensor_zero_grad(p);
    cp = ac_mem_checkpoint();
    before = stats();
    /* room for backward's scratch (sum's gradient, as big as p, and a few small
       lists) but not for the grad on top of it */
    ac_set_memory_limit(before.bytes_in_use + (int64_t)grad_bytes + 16384);
    CHECK(ac_backward(ac_sum(p, NULL, 0, 0)) == AC_ERR_MEMORY);
    CHECK(p->grad == NULL);
    CHECK(stats().spare_grad_bytes == before.spare_grad_bytes);
    ac_set_memory_limit(before.bytes_in_use + 2 * (int64_t)grad_bytes + 16384);   /* room for both */
    CHECK(ac_backward(ac_sum(p, NULL, 0, 0)) == AC_OK);
    CHECK(p->grad == spare && p->grad->data[n - 1] == 1.0f);   /* the spare, still there */
    ac_set_memory_limit(0);
    ac_mem_restore(cp);
    ac_tensor_free(p);
}

/* ---- root cache: a freed root tensor is kept for the next of its size ---- */

/* A root tensor of n ones; *bytes gets what it adds to bytes_in_use. */
static AcTensor *root_ones(int64_t n, int64_t *bytes)
{
    int64_t in_use = stats().bytes_in_use;
    AcTensor *t = ac_full(&n, 1, 1.0f);
    if (bytes) *bytes = stats().bytes_in_use - in_use;
    return t;
}

/* Leave this thread's root cache empty: fill it with 8 sizes no other test
   uses (pushing out what earlier tests left there), then take them all back
   into held, which the caller frees. */
static void empty_root_cache(AcTensor *held[8])
{
    AcCheckpoint cp = ac_mem_checkpoint();   /* the cache belongs to the thread's scope state */
    int i;
    ac_mem_restore(cp);
    for (i = 0; i < 8; i++) held[i] = root_ones(7001 + 32 * i, NULL);
    for (i = 0; i < 8; i++) ac_tensor_free(held[i]);
    for (i = 0; i < 8; i++) held[i] = root_ones(7001 + 32 * i, NULL);
}

static void free_all(AcTensor *held[8])
{
    int i;
    for (i = 0; i < 8; i++) ac_tensor_free(held[i]);
}

static void test_a_freed_root_tensor_is_reused_by_the_next_of_its_size(void)
{
    AcTensor *held[8], *a, *b, *c;
    AcMemStats before, cached;
    int64_t bytes;
    float *data;
    empty_root_cache(held);
    before = stats();
    CHECK(before.root_cached_bytes == 0);
    a = root_ones(1000, &bytes);
    data = a->data;
    ac_tensor_free(a);
    cached = stats();
    CHECK(cached.bytes_in_use == before.bytes_in_use);   /* cached bytes are not in use */
    CHECK(cached.root_cached_bytes == bytes);
    /* the limit applies to bytes in use only: a cached block is no exception */
    ac_set_memory_limit(before.bytes_in_use + bytes - 1);
    CHECK(root_ones(1000, NULL) == NULL);
    ac_set_memory_limit(before.bytes_in_use + bytes);
    b = root_ones(1000, NULL);
    ac_set_memory_limit(0);
    CHECK(b != NULL && b->data == data);
    CHECK(b->data[0] == 1.0f && b->data[999] == 1.0f);
    CHECK(stats().heap_allocations == cached.heap_allocations);
    CHECK(stats().root_cached_bytes == 0);
    CHECK(stats().bytes_in_use == before.bytes_in_use + bytes);
    c = root_ones(1001, NULL);                                /* another size: a malloc */
    CHECK(stats().heap_allocations == cached.heap_allocations + 1);
    ac_tensor_free(c);
    ac_tensor_free(b);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
    free_all(held);
}

static void test_the_root_cache_keeps_its_bounds(void)
{
    AcTensor *held[8], *t[9], *big;
    int64_t bytes[9], newest_eight = 0, big_bytes, heap;
    int i;
    empty_root_cache(held);
    for (i = 0; i < 9; i++) t[i] = root_ones(2000 + 64 * i, &bytes[i]);
    for (i = 0; i < 9; i++) ac_tensor_free(t[i]);
    for (i = 1; i < 9; i++) newest_eight += bytes[i];
    CHECK(stats().root_cached_bytes == newest_eight);        /* 8 entries: the oldest went */
    heap = stats().heap_allocations;
    t[0] = root_ones(2000, NULL);
    CHECK(stats().heap_allocations == heap + 1);
    t[8] = root_ones(2000 + 64 * 8, NULL);
    CHECK(stats().heap_allocations == heap + 1);
    ac_tensor_free(t[8]);
    ac_tensor_free(t[0]);
    /* 16 MB in all: three 6 MB tensors leave the newest two */
    for (i = 0; i < 3; i++) t[i] = root_ones((6 << 20) / 4 + 16 * i, &bytes[i]);
    for (i = 0; i < 3; i++) ac_tensor_free(t[i]);
    CHECK(stats().root_cached_bytes == bytes[1] + bytes[2]);
    /* one bigger than the whole cache is freed at once, leaving the cache as it was */
    big = root_ones((20 << 20) / 4, &big_bytes);
    ac_tensor_free(big);
    CHECK(stats().root_cached_bytes == bytes[1] + bytes[2]);
    heap = stats().heap_allocations;
    big = root_ones((20 << 20) / 4, NULL);
    CHECK(stats().heap_allocations == heap + 1);
    ac_tensor_free(big);
    free_all(held);
}

typedef struct {
    AcTensor *from_main;     /* made by the main thread, freed by this one */
    int64_t cached_here;     /* root_cached_bytes once this thread freed its tensors */
} RootCacheThread;

static void *free_roots_then_exit(void *arg)
{
    RootCacheThread *r = arg;
    AcCheckpoint cp = ac_mem_checkpoint();
    ac_mem_restore(cp);
    ac_tensor_free(r->from_main);               /* goes to this thread's cache */
    ac_tensor_free(root_ones(3000, NULL));
    r->cached_here = stats().root_cached_bytes;
    return NULL;   /* exiting frees the cache; under ASan, one left behind is a leak */
}

static void test_a_thread_frees_its_root_cache_when_it_exits(void)
{
    RootCacheThread r;
    AcMemStats before;
    int64_t main_bytes;
    pthread_t thread;
    r.from_main = root_ones(4000, &main_bytes);
    before = stats();
    pthread_create(&thread, NULL, free_roots_then_exit, &r);
    pthread_join(thread, NULL);
    CHECK(r.cached_here > before.root_cached_bytes + main_bytes);
    CHECK(stats().root_cached_bytes == before.root_cached_bytes);
    CHECK(stats().bytes_in_use == before.bytes_in_use - main_bytes);
}

#ifdef UNDER_ASAN
/* ---- under AddressSanitizer: memory kept for reuse stays off limits ------ */

static volatile float sink;

/* 1 when a child process running bad() was stopped by AddressSanitizer. */
static int sanitizer_stops(void (*bad)(void))
{
    int status;
    pid_t child = fork();
    if (child == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(2);   /* the report is expected */
        bad();
        _exit(0);
    }
    if (child < 0 || waitpid(child, &status, 0) != child) return 0;
    return WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 1);
}

static void read_live_scoped_tensor(void)
{
    int64_t n = 4096;
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *t = ac_tensor_new(&n, 1);
    sink = t->data[100];
    ac_mem_restore(cp);
}

static void read_after_scope_end(void)
{
    int64_t n = 4096;
    AcCheckpoint cp = ac_mem_checkpoint();
    float *data = ac_tensor_new(&n, 1)->data;
    ac_mem_restore(cp);
    sink = data[100];
}

static void read_released_chunk(void)
{
    int64_t n = 4096;
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *low = ac_tensor_new(&n, 1), *high = ac_tensor_new(&n, 1);
    float *data = low->data;
    ac_tensor_free(low);          /* below high: kept in the scope's free list */
    sink = data[100] + high->data[0];
    ac_mem_restore(cp);
}

static void read_cached_root_tensor(void)
{
    int64_t n = 1000;
    AcCheckpoint cp = ac_mem_checkpoint();   /* gives the thread its root cache */
    AcTensor *t;
    float *data;
    ac_mem_restore(cp);
    t = ac_tensor_new(&n, 1);
    data = t->data;
    ac_tensor_free(t);            /* kept in the thread's root cache */
    sink = data[10];
}

static void read_spare_grad(void)
{
    const float d[3] = {1, 2, 3};
    AcTensor *p = vec(d, 3);
    float *grad;
    ac_tensor_set_requires_grad(p, 1);
    backward_weighted(p, d);
    grad = p->grad->data;
    ac_tensor_zero_grad(p);       /* the grad becomes p's spare */
    sink = grad[1];
}

static void test_memory_kept_for_reuse_stays_off_limits(void)
{
    CHECK(!sanitizer_stops(read_live_scoped_tensor));
    CHECK(sanitizer_stops(read_after_scope_end));
    CHECK(sanitizer_stops(read_released_chunk));
    CHECK(sanitizer_stops(read_cached_root_tensor));
    CHECK(sanitizer_stops(read_spare_grad));
}
#endif

int main(void)
{
    RUN(test_restore_frees_everything_made_in_scope);
    RUN(test_restore_outer_ends_inner_scopes);
    RUN(test_scoped_outputs_count_their_tensor_node_and_depth);
    RUN(test_backward_through_a_tape_longer_than_the_stack_lists);
    RUN(test_large_allocations_chain_new_blocks);
    RUN(test_root_tensors_are_reference_counted);
    RUN(test_scoped_graph_keeps_root_inputs_alive);
    RUN(test_gradients_accumulate_for_reused_tensors);
    RUN(test_scoped_leaf_grad_lives_with_its_scope);
    RUN(test_long_chain_backward_and_free_without_recursion);
    RUN(test_no_graph_without_grad_mode);
    RUN(test_backward_checks_its_arguments);
    RUN(test_memory_limit_fails_cleanly_then_recovers);
    RUN(test_creation_rejects_bad_shapes);
    RUN(test_creation_values);
    RUN(test_graph_dumps_name_ops_and_shapes);
    RUN(test_gradient_check_passes_and_catches);
    RUN(test_scopes_are_per_thread);
    RUN(test_a_freed_scoped_tensor_is_reused_by_its_scope);
    RUN(test_freeing_the_newest_tensors_moves_the_top_back);
    RUN(test_scoped_tensors_something_refers_to_are_not_reused);
    RUN(test_a_tensor_freed_in_an_inner_scope_is_lent_to_it);
    RUN(test_a_lent_chunk_goes_back_through_every_scope_in_between);
    RUN(test_another_thread_cannot_free_a_scoped_tensor);
    RUN(test_a_dropped_grad_is_reused_by_the_next_backward);
    RUN(test_a_spare_grad_is_freed_with_its_parameter);
    RUN(test_a_dropped_grad_someone_holds_is_not_reused);
    RUN(test_taking_a_spare_back_respects_the_memory_limit);
    RUN(test_a_freed_root_tensor_is_reused_by_the_next_of_its_size);
    RUN(test_the_root_cache_keeps_its_bounds);
    RUN(test_a_thread_frees_its_root_cache_when_it_exits);
#ifdef UNDER_ASAN
    RUN(test_memory_kept_for_reuse_stays_off_limits);
#endif
    return TEST_REPORT();
}
