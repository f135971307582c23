/*
 * test_optim.c - ac_sgd_step, ac_adam_step, ac_adadelta_step,
 * ac_rmsprop_step, ac_adagrad_step and L-BFGS's flat-vector helpers: a few
 * steps against values worked out by hand (or from the optimizers' formulas in
 * double), steps that allocate nothing, the same result for any thread count,
 * and every bad argument refused before anything is touched.
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

static void expect_error(int rc, int code, const char *fragment)
{
    CHECK(rc == code);
    CHECK(ac_last_error_code() == code);
    CHECK(strstr(ac_last_error(), fragment) != NULL);
    if (!strstr(ac_last_error(), fragment)) fprintf(stderr, "  message: %s\n", ac_last_error());
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

/* ---- Adadelta, RMSprop, Adagrad ----------------------------------------------- */

static const float ADAPTIVE_P0[3] = {1, -1, 0.25f};
static const float ADAPTIVE_GRADS[3][3] = {{0.5f, -2, 0.1f}, {1, 1, -0.3f}, {-0.2f, 0.7f, 0.05f}};

static void test_adadelta_three_steps(void)
{
    const float zero[3] = {0, 0, 0};
    const double lr = 0.5, rho = 0.9f, eps = 1e-6f, wd = 0.1f;
    double ref_p[3] = {1, -1, 0.25}, ref_v[3] = {0, 0, 0}, ref_u[3] = {0, 0, 0};
    AcTensor *p = param_of(ADAPTIVE_P0, 3), *v = vec(zero, 3), *u = vec(zero, 3);
    int step, i;
    for (step = 0; step < 3; step++) {
        set_grad(p, ADAPTIVE_GRADS[step]);
        CHECK(ac_adadelta_step(p, v, u, (float)lr, (float)rho, (float)eps, (float)wd) == AC_OK);
        for (i = 0; i < 3; i++) {
            double g = ADAPTIVE_GRADS[step][i] + wd * ref_p[i], delta;
            ref_v[i] = rho * ref_v[i] + (1 - rho) * g * g;
            delta = sqrt(ref_u[i] + eps) / sqrt(ref_v[i] + eps) * g;
            ref_u[i] = rho * ref_u[i] + (1 - rho) * delta * delta;
            ref_p[i] -= lr * delta;
        }
        check_values(p, ref_p, 2e-6);
        check_values(v, ref_v, 1e-6);
        check_values(u, ref_u, 1e-7);
    }
    ac_tensor_free(p);
    ac_tensor_free(v);
    ac_tensor_free(u);
}

static void check_rmsprop_steps(double momentum, int centered)
{
    const float zero[3] = {0, 0, 0};
    const double lr = 0.01, alpha = 0.9f, eps = 1e-8, wd = 0.05f;
    double ref_p[3] = {1, -1, 0.25}, ref_v[3] = {0}, ref_avg[3] = {0}, ref_buf[3] = {0};
    AcTensor *p = param_of(ADAPTIVE_P0, 3), *v = vec(zero, 3), *buf = vec(zero, 3),
             *grad_avg = vec(zero, 3);
    int step, i;
    for (step = 0; step < 3; step++) {
        set_grad(p, ADAPTIVE_GRADS[step]);
        CHECK(ac_rmsprop_step(p, v, buf, grad_avg, (float)lr, (float)alpha, (float)eps, (float)wd,
                              (float)momentum, centered) == AC_OK);
        for (i = 0; i < 3; i++) {
            double g = ADAPTIVE_GRADS[step][i] + wd * ref_p[i], avg;
            ref_v[i] = alpha * ref_v[i] + (1 - alpha) * g * g;
            ref_avg[i] = alpha * ref_avg[i] + (1 - alpha) * g;
            avg = sqrt(centered ? ref_v[i] - ref_avg[i] * ref_avg[i] : ref_v[i]) + eps;
            ref_buf[i] = momentum * ref_buf[i] + g / avg;
            ref_p[i] -= lr * (momentum > 0 ? ref_buf[i] : g / avg);
        }
        check_values(p, ref_p, 2e-6);
        check_values(v, ref_v, 1e-6);
    }
    if (momentum == 0) CHECK(buf->data[0] == 0);     /* states that are off stay untouched */
    if (!centered) CHECK(grad_avg->data[0] == 0);
    ac_tensor_free(p);
    ac_tensor_free(v);
    ac_tensor_free(buf);
    ac_tensor_free(grad_avg);
}

static void test_rmsprop_plain_momentum_and_centered(void)
{
    check_rmsprop_steps(0, 0);
    check_rmsprop_steps(0.9, 0);
    check_rmsprop_steps(0, 1);
    check_rmsprop_steps(0.5, 1);
}

static void test_adagrad_decays_its_learning_rate(void)
{
    const float init[3] = {0.1f, 0.1f, 0.1f};
    const double lr = 0.1, lr_decay = 0.5, eps = 1e-10, wd = 0.1f;
    double ref_p[3] = {1, -1, 0.25}, ref_sum[3] = {0.1f, 0.1f, 0.1f};
    AcTensor *p = param_of(ADAPTIVE_P0, 3), *sum = vec(init, 3);
    int step, i;
    for (step = 1; step <= 3; step++) {
        set_grad(p, ADAPTIVE_GRADS[step - 1]);
        CHECK(ac_adagrad_step(p, sum, step, (float)lr, (float)lr_decay, (float)wd, (float)eps) == AC_OK);
        for (i = 0; i < 3; i++) {
            double g = ADAPTIVE_GRADS[step - 1][i] + wd * ref_p[i];
            ref_sum[i] += g * g;
            ref_p[i] -= lr / (1 + (step - 1) * lr_decay) * g / (sqrt(ref_sum[i]) + eps);
        }
        check_values(p, ref_p, 2e-6);
        check_values(sum, ref_sum, 1e-6);
    }
    ac_tensor_free(p);
    ac_tensor_free(sum);
}

static void test_adaptive_steps_refuse_bad_arguments(void)
{
    const float p0[2] = {1, 2}, g[2] = {1, 1}, zero[3] = {0, 0, 0};
    const double same[2] = {1, 2};
    AcTensor *p = param_of(p0, 2), *a = vec(zero, 2), *b = vec(zero, 2), *c = vec(zero, 2),
             *wrong = vec(zero, 3);
    set_grad(p, g);
    expect_error(ac_adadelta_step(NULL, a, b, 1, 0.9f, 1e-6f, 0), AC_ERR_ARG, "adadelta_step: param is NULL");
    expect_error(ac_adadelta_step(p, a, b, -1, 0.9f, 1e-6f, 0), AC_ERR_ARG, "learning rate");
    expect_error(ac_adadelta_step(p, a, b, 1, 1.5f, 1e-6f, 0), AC_ERR_ARG, "rho");
    expect_error(ac_adadelta_step(p, a, b, 1, NAN, 1e-6f, 0), AC_ERR_ARG, "rho");
    expect_error(ac_adadelta_step(p, a, b, 1, 0.9f, -1e-6f, 0), AC_ERR_ARG, "epsilon");
    expect_error(ac_adadelta_step(p, a, b, 1, 0.9f, 1e-6f, -1), AC_ERR_ARG, "weight_decay");
    expect_error(ac_adadelta_step(p, NULL, b, 1, 0.9f, 1e-6f, 0), AC_ERR_ARG, "square_avg is NULL");
    expect_error(ac_adadelta_step(p, a, wrong, 1, 0.9f, 1e-6f, 0), AC_ERR_SHAPE, "acc_delta has shape (3,)");
    expect_error(ac_adadelta_step(p, a, a, 1, 0.9f, 1e-6f, 0), AC_ERR_ARG, "share memory");

    expect_error(ac_rmsprop_step(p, a, b, c, 0.01f, -0.1f, 1e-8f, 0, 0, 0), AC_ERR_ARG, "alpha");
    expect_error(ac_rmsprop_step(p, a, b, c, 0.01f, 0.99f, 1e-8f, 0, -0.9f, 0), AC_ERR_ARG, "momentum");
    expect_error(ac_rmsprop_step(p, a, NULL, c, 0.01f, 0.99f, 1e-8f, 0, 0.9f, 0), AC_ERR_ARG,
                 "momentum_buffer is NULL");
    expect_error(ac_rmsprop_step(p, a, b, NULL, 0.01f, 0.99f, 1e-8f, 0, 0, 1), AC_ERR_ARG,
                 "grad_avg is NULL");
    expect_error(ac_rmsprop_step(p, a, a, c, 0.01f, 0.99f, 1e-8f, 0, 0.9f, 0), AC_ERR_ARG, "share memory");
    expect_error(ac_rmsprop_step(p, a, b, b, 0.01f, 0.99f, 1e-8f, 0, 0.9f, 1), AC_ERR_ARG, "shares memory");
    expect_error(ac_rmsprop_step(p, p->grad, b, c, 0.01f, 0.99f, 1e-8f, 0, 0, 0), AC_ERR_ARG,
                 "shares memory with param or its grad");

    expect_error(ac_adagrad_step(p, a, 0, 0.01f, 0, 0, 1e-10f), AC_ERR_ARG, "adagrad_step: step 0");
    expect_error(ac_adagrad_step(p, a, 1, 0.01f, -1, 0, 1e-10f), AC_ERR_ARG, "lr_decay");
    expect_error(ac_adagrad_step(p, a, 1, 0.01f, 0, 0, -1), AC_ERR_ARG, "epsilon");
    expect_error(ac_adagrad_step(p, wrong, 1, 0.01f, 0, 0, 1e-10f), AC_ERR_SHAPE, "sum has shape (3,)");
    check_values(p, same, 0);      /* nothing was touched */
    CHECK(a->data[0] == 0 && b->data[0] == 0 && c->data[0] == 0);
    CHECK(ac_rmsprop_step(p, a, NULL, NULL, 0.01f, 0.99f, 1e-8f, 0, 0, 0) == AC_OK);  /* still usable */
    CHECK(p->data[0] < 1.0f);
    ac_tensor_free(p);
    ac_tensor_free(a);
    ac_tensor_free(b);
    ac_tensor_free(c);
    ac_tensor_free(wrong);
}

/* ---- L-BFGS helpers -------------------------------------------------------------- */

static void test_flat_helpers_move_params_and_grads(void)
{
    const float w0[4] = {1, 2, 3, 4}, b0[2] = {5, 6}, gw[4] = {0.5f, -1, 2, 0};
    const double all[6] = {1, 2, 3, 4, 5, 6}, grads[6] = {0.5, -1, 2, 0, 0, 0};
    const double moved[4] = {1.5, 1, 5, 4}, b_moved[2] = {5, 6};
    int64_t n = 6;
    AcTensor *params[2], *flat = ac_tensor_new(&n, 1);
    params[0] = param_of(w0, 4);
    params[1] = param_of(b0, 2);        /* no grad: zeros in the flat gradient */
    set_grad(params[0], gw);
    CHECK(ac_params_to_flat(params, 2, flat) == AC_OK);
    check_values(flat, all, 0);
    CHECK(ac_grads_to_flat(params, 2, flat) == AC_OK);
    check_values(flat, grads, 0);
    CHECK(ac_params_add_flat(params, 2, 1.0f, flat) == AC_OK);
    check_values(params[0], moved, 0);
    check_values(params[1], b_moved, 0);
    CHECK(ac_params_to_flat(params, 2, flat) == AC_OK);
    CHECK(ac_params_add_flat(params, 2, -2.0f, flat) == AC_OK);   /* each becomes its negative */
    CHECK(params[0]->data[2] == -5 && params[1]->data[1] == -6);
    CHECK(ac_params_from_flat(params, 2, flat) == AC_OK);
    check_values(params[0], moved, 0);
    ac_tensor_free(params[0]);
    ac_tensor_free(params[1]);
    ac_tensor_free(flat);
}

/* DistributedDataParallel's way back: the summed flat gradient, scaled, into each grad. */
static void test_grads_from_flat_scales_into_each_grad(void)
{
    const float w0[4] = {1, 2, 3, 4}, b0[2] = {5, 6}, gw[4] = {0, 0, 0, 0}, gb[2] = {9, 9};
    const float summed[6] = {2, -4, 6, 8, 1, 0};
    const double w_mean[4] = {1, -2, 3, 4}, b_mean[2] = {0.5, 0}, same[4] = {1, 2, 3, 4};
    AcTensor *params[2], *flat = vec(summed, 6);
    params[0] = param_of(w0, 4);
    params[1] = param_of(b0, 2);
    set_grad(params[0], gw);
    set_grad(params[1], gb);
    CHECK(ac_grads_from_flat(params, 2, 0.5f, flat) == AC_OK);
    check_values(params[0]->grad, w_mean, 0);
    check_values(params[1]->grad, b_mean, 0);
    check_values(params[0], same, 0);              /* the params themselves are untouched */
    ac_tensor_free(params[0]);
    ac_tensor_free(params[1]);
    ac_tensor_free(flat);
}

static void test_grads_from_flat_refuses_bad_arguments(void)
{
    const float w0[3] = {1, 2, 3}, g[3] = {1, 1, 1};
    const double kept[3] = {1, 1, 1};
    int64_t n3 = 3, n4 = 4;
    AcTensor *w = param_of(w0, 3), *bare = param_of(w0, 3), *flat = ac_tensor_new(&n3, 1);
    AcTensor *big = ac_tensor_new(&n4, 1), *none[1] = {NULL}, *both[2];
    set_grad(w, g);
    both[0] = w;
    both[1] = bare;
    expect_error(ac_grads_from_flat(NULL, 1, 1.0f, flat), AC_ERR_ARG, "grads_from_flat: params is NULL");
    expect_error(ac_grads_from_flat(&w, 0, 1.0f, flat), AC_ERR_ARG, "n_params 0");
    expect_error(ac_grads_from_flat(none, 1, 1.0f, flat), AC_ERR_ARG, "params[0] is NULL");
    expect_error(ac_grads_from_flat(&w, 1, 1.0f, NULL), AC_ERR_ARG, "flat is NULL");
    expect_error(ac_grads_from_flat(&w, 1, 1.0f, big), AC_ERR_SHAPE, "has 4 elements but the params have 3");
    expect_error(ac_grads_from_flat(&bare, 1, 1.0f, flat), AC_ERR_ARG, "params[0] (3,) has no grad");
    ac_tensor_free(big);
    big = ac_tensor_new((int64_t[]){6}, 1);
    expect_error(ac_grads_from_flat(both, 2, 1.0f, big), AC_ERR_ARG, "params[1] (3,) has no grad");
    check_values(w->grad, kept, 0);                /* nothing was written */
    CHECK(ac_grads_from_flat(&w, 1, 2.0f, w) == AC_OK);   /* still usable: grad = 2 * w */
    CHECK(w->grad->data[2] == 6);
    ac_tensor_free(w);
    ac_tensor_free(bare);
    ac_tensor_free(flat);
    ac_tensor_free(big);
}

/* Ranks that share memory: each grad = scale * the sum of every rank's bucket. */
static void test_grads_mean_of_flats_averages_every_ranks_bucket(void)
{
    const float w0[4] = {1, 2, 3, 4}, b0[2] = {5, 6}, gw[4] = {0, 0, 0, 0}, gb[2] = {9, 9};
    const float rank0[6] = {2, -4, 6, 8, 1, 0}, rank1[6] = {1, 1, 1, 1, 1, 1}, rank2[6] = {0, 0, 2, 0, 1, 3};
    const double w_mean[4] = {1, -1, 3, 3}, b_mean[2] = {1, 4.0 / 3.0}, same[4] = {1, 2, 3, 4};
    AcTensor *params[2], *flats[3] = {vec(rank0, 6), vec(rank1, 6), vec(rank2, 6)};
    params[0] = param_of(w0, 4);
    params[1] = param_of(b0, 2);
    set_grad(params[0], gw);
    set_grad(params[1], gb);
    CHECK(ac_grads_mean_of_flats(params, 2, 1.0f / 3.0f, flats, 3) == AC_OK);
    check_values(params[0]->grad, w_mean, 1e-6);
    check_values(params[1]->grad, b_mean, 1e-6);
    check_values(params[0], same, 0);
    CHECK(ac_grads_mean_of_flats(params, 2, 0.5f, flats, 1) == AC_OK);   /* one rank: its own, scaled */
    CHECK(params[0]->grad->data[1] == -2 && params[1]->grad->data[0] == 0.5f);
    ac_tensor_free(params[0]);
    ac_tensor_free(params[1]);
    ac_tensor_free(flats[0]);
    ac_tensor_free(flats[1]);
    ac_tensor_free(flats[2]);
}

/* Params longer than the chunks the sum runs in, at offsets that are not multiples of them. */
static void test_grads_mean_of_flats_over_long_params(void)
{
    int64_t sizes[2] = {3, 5000}, total = 5003, j;
    AcTensor *params[2], *flats[2] = {ac_tensor_new(&total, 1), ac_tensor_new(&total, 1)};
    static const float zeros[5000];
    int i, wrong = 0;
    for (j = 0; j < total; j++) {
        flats[0]->data[j] = (float)j;
        flats[1]->data[j] = (float)(2 * j + 1);
    }
    for (i = 0; i < 2; i++) {
        params[i] = param_of(zeros, sizes[i]);
        set_grad(params[i], zeros);
    }
    CHECK(ac_grads_mean_of_flats(params, 2, 0.5f, flats, 2) == AC_OK);
    for (j = 0; j < total; j++) {
        const AcTensor *g = j < 3 ? params[0]->grad : params[1]->grad;
        wrong += g->data[j < 3 ? j : j - 3] != (float)(3 * j + 1) * 0.5f;
    }
    CHECK(wrong == 0);
    for (i = 0; i < 2; i++) ac_tensor_free(params[i]);
    ac_tensor_free(flats[0]);
    ac_tensor_free(flats[1]);
}

static void test_grads_mean_of_flats_refuses_bad_arguments(void)
{
    const float w0[3] = {1, 2, 3}, g[3] = {1, 1, 1};
    const double kept[3] = {1, 1, 1};
    int64_t n3 = 3, n4 = 4;
    AcTensor *w = param_of(w0, 3), *bare = param_of(w0, 3), *flat = ac_tensor_new(&n3, 1);
    AcTensor *big = ac_tensor_new(&n4, 1), *flats[2] = {flat, big}, *nulls[2] = {flat, NULL};
    set_grad(w, g);
    expect_error(ac_grads_mean_of_flats(&w, 1, 1.0f, NULL, 1), AC_ERR_ARG, "grads_mean_of_flats: flats is NULL");
    expect_error(ac_grads_mean_of_flats(&w, 1, 1.0f, flats, 0), AC_ERR_ARG, "n_flats 0 is not >= 1");
    expect_error(ac_grads_mean_of_flats(NULL, 1, 1.0f, flats, 1), AC_ERR_ARG, "params is NULL");
    expect_error(ac_grads_mean_of_flats(&w, 1, 1.0f, nulls, 2), AC_ERR_ARG, "flat is NULL");
    expect_error(ac_grads_mean_of_flats(&w, 1, 1.0f, flats, 2), AC_ERR_SHAPE,
                 "has 4 elements but the params have 3");
    expect_error(ac_grads_mean_of_flats(&bare, 1, 1.0f, flats, 1), AC_ERR_ARG, "params[0] (3,) has no grad");
    check_values(w->grad, kept, 0);                /* nothing was written */
    ac_tensor_free(w);
    ac_tensor_free(bare);
    ac_tensor_free(flat);
    ac_tensor_free(big);
}

static void test_lbfgs_direction_two_loop(void)
{
    /* With no history the direction is -h_diag grad. With one pair (y, s), the two
       loops below, in double: q = -g; al = ro s.q; q -= al y; q *= h; be = ro y.q;
       d = q + (al - be) s. */
    const float g[2] = {1, -2}, y[2] = {0.5f, 1}, s[2] = {1, 0.5f};
    const double h = 0.5, ro = 1.0 / (0.5 + 0.5);
    double q[2] = {-1, 2}, al, be, expected[2];
    int64_t n = 2;
    AcTensor *grad = vec(g, 2), *dirs = vec(y, 2), *stps = vec(s, 2), *d = ac_tensor_new(&n, 1);
    float ro_f = (float)ro, al_scratch[1];
    const double minus_half_g[2] = {-0.5, 1};
    CHECK(ac_lbfgs_direction(grad, NULL, NULL, NULL, 0, 0.5f, NULL, d) == AC_OK);
    check_values(d, minus_half_g, 0);
    al = (s[0] * q[0] + s[1] * q[1]) * ro;
    q[0] -= al * y[0];
    q[1] -= al * y[1];
    q[0] *= h;
    q[1] *= h;
    be = (y[0] * q[0] + y[1] * q[1]) * ro;
    expected[0] = q[0] + (al - be) * s[0];
    expected[1] = q[1] + (al - be) * s[1];
    CHECK(ac_lbfgs_direction(grad, &dirs, &stps, &ro_f, 1, (float)h, al_scratch, d) == AC_OK);
    check_values(d, expected, 1e-6);
    CHECK_NEAR(al_scratch[0], al, 1e-6);
    ac_tensor_free(grad);
    ac_tensor_free(dirs);
    ac_tensor_free(stps);
    ac_tensor_free(d);
}

static void test_lbfgs_helpers_refuse_bad_arguments(void)
{
    const float w0[3] = {1, 2, 3}, g[3] = {1, 1, 1};
    const double same[3] = {1, 2, 3};
    int64_t n3 = 3, n4 = 4;
    AcTensor *w = param_of(w0, 3), *flat = ac_tensor_new(&n3, 1), *big = ac_tensor_new(&n4, 1);
    AcTensor *grad = vec(g, 3), *d = ac_tensor_new(&n3, 1), *none[1] = {NULL};
    float ro = 1, al[1];
    AcCheckpoint cp;
    set_grad(w, g);
    expect_error(ac_params_to_flat(NULL, 1, flat), AC_ERR_ARG, "params_to_flat: params is NULL");
    expect_error(ac_params_to_flat(&w, 0, flat), AC_ERR_ARG, "n_params 0");
    expect_error(ac_grads_to_flat(&w, 1, NULL), AC_ERR_ARG, "flat is NULL");
    expect_error(ac_grads_to_flat(none, 1, flat), AC_ERR_ARG, "params[0] is NULL");
    expect_error(ac_params_from_flat(&w, 1, big), AC_ERR_SHAPE, "has 4 elements but the params have 3");
    expect_error(ac_params_add_flat(&w, 1, 1.0f, big), AC_ERR_SHAPE, "params_add_flat");
    cp = ac_mem_checkpoint();
    {
        AcTensor *not_leaf = ac_mul_scalar(w, 2);
        expect_error(ac_params_add_flat(&not_leaf, 1, 1.0f, flat), AC_ERR_ARG, "not a leaf");
    }
    ac_mem_restore(cp);
    expect_error(ac_lbfgs_direction(NULL, NULL, NULL, NULL, 0, 1, NULL, d), AC_ERR_ARG, "grad is NULL");
    expect_error(ac_lbfgs_direction(grad, NULL, NULL, NULL, 0, 1, NULL, big), AC_ERR_SHAPE,
                 "direction has 4 elements");
    expect_error(ac_lbfgs_direction(grad, NULL, NULL, NULL, 0, 1, NULL, grad), AC_ERR_ARG,
                 "shares memory with grad");
    expect_error(ac_lbfgs_direction(grad, NULL, NULL, NULL, -1, 1, NULL, d), AC_ERR_ARG, "negative");
    expect_error(ac_lbfgs_direction(grad, &flat, &flat, &ro, 1, 1, NULL, d), AC_ERR_ARG, "must not be NULL");
    expect_error(ac_lbfgs_direction(grad, &flat, &big, &ro, 1, 1, al, d), AC_ERR_SHAPE,
                 "old_stps[0] has 4 elements");
    expect_error(ac_lbfgs_direction(grad, &flat, none, &ro, 1, 1, al, d), AC_ERR_ARG, "old_stps[0] is NULL");
    expect_error(ac_lbfgs_direction(grad, &d, &flat, &ro, 1, 1, al, d), AC_ERR_ARG,
                 "direction shares memory with old_dirs[0]");
    check_values(w, same, 0);
    CHECK(ac_params_add_flat(&w, 1, 1.0f, grad) == AC_OK);      /* still usable */
    CHECK(w->data[0] == 2);
    ac_tensor_free(w);
    ac_tensor_free(flat);
    ac_tensor_free(big);
    ac_tensor_free(grad);
    ac_tensor_free(d);
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
    CHECK(ac_adadelta_step(p, m, v, 1, 0.9f, 1e-6f, 0.1f) == AC_OK);
    CHECK(ac_rmsprop_step(p, m, v, buf, 0.01f, 0.99f, 1e-8f, 0.1f, 0.9f, 1) == AC_OK);
    CHECK(ac_adagrad_step(p, m, 2, 0.01f, 0.1f, 0.1f, 1e-10f) == AC_OK);
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

/* ---- a warm training loop makes no malloc -------------------------------- */

/* y = relu(x @ w1^T + b1) @ w2^T + b2, with each parameter's optimizer state. */
typedef struct {
    AcTensor *param[4];       /* w1 (16, 8), b1 (16), w2 (4, 16), b2 (4) */
    AcTensor *state[4][2];    /* SGD's momentum in [i][0]; Adam's moments in [i][0] and [i][1] */
} Mlp;

static void mlp_init(Mlp *net)
{
    static const int64_t shapes[4][2] = {{16, 8}, {16, 1}, {4, 16}, {4, 1}};
    int i, j;
    for (i = 0; i < 4; i++) {
        int ndim = shapes[i][1] == 1 ? 1 : 2;
        net->param[i] = ac_randn(shapes[i], ndim);
        ac_tensor_set_requires_grad(net->param[i], 1);
        for (j = 0; j < 2; j++) net->state[i][j] = ac_tensor_new(shapes[i], ndim);
    }
}

static void mlp_free(Mlp *net)
{
    int i, j;
    for (i = 0; i < 4; i++) {
        ac_tensor_free(net->param[i]);
        for (j = 0; j < 2; j++) ac_tensor_free(net->state[i][j]);
    }
}

/* One step of the loop a PyTorch user writes, inside a scope: forward, drop
   (or zero) the grads, backward, update. Returns the loss. */
static double train_step(Mlp *net, const AcTensor *x, const AcTensor *y, int adam, int set_to_none,
                         int64_t step)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *h = ac_relu(ac_linear(x, net->param[0], net->param[1]));
    AcTensor *loss = ac_mse_loss(ac_linear(h, net->param[2], net->param[3]), y, AC_REDUCTION_MEAN);
    double value = loss ? loss->data[0] : NAN;
    int i;
    for (i = 0; i < 4; i++) {
        if (set_to_none) CHECK(ac_tensor_zero_grad(net->param[i]) == AC_OK);
        else if (net->param[i]->grad) CHECK(ac_tensor_fill_(net->param[i]->grad, 0.0f) == AC_OK);
    }
    CHECK(ac_backward(loss) == AC_OK);
    for (i = 0; i < 4; i++) {
        if (adam)
            CHECK(ac_adam_step(net->param[i], net->state[i][0], net->state[i][1], step, 0.01f, 0.9f,
                               0.999f, 1e-8f, 0, 0) == AC_OK);
        else
            CHECK(ac_sgd_step(net->param[i], net->state[i][0], step, 0.02f, 0.9f, 0, 0, 0) == AC_OK);
    }
    ac_mem_restore(cp);
    return value;
}

static void test_a_warm_training_loop_makes_no_malloc(void)
{
    int64_t x_shape[2] = {32, 8}, y_shape[2] = {32, 4}, step;
    int adam, set_to_none;
    for (adam = 0; adam < 2; adam++) {
        for (set_to_none = 0; set_to_none < 2; set_to_none++) {
            AcTensor *x, *y;
            AcMemStats start;
            Mlp net;
            double first_loss, last_loss = 0;
            int flat = 1;
            ac_manual_seed(3);
            mlp_init(&net);
            x = ac_randn(x_shape, 2);
            y = ac_randn(y_shape, 2);
            first_loss = train_step(&net, x, y, adam, set_to_none, 1);
            for (step = 2; step <= 5; step++) train_step(&net, x, y, adam, set_to_none, step);
            start = stats();
            for (step = 6; step < 206; step++) {
                last_loss = train_step(&net, x, y, adam, set_to_none, step);
                if (stats().bytes_in_use != start.bytes_in_use) flat = 0;
            }
            CHECK(flat);
            CHECK(stats().heap_allocations == start.heap_allocations);
            CHECK(stats().live_tensors == start.live_tensors);
            CHECK(last_loss < 0.8 * first_loss);   /* and it learned */
            mlp_free(&net);
            ac_tensor_free(x);
            ac_tensor_free(y);
        }
    }
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
    RUN(test_adadelta_three_steps);
    RUN(test_rmsprop_plain_momentum_and_centered);
    RUN(test_adagrad_decays_its_learning_rate);
    RUN(test_adaptive_steps_refuse_bad_arguments);
    RUN(test_flat_helpers_move_params_and_grads);
    RUN(test_grads_from_flat_scales_into_each_grad);
    RUN(test_grads_from_flat_refuses_bad_arguments);
    RUN(test_grads_mean_of_flats_averages_every_ranks_bucket);
    RUN(test_grads_mean_of_flats_refuses_bad_arguments);
    RUN(test_grads_mean_of_flats_over_long_params);
    RUN(test_lbfgs_direction_two_loop);
    RUN(test_lbfgs_helpers_refuse_bad_arguments);
    RUN(test_steps_allocate_nothing);
    RUN(test_results_do_not_depend_on_thread_count);
    RUN(test_a_warm_training_loop_makes_no_malloc);
    RUN(test_no_grad_is_a_no_op);
    RUN(test_sgd_refuses_bad_arguments);
    RUN(test_adam_refuses_bad_arguments);
    CHECK(stats().live_tensors == start.live_tensors);   /* every root tensor was freed */
    return TEST_REPORT();
}
