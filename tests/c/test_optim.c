/*
 * test_optim.c - ac_sgd_step and ac_adam_step: a few steps against values
 * worked out by hand (or from the optimizers' formulas in double), steps that
 * allocate nothing, the same result for any thread count, and every bad
 * argument refused before anything is touched.
 */
#include "ac.h"
#include "test.h"

#include <string.h>

static AcTensor *vec(const float *data, int64_t n)
{
    return ac_tensor_from_data(data, &n, 1);
}

/* A root leaf holding data. */
static AcTensor *param_of(const float *data, int64_t n)
{
    AcTensor *p = vec(data, n);
    ac_tensor_set_requires_grad(p, 1);
    return p;
}

/* Make param->grad equal g, through backward of sum(param * g). */
static void set_grad(AcTensor *param, const float *g)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *weights = vec(g, param->size);
    ac_tensor_zero_grad(param);
    CHECK(ac_backward(ac_sum(ac_mul(param, weights), NULL, 0, 0)) == AC_OK);
    ac_mem_restore(cp);
    CHECK(param->grad != NULL);
}

static void check_values(const AcTensor *t, const double *expected, double tol)
{
    int64_t i;
    for (i = 0; i < t->size; i++) CHECK_NEAR(t->data[i], expected[i], tol);
}

static AcMemStats stats(void)
{
    AcMemStats s;
    ac_memory_stats(&s);
    return s;
}

/* ---- SGD ----------------------------------------------------------------- */

static void test_sgd_weight_decay_adds_to_the_gradient(void)
{
    const float p0[2] = {1, -2}, g[2] = {0.5f, 1};
    /* d = g + 0.1 p = (0.6, 0.8); p -= 0.1 d */
    const double expected[2] = {0.94, -2.08};
    AcTensor *p = param_of(p0, 2);
    set_grad(p, g);
    CHECK(ac_sgd_step(p, NULL, 1, 0.1f, 0, 0, 0, 0.1f) == AC_OK);
    check_values(p, expected, 1e-6);
    ac_tensor_free(p);
}

static void test_sgd_momentum_starts_undamped_then_damps(void)
{
    const float zero[2] = {0, 0}, g[2] = {1, 2};
    /* step 1: buf = g; p = -0.1 g.  step 2: buf = 0.9 g + 0.5 g = 1.4 g; p -= 0.1 buf */
    const double after1[2] = {-0.1, -0.2}, after2[2] = {-0.24, -0.48}, buf2[2] = {1.4, 2.8};
    AcTensor *p = param_of(zero, 2), *buf = vec(zero, 2);
    set_grad(p, g);
    CHECK(ac_sgd_step(p, buf, 1, 0.1f, 0.9f, 0.5f, 0, 0) == AC_OK);
    check_values(p, after1, 1e-6);
    CHECK(ac_sgd_step(p, buf, 2, 0.1f, 0.9f, 0.5f, 0, 0) == AC_OK);
    check_values(p, after2, 1e-6);
    check_values(buf, buf2, 1e-6);
    ac_tensor_free(p);
    ac_tensor_free(buf);
}

static void test_sgd_nesterov_looks_ahead(void)
{
    const float zero[2] = {0, 0}, g[2] = {1, 2};
    /* step 1: buf = g, d = g + 0.9 buf = 1.9 g.  step 2: buf = 0.9 g + g = 1.9 g,
       d = g + 0.9 * 1.9 g = 2.71 g; p = -(0.19 + 0.271) g */
    const double after1[2] = {-0.19, -0.38}, after2[2] = {-0.461, -0.922};
    AcTensor *p = param_of(zero, 2), *buf = vec(zero, 2);
    set_grad(p, g);
    CHECK(ac_sgd_step(p, buf, 1, 0.1f, 0.9f, 0, 1, 0) == AC_OK);
    check_values(p, after1, 1e-6);
    CHECK(ac_sgd_step(p, buf, 2, 0.1f, 0.9f, 0, 1, 0) == AC_OK);
    check_values(p, after2, 1e-6);
    ac_tensor_free(p);
    ac_tensor_free(buf);
}

/* ---- Adam ---------------------------------------------------------------- */

/* Adam's step in double, for one element: the reference the tests compare with.
   The betas are the float values the C call receives (0.999f is 0.99900001...). */
static double adam_reference(double p, double g, double *m, double *v, int step, double lr,
                             double wd, int decoupled)
{
    const double beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8;
    double m_hat, v_hat;
    if (decoupled) p *= 1.0 - lr * wd;
    else g += wd * p;
    *m = beta1 * *m + (1.0 - beta1) * g;
    *v = beta2 * *v + (1.0 - beta2) * g * g;
    m_hat = *m / (1.0 - pow(beta1, step));
    v_hat = *v / (1.0 - pow(beta2, step));
    return p - lr * m_hat / (sqrt(v_hat) + eps);
}

static void test_adam_first_step_moves_by_lr_against_the_gradient_sign(void)
{
    const float p0[2] = {1, -1}, g[2] = {0.5f, -2}, zero[2] = {0, 0};
    /* bias correction makes m_hat = g and v_hat = g^2 on step 1; 1 - 0.999f is 0.00099998713 */
    const double expected[2] = {0.99, -0.99}, m1[2] = {0.05, -0.2};
    const double v1[2] = {0.25 * (1 - (double)0.999f), 4 * (1 - (double)0.999f)};
    AcTensor *p = param_of(p0, 2), *m = vec(zero, 2), *v = vec(zero, 2);
    set_grad(p, g);
    CHECK(ac_adam_step(p, m, v, 1, 0.01f, 0.9f, 0.999f, 1e-8f, 0, 0) == AC_OK);
    check_values(p, expected, 1e-6);
    check_values(m, m1, 1e-7);
    check_values(v, v1, 1e-8);
    ac_tensor_free(p);
    ac_tensor_free(m);
    ac_tensor_free(v);
}

static void check_adam_steps(double wd, int decoupled)
{
    const float p0[3] = {1, -1, 0.25f}, zero[3] = {0, 0, 0};
    const float grads[3][3] = {{0.5f, -2, 0.1f}, {1, 1, -0.3f}, {-0.2f, 0.7f, 0.05f}};
    double ref_p[3] = {1, -1, 0.25}, ref_m[3] = {0, 0, 0}, ref_v[3] = {0, 0, 0};
    AcTensor *p = param_of(p0, 3), *m = vec(zero, 3), *v = vec(zero, 3);
    int step, i;
    for (step = 1; step <= 3; step++) {
        set_grad(p, grads[step - 1]);
        CHECK(ac_adam_step(p, m, v, step, 0.01f, 0.9f, 0.999f, 1e-8f, (float)wd, decoupled) == AC_OK);
        for (i = 0; i < 3; i++)
            ref_p[i] = adam_reference(ref_p[i], grads[step - 1][i], &ref_m[i], &ref_v[i], step, 0.01,
                                      wd, decoupled);
        check_values(p, ref_p, 2e-6);
        check_values(m, ref_m, 1e-6);
        check_values(v, ref_v, 1e-7);
    }
    ac_tensor_free(p);
    ac_tensor_free(m);
    ac_tensor_free(v);
}

static void test_adam_three_steps_with_bias_correction(void)
{
    check_adam_steps(0, 0);
}

static void test_adam_l2_weight_decay(void)
{
    check_adam_steps(0.1, 0);
}

static void test_adamw_decoupled_weight_decay(void)
{
    const float p0[2] = {1, -1}, g[2] = {0.5f, -2}, zero[2] = {0, 0};
    /* p *= 1 - 0.01 * 0.1, then the first step moves it by lr against sign(g) */
    const double expected[2] = {0.989, -0.989};
    AcTensor *p = param_of(p0, 2), *m = vec(zero, 2), *v = vec(zero, 2);
    set_grad(p, g);
    CHECK(ac_adam_step(p, m, v, 1, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 1) == AC_OK);
    check_values(p, expected, 1e-6);
    ac_tensor_free(p);
    ac_tensor_free(m);
    ac_tensor_free(v);
    check_adam_steps(0.1, 1);
}

/* ---- memory and threads -------------------------------------------------- */

static void test_steps_allocate_nothing(void)
{
    const float p0[2] = {1, 2}, g[2] = {1, 1}, zero[2] = {0, 0};
    AcTensor *p = param_of(p0, 2), *buf = vec(zero, 2), *m = vec(zero, 2), *v = vec(zero, 2);
    AcMemStats before;
    AcCheckpoint cp;
    set_grad(p, g);
    before = stats();
    cp = ac_mem_checkpoint();
    CHECK(ac_sgd_step(p, buf, 1, 0.1f, 0.9f, 0, 0, 0) == AC_OK);
    CHECK(ac_adam_step(p, m, v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0) == AC_OK);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    ac_mem_restore(cp);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
    ac_tensor_free(p);
    ac_tensor_free(buf);
    ac_tensor_free(m);
    ac_tensor_free(v);
}

/* Run three Adam and SGD steps on n elements with the given thread count. */
static void run_big(int threads, int64_t n, AcTensor **out_param, AcTensor **out_state)
{
    AcTensor *p, *m, *v, *buf, *g;
    int step;
    ac_set_num_threads(threads);
    ac_manual_seed(7);
    p = ac_randn(&n, 1);
    g = ac_randn(&n, 1);
    m = ac_tensor_new(&n, 1);
    v = ac_tensor_new(&n, 1);
    buf = ac_tensor_new(&n, 1);
    ac_tensor_set_requires_grad(p, 1);
    set_grad(p, g->data);
    for (step = 1; step <= 3; step++) {
        CHECK(ac_adam_step(p, m, v, step, 0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 1) == AC_OK);
        CHECK(ac_sgd_step(p, buf, step, 0.1f, 0.9f, 0, 1, 1e-4f) == AC_OK);
    }
    ac_tensor_free(g);
    ac_tensor_free(m);
    ac_tensor_free(v);
    *out_param = p;
    *out_state = buf;
}

static void test_results_do_not_depend_on_thread_count(void)
{
    const int64_t n = 100003;
    AcTensor *p1, *b1, *p4, *b4;
    int previous = ac_get_num_threads();
    run_big(1, n, &p1, &b1);
    run_big(4, n, &p4, &b4);
    CHECK(memcmp(p1->data, p4->data, (size_t)n * sizeof(float)) == 0);
    CHECK(memcmp(b1->data, b4->data, (size_t)n * sizeof(float)) == 0);
    ac_set_num_threads(previous);
    ac_tensor_free(p1);
    ac_tensor_free(b1);
    ac_tensor_free(p4);
    ac_tensor_free(b4);
}

/* ---- bad arguments ------------------------------------------------------- */

static void test_no_grad_is_a_no_op(void)
{
    const float p0[2] = {1, 2}, zero[2] = {0, 0};
    const double same[2] = {1, 2};
    AcTensor *p = param_of(p0, 2), *buf = vec(zero, 2), *m = vec(zero, 2), *v = vec(zero, 2);
    CHECK(ac_sgd_step(p, buf, 1, 0.1f, 0.9f, 0, 0, 0) == AC_OK);
    CHECK(ac_adam_step(p, m, v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.1f, 1) == AC_OK);
    check_values(p, same, 0);
    /* arguments are still checked */
    CHECK(ac_sgd_step(p, buf, 0, 0.1f, 0.9f, 0, 0, 0) == AC_ERR_ARG);
    ac_tensor_free(p);
    ac_tensor_free(buf);
    ac_tensor_free(m);
    ac_tensor_free(v);
}

static void expect_error(int rc, int code, const char *fragment)
{
    CHECK(rc == code);
    CHECK(ac_last_error_code() == code);
    CHECK(strstr(ac_last_error(), fragment) != NULL);
    if (!strstr(ac_last_error(), fragment)) fprintf(stderr, "  message: %s\n", ac_last_error());
}

static void test_sgd_refuses_bad_arguments(void)
{
    const float p0[2] = {1, 2}, g[2] = {1, 1}, zero[3] = {0, 0, 0};
    const double same[2] = {1, 2};
    AcTensor *p = param_of(p0, 2), *buf = vec(zero, 2), *wrong = vec(zero, 3);
    AcCheckpoint cp;
    set_grad(p, g);
    expect_error(ac_sgd_step(NULL, buf, 1, 0.1f, 0, 0, 0, 0), AC_ERR_ARG, "sgd_step: param is NULL");
    expect_error(ac_sgd_step(p, buf, 0, 0.1f, 0, 0, 0, 0), AC_ERR_ARG, "step 0");
    expect_error(ac_sgd_step(p, buf, 1, -0.1f, 0, 0, 0, 0), AC_ERR_ARG, "learning rate");
    expect_error(ac_sgd_step(p, buf, 1, NAN, 0, 0, 0, 0), AC_ERR_ARG, "learning rate");
    expect_error(ac_sgd_step(p, buf, 1, 0.1f, -0.5f, 0, 0, 0), AC_ERR_ARG, "momentum");
    expect_error(ac_sgd_step(p, buf, 1, 0.1f, 0, 0, 0, -1), AC_ERR_ARG, "weight_decay");
    expect_error(ac_sgd_step(p, buf, 1, 0.1f, 0, 0, 1, 0), AC_ERR_ARG, "Nesterov");
    expect_error(ac_sgd_step(p, buf, 1, 0.1f, 0.9f, 0.1f, 1, 0), AC_ERR_ARG, "Nesterov");
    expect_error(ac_sgd_step(p, NULL, 1, 0.1f, 0.9f, 0, 0, 0), AC_ERR_ARG, "momentum_buffer is NULL");
    expect_error(ac_sgd_step(p, wrong, 1, 0.1f, 0.9f, 0, 0, 0), AC_ERR_SHAPE, "(3,)");
    expect_error(ac_sgd_step(p, p, 1, 0.1f, 0.9f, 0, 0, 0), AC_ERR_ARG, "shares memory");
    cp = ac_mem_checkpoint();
    expect_error(ac_sgd_step(ac_mul_scalar(p, 2), NULL, 1, 0.1f, 0, 0, 0, 0), AC_ERR_ARG, "leaf");
    ac_mem_restore(cp);
    check_values(p, same, 0);     /* nothing was touched */
    CHECK(ac_sgd_step(p, NULL, 1, 0.1f, 0, 0, 0, 0) == AC_OK);   /* still usable */
    ac_tensor_free(p);
    ac_tensor_free(buf);
    ac_tensor_free(wrong);
}

static void test_adam_refuses_bad_arguments(void)
{
    const float p0[2] = {1, 2}, g[2] = {1, 1}, zero[3] = {0, 0, 0};
    const double same[2] = {1, 2};
    AcTensor *p = param_of(p0, 2), *m = vec(zero, 2), *v = vec(zero, 2), *wrong = vec(zero, 3);
    set_grad(p, g);
    expect_error(ac_adam_step(NULL, m, v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0), AC_ERR_ARG,
                 "adam_step: param is NULL");
    expect_error(ac_adam_step(p, m, v, 0, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 1), AC_ERR_ARG,
                 "adamw_step: step 0");
    expect_error(ac_adam_step(p, m, v, 1, -1, 0.9f, 0.999f, 1e-8f, 0, 0), AC_ERR_ARG, "learning rate");
    expect_error(ac_adam_step(p, m, v, 1, 0.1f, 1.0f, 0.999f, 1e-8f, 0, 0), AC_ERR_ARG, "index 0");
    expect_error(ac_adam_step(p, m, v, 1, 0.1f, -0.1f, 0.999f, 1e-8f, 0, 0), AC_ERR_ARG, "index 0");
    expect_error(ac_adam_step(p, m, v, 1, 0.1f, 0.9f, 1.0f, 1e-8f, 0, 0), AC_ERR_ARG, "index 1");
    expect_error(ac_adam_step(p, m, v, 1, 0.1f, 0.9f, NAN, 1e-8f, 0, 0), AC_ERR_ARG, "index 1");
    expect_error(ac_adam_step(p, m, v, 1, 0.1f, 0.9f, 0.999f, -1e-8f, 0, 0), AC_ERR_ARG, "epsilon");
    expect_error(ac_adam_step(p, m, v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, -0.1f, 0), AC_ERR_ARG,
                 "weight_decay");
    expect_error(ac_adam_step(p, NULL, v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0), AC_ERR_ARG,
                 "exp_avg is NULL");
    expect_error(ac_adam_step(p, m, wrong, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0), AC_ERR_SHAPE,
                 "exp_avg_sq has shape (3,)");
    expect_error(ac_adam_step(p, m, m, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0), AC_ERR_ARG,
                 "share memory");
    expect_error(ac_adam_step(p, p->grad, v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0), AC_ERR_ARG,
                 "shares memory");
    check_values(p, same, 0);
    CHECK(m->data[0] == 0 && v->data[0] == 0);
    CHECK(ac_adam_step(p, m, v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0) == AC_OK);
    CHECK(p->data[0] < 1.0f);
    ac_tensor_free(p);
    ac_tensor_free(m);
    ac_tensor_free(v);
    ac_tensor_free(wrong);
}

int main(void)
{
    AcMemStats start = stats();
    RUN(test_sgd_weight_decay_adds_to_the_gradient);
    RUN(test_sgd_momentum_starts_undamped_then_damps);
    RUN(test_sgd_nesterov_looks_ahead);
    RUN(test_adam_first_step_moves_by_lr_against_the_gradient_sign);
    RUN(test_adam_three_steps_with_bias_correction);
    RUN(test_adam_l2_weight_decay);
    RUN(test_adamw_decoupled_weight_decay);
    RUN(test_steps_allocate_nothing);
    RUN(test_results_do_not_depend_on_thread_count);
    RUN(test_no_grad_is_a_no_op);
    RUN(test_sgd_refuses_bad_arguments);
    RUN(test_adam_refuses_bad_arguments);
    CHECK(stats().live_tensors == start.live_tensors);   /* every root tensor was freed */
    return TEST_REPORT();
}
