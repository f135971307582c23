/*
 * test_rnn.c - ac_lstm, ac_gru and ac_embedding: forward against double-precision
 * loops of PyTorch's equations (time-major, batch first, reversed, with and
 * without initial states and biases), h_n and c_n, gradients through
 * ac_gradient_check, backward through 1,000 steps with its memory returned,
 * bit-identical results for 1 and 2 threads, no leaks at root, and every bad
 * input failing with a clear message and the library still usable.
 */
#include "test.h"

#include <ac.h>
#include <string.h>

static double sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

/* ---- double-precision references ---------------------------------------- */

typedef struct {
    int64_t T, B, I, H;
    int batch_first, reverse;
} Shape;

static int64_t x_index(const Shape *s, int64_t t, int64_t b)
{
    return s->batch_first ? (b * s->T + t) * s->I : (t * s->B + b) * s->I;
}

static int64_t out_index(const Shape *s, int64_t t, int64_t b)
{
    return s->batch_first ? (b * s->T + t) * s->H : (t * s->B + b) * s->H;
}

/* Pre-activation of gate row r for sequence b at step t: W_ih x + W_hh h (+ b_ih + b_hh). */
static double preact(const Shape *s, const AcTensor *x, const double *h, const AcTensor *w_ih,
                     const AcTensor *w_hh, const AcTensor *b_ih, int64_t t, int64_t b, int64_t r,
                     double *hidden_part)
{
    double xs = b_ih ? b_ih->data[r] : 0.0, hs = 0.0;
    int64_t i;
    for (i = 0; i < s->I; i++) xs += (double)w_ih->data[r * s->I + i] * x->data[x_index(s, t, b) + i];
    for (i = 0; i < s->H; i++) hs += (double)w_hh->data[r * s->H + i] * h[b * s->H + i];
    *hidden_part = hs;
    return xs;
}

/* The LSTM over all steps: out (as laid out by s), h and c end as h_n, c_n. */
static void lstm_reference(const Shape *s, const AcTensor *x, const AcTensor *w_ih,
                           const AcTensor *w_hh, const AcTensor *b_ih, const AcTensor *b_hh,
                           double *h, double *c, double *out)
{
    const int64_t B = s->B, H = s->H;
    double gates[4 * 64 * 8];
    int64_t k, b, j, q;
    for (k = 0; k < s->T; k++) {
        const int64_t t = s->reverse ? s->T - 1 - k : k;
        for (b = 0; b < B; b++)
            for (q = 0; q < 4 * H; q++) {
                double hp, xp = preact(s, x, h, w_ih, w_hh, b_ih, t, b, q, &hp);
                gates[b * 4 * H + q] = xp + hp + (b_hh ? b_hh->data[q] : 0.0);
            }
        for (b = 0; b < B; b++)
            for (j = 0; j < H; j++) {
                const double *g = gates + b * 4 * H;
                double cv = sigmoid(g[H + j]) * c[b * H + j] + sigmoid(g[j]) * tanh(g[2 * H + j]);
                c[b * H + j] = cv;
                h[b * H + j] = sigmoid(g[3 * H + j]) * tanh(cv);
                out[out_index(s, t, b) + j] = h[b * H + j];
            }
    }
}

static void gru_reference(const Shape *s, const AcTensor *x, const AcTensor *w_ih,
                          const AcTensor *w_hh, const AcTensor *b_ih, const AcTensor *b_hh,
                          double *h, double *out)
{
    const int64_t B = s->B, H = s->H;
    double xg[3 * 64 * 8], hg[3 * 64 * 8];
    int64_t k, b, j, q;
    for (k = 0; k < s->T; k++) {
        const int64_t t = s->reverse ? s->T - 1 - k : k;
        for (b = 0; b < B; b++)
            for (q = 0; q < 3 * H; q++) {
                double hp;
                xg[b * 3 * H + q] = preact(s, x, h, w_ih, w_hh, b_ih, t, b, q, &hp);
                hg[b * 3 * H + q] = hp + (b_hh ? b_hh->data[q] : 0.0);
            }
        for (b = 0; b < B; b++)
            for (j = 0; j < H; j++) {
                const double *xv = xg + b * 3 * H, *hv = hg + b * 3 * H;
                double r = sigmoid(xv[j] + hv[j]), z = sigmoid(xv[H + j] + hv[H + j]);
                double n = tanh(xv[2 * H + j] + r * hv[2 * H + j]);
                h[b * H + j] = (1 - z) * n + z * h[b * H + j];
                out[out_index(s, t, b) + j] = h[b * H + j];
            }
    }
}

/* ---- forward --------------------------------------------------------------- */

static void check_layer(int lstm, int batch_first, int reverse, int with_state, int with_bias)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    Shape s = {5, 3, 4, 6, 0, 0};
    const int64_t G = lstm ? 4 : 3;
    const int64_t xs[3] = {batch_first ? 3 : 5, batch_first ? 5 : 3, 4};
    const int64_t wi[2] = {G * 6, 4}, wh[2] = {G * 6, 6}, bs[1] = {G * 6}, ss[2] = {3, 6};
    AcTensor *x = ac_randn(xs, 3), *w_ih = leaf_randn(wi, 2, 0.5f), *w_hh = leaf_randn(wh, 2, 0.5f);
    AcTensor *b_ih = with_bias ? leaf_randn(bs, 1, 0.5f) : NULL;
    AcTensor *b_hh = with_bias ? leaf_randn(bs, 1, 0.5f) : NULL;
    AcTensor *h0 = with_state ? ac_randn(ss, 2) : NULL, *c0 = with_state ? ac_randn(ss, 2) : NULL;
    AcTensor *out, *h_n, *c_n = NULL;
    double h[18] = {0}, c[18] = {0}, ref[90];
    int64_t i;
    s.batch_first = batch_first;
    s.reverse = reverse;
    for (i = 0; with_state && i < 18; i++) {
        h[i] = h0->data[i];
        c[i] = c0->data[i];
    }
    if (lstm) {
        out = ac_lstm(x, h0, c0, w_ih, w_hh, b_ih, b_hh, batch_first, reverse, &h_n, &c_n);
        lstm_reference(&s, x, w_ih, w_hh, b_ih, b_hh, h, c, ref);
    } else {
        out = ac_gru(x, h0, w_ih, w_hh, b_ih, b_hh, batch_first, reverse, &h_n);
        gru_reference(&s, x, w_ih, w_hh, b_ih, b_hh, h, ref);
    }
    CHECK(out && h_n && (!lstm || c_n));
    if (!out || !h_n || (lstm && !c_n)) {
        ac_mem_restore(cp);
        return;
    }
    CHECK(out->ndim == 3 && out->shape[0] == xs[0] && out->shape[1] == xs[1] && out->shape[2] == 6);
    CHECK(h_n->ndim == 2 && h_n->shape[0] == 3 && h_n->shape[1] == 6);
    for (i = 0; i < 90; i++) CHECK_NEAR(out->data[i], ref[i], 2e-6);
    for (i = 0; i < 18; i++) CHECK_NEAR(h_n->data[i], h[i], 2e-6);
    for (i = 0; lstm && i < 18; i++) CHECK_NEAR(c_n->data[i], c[i], 2e-6);
    ac_mem_restore(cp);
}

static void test_lstm_forward(void)
{
    check_layer(1, 0, 0, 0, 1);
    check_layer(1, 1, 0, 1, 1);
    check_layer(1, 0, 1, 1, 0);
    check_layer(1, 1, 1, 0, 1);
}

static void test_gru_forward(void)
{
    check_layer(0, 0, 0, 0, 1);
    check_layer(0, 1, 0, 1, 1);
    check_layer(0, 0, 1, 1, 0);
    check_layer(0, 1, 1, 0, 1);
}

/* ---- gradients --------------------------------------------------------------- */

/* inputs: x, h0, c0, w_ih, w_hh, b_ih, b_hh; user points to {lstm, batch_first, reverse, which}
   where which picks the output checked: 0 output, 1 h_n, 2 c_n. */
static AcTensor *fn_layer(AcTensor *const *in, int n, void *user)
{
    const int *opt = user;
    AcTensor *h_n = NULL, *c_n = NULL, *out;
    (void)n;
    if (opt[0])
        out = ac_lstm(in[0], in[1], in[2], in[3], in[4], in[5], in[6], opt[1], opt[2], &h_n, &c_n);
    else
        out = ac_gru(in[0], in[1], in[3], in[4], in[5], in[6], opt[1], opt[2], &h_n);
    return opt[3] == 0 ? out : opt[3] == 1 ? h_n : c_n;
}

static void test_gradient_check(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[3] = {3, 3, 3}, ss[2] = {3, 3};   /* batch 3 either way round */
    AcTensor *in[7];
    int lstm, which, opt[4];
    float err;
    ac_manual_seed(7);
    for (lstm = 0; lstm < 2; lstm++) {
        const int64_t G = lstm ? 4 : 3, wi[2] = {G * 3, 3}, wh[2] = {G * 3, 3}, bs[1] = {G * 3};
        in[0] = leaf_randn(xs, 3, 1.0f);
        in[1] = leaf_randn(ss, 2, 1.0f);
        in[2] = leaf_randn(ss, 2, 1.0f);
        in[3] = leaf_randn(wi, 2, 0.5f);
        in[4] = leaf_randn(wh, 2, 0.5f);
        in[5] = leaf_randn(bs, 1, 0.5f);
        in[6] = leaf_randn(bs, 1, 0.5f);
        if (!lstm) ac_tensor_set_requires_grad(in[2], 0);   /* the GRU has no c0 */
        for (which = 0; which < (lstm ? 3 : 2); which++) {
            opt[0] = lstm;
            opt[1] = which == 1;   /* batch first for h_n */
            opt[2] = which == 2;   /* reversed for c_n */
            opt[3] = which;
            CHECK(ac_gradient_check(fn_layer, in, 7, opt, 1e-2f, 2e-2f, 2e-2f, &err) == AC_OK);
            if (ac_last_error_code() != AC_OK) fprintf(stderr, "  %s\n", ac_last_error());
            ac_clear_error();
        }
    }
    ac_mem_restore(cp);
}

/* ---- long sequences, memory, threads ------------------------------------------ */

static void test_backward_through_1000_steps(void)
{
    const int64_t xs[3] = {1000, 2, 3}, wi[2] = {16, 3}, wh[2] = {16, 4}, bs[1] = {16};
    AcTensor *x, *w_ih, *w_hh, *b_ih;
    AcMemStats before, after;
    AcCheckpoint cp;
    int64_t i;
    ac_manual_seed(8);
    w_ih = leaf_randn(wi, 2, 0.3f);
    w_hh = leaf_randn(wh, 2, 0.3f);
    b_ih = leaf_randn(bs, 1, 0.3f);
    for (i = 4; i < 8; i++) b_ih->data[i] = 9.0f;   /* forget gate open: gradients travel back */
    ac_memory_stats(&before);
    cp = ac_mem_checkpoint();
    x = leaf_randn(xs, 3, 1.0f);
    {
        AcTensor *c_n, *out = ac_lstm(x, NULL, NULL, w_ih, w_hh, b_ih, NULL, 0, 0, NULL, &c_n);
        CHECK(out && c_n && ac_backward(ac_sum(c_n, NULL, 0, 0)) == AC_OK);
        CHECK(x->grad && w_hh->grad);
        if (x->grad) {
            double first = 0.0;
            for (i = 0; i < 6; i++) first += fabs(x->grad->data[i]);
            CHECK(first > 1e-3 && isfinite(first));   /* the first step still gets a gradient */
        }
    }
    ac_mem_restore(cp);
    ac_tensor_zero_grad(w_ih);
    ac_tensor_zero_grad(w_hh);
    ac_tensor_zero_grad(b_ih);
    ac_memory_stats(&after);
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.live_tensors == before.live_tensors);
    CHECK(after.live_nodes == before.live_nodes);
    ac_tensor_free(w_ih);
    ac_tensor_free(w_hh);
    ac_tensor_free(b_ih);
}

static void test_threads_bit_identical(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[3] = {6, 64, 16}, wi[2] = {512, 16}, wh[2] = {512, 128}, bs[1] = {512};
    AcTensor *x, *w_ih, *w_hh, *b, *out[2], *dw[2], *dx[2];
    int previous = ac_get_num_threads(), t;
    ac_manual_seed(9);
    x = leaf_randn(xs, 3, 1.0f);
    w_ih = leaf_randn(wi, 2, 0.1f);
    w_hh = leaf_randn(wh, 2, 0.1f);
    b = leaf_randn(bs, 1, 0.1f);
    for (t = 0; t < 2; t++) {
        AcTensor *h_n;
        ac_set_num_threads(t + 1);
        ac_tensor_zero_grad(x);
        ac_tensor_zero_grad(w_hh);
        out[t] = ac_lstm(x, NULL, NULL, w_ih, w_hh, b, b, 0, 0, &h_n, NULL);
        CHECK(out[t] && ac_backward(ac_sum(ac_mul(out[t], out[t]), NULL, 0, 0)) == AC_OK);
        dw[t] = w_hh->grad;
        dx[t] = x->grad;
        CHECK(dw[t] && dx[t]);
    }
    ac_set_num_threads(previous);
    if (out[0] && out[1] && dw[0] && dw[1] && dx[0] && dx[1]) {
        CHECK(memcmp(out[0]->data, out[1]->data, (size_t)out[0]->size * sizeof(float)) == 0);
        CHECK(memcmp(dw[0]->data, dw[1]->data, (size_t)dw[0]->size * sizeof(float)) == 0);
        CHECK(memcmp(dx[0]->data, dx[1]->data, (size_t)dx[0]->size * sizeof(float)) == 0);
    }
    ac_mem_restore(cp);
}

static void test_root_use_leaks_nothing(void)
{
    const int64_t xs[3] = {5, 2, 3}, wi[2] = {16, 3}, wh[2] = {16, 4}, bs[1] = {16}, ss[2] = {2, 4};
    const int64_t gi[2] = {12, 3}, gh[2] = {12, 4}, gb[1] = {12};
    const int64_t ids_shape[2] = {2, 3}, table[2] = {10, 3};
    const float id_values[6] = {1, 0, 9, 9, 2, 4};
    AcMemStats before, after;
    int step;
    ac_memory_stats(&before);
    for (step = 0; step < 3; step++) {
        AcTensor *x = ac_randn(xs, 3), *w_ih = leaf_randn(wi, 2, 0.5f), *w_hh = leaf_randn(wh, 2, 0.5f);
        AcTensor *b = leaf_randn(bs, 1, 0.5f), *h0 = leaf_randn(ss, 2, 1.0f);
        AcTensor *emb_w = leaf_randn(table, 2, 1.0f), *ids = ac_tensor_from_data(id_values, ids_shape, 2);
        AcTensor *emb = ac_embedding(ids, emb_w, -1), *h_n, *c_n, *out, *sh, *sc, *total;
        out = ac_lstm(emb, h0, NULL, w_ih, w_hh, b, NULL, 1, 0, &h_n, &c_n);
        CHECK(out && h_n && c_n);
        sh = ac_sum(h_n, NULL, 0, 0);
        sc = ac_sum(c_n, NULL, 0, 0);
        total = ac_add(sh, sc);
        CHECK(total && ac_backward(total) == AC_OK && emb_w->grad && h0->grad && w_hh->grad);
        ac_tensor_free(total);
        ac_tensor_free(sh);
        ac_tensor_free(sc);
        ac_tensor_free(out);
        ac_tensor_free(h_n);
        ac_tensor_free(c_n);
        {
            AcTensor *g_ih = leaf_randn(gi, 2, 0.5f), *g_hh = leaf_randn(gh, 2, 0.5f);
            AcTensor *g_b = leaf_randn(gb, 1, 0.5f);
            out = ac_gru(x, h0, g_ih, g_hh, NULL, g_b, 0, 1, &h_n);
            sh = ac_sum(h_n, NULL, 0, 0);
            CHECK(out && h_n && sh && ac_backward(sh) == AC_OK && g_hh->grad && g_b->grad);
            ac_tensor_free(sh);
            ac_tensor_free(out);
            ac_tensor_free(h_n);
            ac_tensor_free(g_ih);
            ac_tensor_free(g_hh);
            ac_tensor_free(g_b);
        }
        ac_tensor_free(emb);
        ac_tensor_free(ids);
        ac_tensor_free(emb_w);
        ac_tensor_free(x);
        ac_tensor_free(w_ih);
        ac_tensor_free(w_hh);
        ac_tensor_free(b);
        ac_tensor_free(h0);
    }
    ac_memory_stats(&after);
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.live_tensors == before.live_tensors);
    CHECK(after.live_nodes == before.live_nodes);
}

/* ---- embedding ------------------------------------------------------------------ */

static void test_embedding(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const float ids_v[4] = {2, 0, 2, 3}, w_v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const float g_v[8] = {1, 1, 2, 2, 3, 3, 4, 4};
    const int64_t ids_s[2] = {2, 2}, w_s[2] = {4, 2}, g_s[3] = {2, 2, 2};
    AcTensor *ids = ac_tensor_from_data(ids_v, ids_s, 2), *w = ac_tensor_from_data(w_v, w_s, 2);
    AcTensor *out;
    const float expected_grad[8] = {2, 2, 0, 0, 4, 4, 0, 0};   /* row 3 is padding */
    int i;
    ac_tensor_set_requires_grad(w, 1);
    out = ac_embedding(ids, w, 3);
    CHECK(out && out->ndim == 3 && out->shape[2] == 2);
    for (i = 0; out && i < 4; i++) {
        CHECK(out->data[2 * i] == w_v[2 * (int)ids_v[i]]);
        CHECK(out->data[2 * i + 1] == w_v[2 * (int)ids_v[i] + 1]);
    }
    CHECK(out && ac_backward_with(out, ac_tensor_from_data(g_v, g_s, 3)) == AC_OK && w->grad);
    for (i = 0; w->grad && i < 8; i++) CHECK(w->grad->data[i] == expected_grad[i]);
    ac_mem_restore(cp);
}

/* ---- bad input ------------------------------------------------------------------- */

static void check_error(const AcTensor *result, int code, const char *message)
{
    CHECK(result == NULL);
    CHECK(ac_last_error_code() == code);
    CHECK(strcmp(ac_last_error(), message) == 0);
    if (strcmp(ac_last_error(), message) != 0)
        fprintf(stderr, "  message was: %s\n  expected:    %s\n", ac_last_error(), message);
    ac_clear_error();
}

static void test_bad_input(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[3] = {5, 2, 3}, x2[2] = {5, 3}, x_wide[3] = {5, 2, 4}, x_empty[3] = {0, 2, 3};
    const int64_t wi[2] = {16, 3}, wh[2] = {16, 4}, bs[1] = {16}, ss[2] = {2, 4};
    const int64_t wi_odd[2] = {15, 3}, wh_bad[2] = {16, 5}, bs_bad[1] = {12}, ss_bad[2] = {3, 4};
    const int64_t ids_s[1] = {3}, table[2] = {10, 4}, vec[1] = {10};
    const float ok_ids[3] = {0, 9, 1}, far[3] = {0, 10, 1}, half[3] = {0, 2.5f, 1};
    AcTensor *x = ac_randn(xs, 3), *w_ih = ac_randn(wi, 2), *w_hh = ac_randn(wh, 2);
    AcTensor *b = ac_randn(bs, 1), *h0 = ac_randn(ss, 2), *w = ac_randn(table, 2), *out, *h_n = x, *c_n = x;
    check_error(ac_lstm(NULL, NULL, NULL, w_ih, w_hh, b, b, 0, 0, NULL, NULL), AC_ERR_ARG,
                "lstm: input is NULL");
    check_error(ac_lstm(x, NULL, NULL, NULL, w_hh, b, b, 0, 0, NULL, NULL), AC_ERR_ARG,
                "lstm: w_ih is NULL");
    check_error(ac_lstm(ac_randn(x2, 2), NULL, NULL, w_ih, w_hh, b, b, 0, 0, NULL, NULL),
                AC_ERR_SHAPE, "lstm: input (5, 3) must be 3-d, (seq, batch, features)");
    check_error(ac_lstm(ac_randn(x_wide, 3), NULL, NULL, w_ih, w_hh, b, b, 0, 0, &h_n, &c_n),
                AC_ERR_SHAPE, "lstm: input (5, 2, 4) has 4 features, w_ih (16, 3) expects 3");
    CHECK(h_n == NULL && c_n == NULL);   /* cleared on failure */
    check_error(ac_lstm(x, NULL, NULL, ac_randn(wi_odd, 2), w_hh, b, b, 0, 0, NULL, NULL),
                AC_ERR_SHAPE, "lstm: w_ih (15, 3) must be (4 * hidden, features) with hidden > 0");
    check_error(ac_lstm(x, NULL, NULL, w_ih, ac_randn(wh_bad, 2), b, b, 0, 0, NULL, NULL),
                AC_ERR_SHAPE, "lstm: w_hh (16, 5) must be (16, 4) to fit w_ih (16, 3)");
    check_error(ac_lstm(x, NULL, NULL, w_ih, w_hh, ac_randn(bs_bad, 1), b, 0, 0, NULL, NULL),
                AC_ERR_SHAPE, "lstm: b_ih (12,) must be (16,)");
    check_error(ac_lstm(x, ac_randn(ss_bad, 2), NULL, w_ih, w_hh, b, b, 0, 0, NULL, NULL),
                AC_ERR_SHAPE, "lstm: h0 (3, 4) must be (batch, hidden) = (2, 4) for input (5, 2, 3)");
    check_error(ac_lstm(x, h0, ac_randn(ss_bad, 2), w_ih, w_hh, b, b, 0, 0, NULL, NULL),
                AC_ERR_SHAPE, "lstm: c0 (3, 4) must be (batch, hidden) = (2, 4) for input (5, 2, 3)");
    check_error(ac_lstm(ac_randn(x_empty, 3), NULL, NULL, w_ih, w_hh, b, b, 0, 0, NULL, NULL),
                AC_ERR_SHAPE, "lstm: input (0, 2, 3) has no time steps");
    check_error(ac_gru(x, NULL, w_ih, w_hh, NULL, NULL, 0, 0, NULL), AC_ERR_SHAPE,
                "gru: w_ih (16, 3) must be (3 * hidden, features) with hidden > 0");
    check_error(ac_embedding(ac_tensor_from_data(far, ids_s, 1), w, -1), AC_ERR_INDEX,
                "embedding: index 10 at position 1 is out of range for weight (10, 4) (10 rows)");
    check_error(ac_embedding(ac_tensor_from_data(half, ids_s, 1), w, -1), AC_ERR_INDEX,
                "embedding: index 2.5 at position 1 is not an integer");
    check_error(ac_embedding(ac_tensor_from_data(ok_ids, ids_s, 1), ac_randn(vec, 1), -1),
                AC_ERR_SHAPE, "embedding: weight (10,) must be (num_embeddings, embedding_dim)");
    check_error(ac_embedding(ac_tensor_from_data(ok_ids, ids_s, 1), w, 10), AC_ERR_INDEX,
                "embedding: padding_idx 10 is out of range for weight (10, 4)");
    check_error(ac_embedding(NULL, w, -1), AC_ERR_ARG, "embedding: indices is NULL");
    /* still usable */
    out = ac_lstm(x, h0, NULL, w_ih, w_hh, b, b, 0, 0, &h_n, &c_n);
    CHECK(out && h_n && c_n && out->shape[2] == 4);
    CHECK(ac_embedding(ac_tensor_from_data(ok_ids, ids_s, 1), w, -1) != NULL);
    CHECK(ac_last_error_code() == AC_OK);
    ac_mem_restore(cp);
}

int main(void)
{
    RUN(test_lstm_forward);
    RUN(test_gru_forward);
    RUN(test_gradient_check);
    RUN(test_backward_through_1000_steps);
    RUN(test_threads_bit_identical);
    RUN(test_root_use_leaks_nothing);
    RUN(test_embedding);
    RUN(test_bad_input);
    return TEST_REPORT();
}
