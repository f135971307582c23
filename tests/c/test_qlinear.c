/*
 * test_qlinear.c - the int8 Linear, LSTM and GRU (ac_qlinear_*, ac_qlstm,
 * ac_qgru): outputs against a scalar reference of the same integer arithmetic
 * (exact), every int8 kernel set this CPU runs giving the same bits on odd
 * shapes, the tensors that view a layer, an I8 safetensors round trip, no
 * leaks, and the argument checks.
 */
#define _POSIX_C_SOURCE 200809L

#include "ac.h"
#include "kernels/qgemm.h"
#include "test.h"

#include <stdint.h>
#include <string.h>

static const char *const SETS[] = {"generic", "avx2", "avx512-vnni"};
#define N_SETS 3

static AcTensor *randn2(int64_t rows, int64_t cols, float scale)
{
    int64_t shape[2];
    AcTensor *t;
    int64_t i;
    shape[0] = rows;
    shape[1] = cols;
    t = ac_randn(shape, 2);
    for (i = 0; t && i < t->size; i++) t->data[i] *= scale;
    return t;
}

/* The quantization ac.h states, one row: q and the scale. */
static float quantize_reference(const float *x, int64_t k, int32_t *q)
{
    float amax = 0.0f, inv;
    int64_t p;
    for (p = 0; p < k; p++) amax = fabsf(x[p]) > amax ? fabsf(x[p]) : amax;
    if (amax < 0x1p-120f) {
        for (p = 0; p < k; p++) q[p] = 0;
        return 0.0f;
    }
    inv = 127.0f / amax;
    for (p = 0; p < k; p++) {
        float v = rintf(x[p] * inv);
        q[p] = v > 127.0f ? 127 : v < -127.0f ? -127 : (int32_t)v;
    }
    return amax / 127.0f;
}

/* y = the layer on x (m, k), with the layer's own int8 weights and scales. */
static void forward_reference(AcQLinear *q, const AcTensor *x, float *y)
{
    AcTensor *w = ac_qlinear_weight(q), *s = ac_qlinear_scale(q);
    AcTensor *b = ac_qlinear_has_bias(q) ? ac_qlinear_bias(q) : NULL;
    int64_t n = w->shape[0], k = w->shape[1], m = x->size / (k ? k : 1), i, j, p;
    int32_t *qx = malloc((size_t)(k + 1) * sizeof(int32_t));
    const int8_t *wq = (const int8_t *)(void *)w->data;
    for (i = 0; i < m; i++) {
        float sx = quantize_reference(x->data + i * k, k, qx);
        for (j = 0; j < n; j++) {
            int32_t sum = 0;
            for (p = 0; p < k; p++) sum += qx[p] * wq[j * k + p];
            y[i * n + j] = (float)sum * (sx * s->data[j]) + (b ? b->data[j] : 0.0f);
        }
    }
    free(qx);
    ac_tensor_free(b);
    ac_tensor_free(s);
    ac_tensor_free(w);
}

/* Every set this CPU runs gives the reference's bits, for batch 1 and batches,
   prime widths and depths that are no multiple of the vector width. */
static void test_every_set_matches_the_reference(void)
{
    static const int64_t outs[] = {1, 7, 37, 130};
    static const int64_t ins[] = {1, 13, 33, 64, 100, 257};
    static const int64_t batches[] = {1, 3, 4, 5, 64};
    size_t a, b, c;
    int set;
    for (a = 0; a < sizeof outs / sizeof outs[0]; a++)
        for (b = 0; b < sizeof ins / sizeof ins[0]; b++) {
            AcTensor *w = randn2(outs[a], ins[b], 0.3f), *bias = randn2(1, outs[a], 1.0f);
            AcTensor *bias1 = ac_reshape(bias, &outs[a], 1);
            AcQLinear *q = ac_qlinear_pack(w, (a + b) % 2 ? bias1 : NULL);
            CHECK(q != NULL);
            for (c = 0; c < sizeof batches / sizeof batches[0]; c++) {
                AcTensor *x = randn2(batches[c], ins[b], 2.0f);
                float *ref = malloc((size_t)(batches[c] * outs[a]) * sizeof(float));
                forward_reference(q, x, ref);
                for (set = 0; set < N_SETS; set++) {
                    AcTensor *y;
                    if (!qgemm_use_kernels(SETS[set])) continue;
                    y = ac_qlinear_forward(q, x);
                    CHECK(y && y->shape[0] == batches[c] && y->shape[1] == outs[a]);
                    if (y && memcmp(y->data, ref, (size_t)y->size * sizeof(float)) != 0) {
                        fprintf(stderr, "set %s differs at (%lld, %lld, %lld)\n", SETS[set],
                                (long long)batches[c], (long long)outs[a], (long long)ins[b]);
                        CHECK(0);
                    }
                    ac_tensor_free(y);
                }
                free(ref);
                ac_tensor_free(x);
            }
            qgemm_use_kernels(NULL);
            ac_qlinear_free(q);
            ac_tensor_free(bias1);
            ac_tensor_free(bias);
            ac_tensor_free(w);
        }
}

/* A small generator for the integer tests: the same values on every run. */
static uint32_t next_random(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return *state >> 8;
}

/* The panel kernels (qgemm.h) against plain integer sums, on every set that has
   them: odd m, n and k, w over all of int8, and jobs that start at a later
   panel, as the threads' slices do. */
static void test_panel_kernels(void)
{
    static const int64_t ms[] = {1, 2, 3, 4, 5, 7, 64};
    static const int64_t ns[] = {1, 15, 16, 17, 33, 64, 65, 130};
    static const int64_t ks[] = {1, 3, 4, 5, 31, 32, 33, 100};
    uint32_t state = 15;
    size_t a, b, c;
    int set;
    for (a = 0; a < sizeof ms / sizeof ms[0]; a++)
        for (b = 0; b < sizeof ns / sizeof ns[0]; b++)
            for (c = 0; c < sizeof ks / sizeof ks[0]; c++) {
                const int64_t m = ms[a], n = ns[b], k = ks[c], ld = (k + 63) / 64 * 64;
                int8_t *w = malloc((size_t)(n * k));
                int32_t *xi = malloc((size_t)(m * k) * sizeof(int32_t));
                int32_t *ref = malloc((size_t)(m * n) * sizeof(int32_t));
                int32_t *out = malloc((size_t)(m * n) * sizeof(int32_t));
                uint8_t *x = calloc((size_t)(m * ld), 1);
                char *raw = malloc(qgemm_panels_bytes(n, k) + 63);
                void *mem = raw + (64 - (uintptr_t)raw % 64) % 64;   /* as scratch is: 64-byte aligned */
                QPanels panels;
                int64_t i, j, p;
                for (p = 0; p < n * k; p++) w[p] = (int8_t)(int)(next_random(&state) % 256 - 128);
                for (p = 0; p < m * k; p++) xi[p] = (int32_t)(next_random(&state) % 255) - 127;
                for (i = 0; i < m; i++)
                    for (j = 0; j < n; j++) {
                        int32_t sum = 0;
                        for (p = 0; p < k; p++) sum += xi[i * k + p] * w[j * k + p];
                        ref[i * n + j] = sum;
                    }
                qgemm_pack_panels(w, n, k, mem, &panels);
                for (set = 0; set < N_SETS; set++) {
                    const QGemmKernels *kern;
                    int64_t j0;
                    if (!qgemm_use_kernels(SETS[set]) || !(kern = qgemm_kernels())->dot_panels) continue;
                    for (i = 0; i < m; i++)
                        for (p = 0; p < k; p++)
                            x[i * ld + p] = (uint8_t)(xi[i * k + p] + (kern->x_plus_128 ? 128 : 0));
                    memset(out, 0x55, (size_t)(m * n) * sizeof(int32_t));
                    /* two jobs: the first panel, then the rest */
                    for (j0 = 0; j0 < n; j0 += QGEMM_PANEL_COLS) {
                        QDotJob job;
                        job.m = m;
                        job.n = j0 == 0 && n > QGEMM_PANEL_COLS ? QGEMM_PANEL_COLS : n - j0;
                        job.k = k;
                        job.x = x;
                        job.ld_x = ld;
                        job.w = w + j0 * k;
                        job.out = out + j0;
                        job.ld_out = n;
                        job.panels = panels.w + j0 * panels.depth;
                        job.sums = panels.sums + j0;
                        job.depth = panels.depth;
                        kern->dot_panels(&job);
                        if (j0 > 0) break;
                    }
                    CHECK(memcmp(out, ref, (size_t)(m * n) * sizeof(int32_t)) == 0);
                    if (memcmp(out, ref, (size_t)(m * n) * sizeof(int32_t)) != 0)
                        fprintf(stderr, "panels of set %s differ at (%lld, %lld, %lld)\n", SETS[set],
                                (long long)m, (long long)n, (long long)k);
                }
                qgemm_use_kernels(NULL);
                free(raw);
                free(x);
                free(out);
                free(ref);
                free(xi);
                free(w);
            }
}

/* Threads split the output columns; each sum has one writer, so the bits stay. */
static void test_threads_give_the_same_bits(void)
{
    AcTensor *w = randn2(300, 500, 0.1f), *x = randn2(64, 500, 1.0f), *y1, *y2;
    AcQLinear *q = ac_qlinear_pack(w, NULL);
    int before = ac_get_num_threads();
    ac_set_num_threads(1);
    y1 = ac_qlinear_forward(q, x);
    ac_set_num_threads(2);
    y2 = ac_qlinear_forward(q, x);
    CHECK(y1 && y2 && memcmp(y1->data, y2->data, (size_t)y1->size * sizeof(float)) == 0);
    ac_set_num_threads(before);
    ac_tensor_free(y2);
    ac_tensor_free(y1);
    ac_qlinear_free(q);
    ac_tensor_free(x);
    ac_tensor_free(w);
}

/* The packed weight is the symmetric per-row quantization, close to the float one. */
static void test_pack_quantizes_rows(void)
{
    AcTensor *w = randn2(5, 33, 1.0f), *x = randn2(2, 33, 1.0f), *qw, *scale, *y, *yf;
    AcQLinear *q = ac_qlinear_pack(w, NULL);
    int32_t expect[33];
    int64_t j, p;
    qw = ac_qlinear_weight(q);
    scale = ac_qlinear_scale(q);
    CHECK(qw && qw->dtype == AC_INT8 && qw->shape[0] == 5 && qw->shape[1] == 33);
    CHECK(scale && scale->dtype == AC_FLOAT32 && scale->shape[0] == 5);
    for (j = 0; j < 5; j++) {
        float s = quantize_reference(w->data + j * 33, 33, expect);
        CHECK(scale->data[j] == s);
        for (p = 0; p < 33; p++) CHECK(((int8_t *)(void *)qw->data)[j * 33 + p] == expect[p]);
    }
    y = ac_qlinear_forward(q, x);
    yf = ac_linear(x, w, NULL);
    for (j = 0; j < y->size; j++) CHECK_NEAR(y->data[j], yf->data[j], 0.1);
    CHECK(ac_qlinear_in_features(q) == 33 && ac_qlinear_out_features(q) == 5);
    CHECK(ac_qlinear_has_bias(q) == 0 && ac_qlinear_bias(q) == NULL &&
          ac_last_error_code() == AC_ERR_STATE);
    CHECK(ac_qlinear_nbytes(q) >= 5 * 33 + 5 * 4 && ac_qlinear_nbytes(q) < 5 * 33 * 4);
    ac_tensor_free(yf);
    ac_tensor_free(y);
    ac_tensor_free(scale);
    ac_tensor_free(qw);
    ac_qlinear_free(q);
    ac_tensor_free(x);
    ac_tensor_free(w);
}

/* Views share the layer's block and keep it alive; writing them changes the layer. */
static void test_views_share_the_block(void)
{
    AcMemStats before, after;
    AcTensor *w = randn2(3, 4, 1.0f), *x = randn2(1, 4, 1.0f), *qw, *y;
    AcQLinear *q;
    ac_memory_stats(&before);
    q = ac_qlinear_pack(w, NULL);
    qw = ac_qlinear_weight(q);
    ac_qlinear_free(q);                      /* the view still holds it */
    CHECK(ac_tensor_fill_(qw, 0.0) == AC_OK);
    ac_tensor_free(qw);
    ac_memory_stats(&after);
    CHECK(after.bytes_in_use == before.bytes_in_use && after.live_tensors == before.live_tensors);
    q = ac_qlinear_pack(w, NULL);
    qw = ac_qlinear_weight(q);
    ac_tensor_fill_(qw, 0.0);
    y = ac_qlinear_forward(q, x);
    CHECK(y && y->data[0] == 0.0f && y->data[2] == 0.0f);
    ac_tensor_free(y);
    ac_tensor_free(qw);
    ac_qlinear_free(q);
    ac_tensor_free(x);
    ac_tensor_free(w);
}

/* Non-finite inputs give NaN rows; zero rows give the bias; a scope takes the output. */
static void test_special_rows_and_scopes(void)
{
    AcTensor *w = randn2(4, 6, 1.0f), *b = randn2(1, 4, 1.0f), *x = randn2(3, 6, 1.0f), *y, *b1;
    int64_t four = 4, j;
    AcQLinear *q;
    AcCheckpoint cp;
    AcMemStats before, after;
    b1 = ac_reshape(b, &four, 1);
    q = ac_qlinear_pack(w, b1);
    for (j = 0; j < 6; j++) x->data[j] = 0.0f;
    x->data[6 + 2] = INFINITY;
    y = ac_qlinear_forward(q, x);
    for (j = 0; j < 4; j++) {
        CHECK(y->data[j] == b1->data[j]);
        CHECK(isnan(y->data[4 + j]));
        CHECK(!isnan(y->data[8 + j]));
    }
    ac_tensor_free(y);
    ac_memory_stats(&before);
    cp = ac_mem_checkpoint();
    for (j = 0; j < 10; j++) CHECK(ac_qlinear_forward(q, x) != NULL);
    ac_mem_restore(cp);
    ac_memory_stats(&after);
    CHECK(after.bytes_in_use == before.bytes_in_use);
    ac_qlinear_free(q);
    ac_tensor_free(b1);
    ac_tensor_free(x);
    ac_tensor_free(b);
    ac_tensor_free(w);
}

/* A layer rebuilt from its int8 weights, scales and bias, saved as I8 and F32. */
static void test_safetensors_round_trip(void)
{
    const char *path = "build/test_qlinear.safetensors";
    AcTensor *w = randn2(9, 20, 1.0f), *b = randn2(1, 9, 1.0f), *x = randn2(2, 20, 1.0f), *b1;
    AcTensor *y1, *y2, *t;
    AcStateDict *dict = ac_state_dict_new(), *loaded;
    AcQLinear *q, *q2;
    int64_t nine = 9;
    b1 = ac_reshape(b, &nine, 1);
    q = ac_qlinear_pack(w, b1);
    t = ac_qlinear_weight(q);
    ac_state_dict_set(dict, "fc.weight", t);
    ac_tensor_free(t);
    t = ac_qlinear_scale(q);
    ac_state_dict_set(dict, "fc.weight_scale", t);
    ac_tensor_free(t);
    t = ac_qlinear_bias(q);
    ac_state_dict_set(dict, "fc.bias", t);
    ac_tensor_free(t);
    CHECK(ac_save_safetensors(dict, path) == AC_OK);
    loaded = ac_load_safetensors(path);
    CHECK(loaded && ac_state_dict_get(loaded, "fc.weight")->dtype == AC_INT8);
    q2 = ac_qlinear_new(ac_state_dict_get(loaded, "fc.weight"),
                        ac_state_dict_get(loaded, "fc.weight_scale"),
                        ac_state_dict_get(loaded, "fc.bias"));
    CHECK(q2 != NULL);
    y1 = ac_qlinear_forward(q, x);
    y2 = ac_qlinear_forward(q2, x);
    CHECK(y1 && y2 && memcmp(y1->data, y2->data, (size_t)y1->size * sizeof(float)) == 0);
    /* mismatched: a float weight where int8 belongs, scales of the wrong length */
    CHECK(ac_qlinear_new(ac_state_dict_get(loaded, "fc.weight_scale"),
                         ac_state_dict_get(loaded, "fc.weight_scale"), NULL) == NULL &&
          ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(ac_qlinear_new(ac_state_dict_get(loaded, "fc.weight"), x, NULL) == NULL &&
          ac_last_error_code() == AC_ERR_SHAPE);
    ac_tensor_free(y2);
    ac_tensor_free(y1);
    ac_qlinear_free(q2);
    ac_qlinear_free(q);
    ac_state_dict_free(loaded);
    ac_state_dict_free(dict);
    remove(path);
    ac_tensor_free(b1);
    ac_tensor_free(x);
    ac_tensor_free(b);
    ac_tensor_free(w);
}

/* The int8 LSTM and GRU: close to the float layers, the same bits on every set,
   batch_first and reverse as ac_lstm / ac_gru. */
static void test_recurrent_layers(void)
{
    const int64_t T = 5, B = 3, I = 11, H = 7;
    int gates, set, flags;
    for (gates = 3; gates <= 4; gates++)
        for (flags = 0; flags < 4; flags++) {
            int batch_first = flags & 1, reverse = flags >> 1;
            int64_t xs[3], hs[2];
            AcTensor *x, *h0, *c0, *w_ih = randn2(gates * H, I, 0.3f), *w_hh = randn2(gates * H, H, 0.3f);
            AcTensor *b_ih = randn2(1, gates * H, 0.1f), *b_hh = randn2(1, gates * H, 0.1f);
            AcTensor *b_ih1, *b_hh1, *ref, *ref_h = NULL, *first = NULL, *first_h = NULL;
            AcQLinear *ih, *hh;
            int64_t gh = gates * H, i;
            xs[0] = batch_first ? B : T;
            xs[1] = batch_first ? T : B;
            xs[2] = I;
            hs[0] = B;
            hs[1] = H;
            x = ac_randn(xs, 3);
            h0 = ac_randn(hs, 2);
            c0 = ac_randn(hs, 2);
            b_ih1 = ac_reshape(b_ih, &gh, 1);
            b_hh1 = ac_reshape(b_hh, &gh, 1);
            ih = ac_qlinear_pack(w_ih, b_ih1);
            hh = ac_qlinear_pack(w_hh, b_hh1);
            ref = gates == 4 ? ac_lstm(x, h0, c0, w_ih, w_hh, b_ih1, b_hh1, batch_first, reverse, &ref_h, NULL)
                             : ac_gru(x, h0, w_ih, w_hh, b_ih1, b_hh1, batch_first, reverse, &ref_h);
            for (set = 0; set < N_SETS; set++) {
                AcTensor *y, *h_n = NULL, *c_n = NULL;
                if (!qgemm_use_kernels(SETS[set])) continue;
                y = gates == 4 ? ac_qlstm(x, h0, c0, ih, hh, batch_first, reverse, &h_n, &c_n)
                               : ac_qgru(x, h0, ih, hh, batch_first, reverse, &h_n);
                CHECK(y && y->shape[0] == xs[0] && y->shape[1] == xs[1] && y->shape[2] == H);
                CHECK(h_n && h_n->shape[0] == B && h_n->shape[1] == H);
                CHECK((gates == 4) == (c_n != NULL));
                if (!y || !h_n) continue;
                for (i = 0; i < y->size; i++) CHECK_NEAR(y->data[i], ref->data[i], 0.05);
                for (i = 0; i < h_n->size; i++) CHECK_NEAR(h_n->data[i], ref_h->data[i], 0.05);
                if (!first) {
                    first = y;
                    first_h = h_n;
                } else {
                    CHECK(memcmp(y->data, first->data, (size_t)y->size * sizeof(float)) == 0);
                    CHECK(memcmp(h_n->data, first_h->data, (size_t)h_n->size * sizeof(float)) == 0);
                    ac_tensor_free(y);
                    ac_tensor_free(h_n);
                }
                ac_tensor_free(c_n);
            }
            qgemm_use_kernels(NULL);
            ac_tensor_free(first_h);
            ac_tensor_free(first);
            ac_tensor_free(ref_h);
            ac_tensor_free(ref);
            ac_qlinear_free(hh);
            ac_qlinear_free(ih);
            ac_tensor_free(b_hh1);
            ac_tensor_free(b_ih1);
            ac_tensor_free(b_hh);
            ac_tensor_free(b_ih);
            ac_tensor_free(w_hh);
            ac_tensor_free(w_ih);
            ac_tensor_free(c0);
            ac_tensor_free(h0);
            ac_tensor_free(x);
        }
}

static void test_bad_arguments(void)
{
    AcTensor *w = randn2(4, 6, 1.0f), *x = randn2(2, 5, 1.0f), *x3, *ok_x = randn2(2, 6, 1.0f);
    AcTensor *big = randn2(1, 65537, 1.0f), *i64, *y;
    int64_t shape3[3] = {2, 2, 6}, three = 3;
    AcQLinear *q = ac_qlinear_pack(w, NULL), *q2 = ac_qlinear_pack(w, NULL);
    AcTensor *bias3 = ac_full(&three, 1, 1.0f);
    CHECK(ac_qlinear_pack(NULL, NULL) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_qlinear_pack(x, w) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(ac_qlinear_pack(big, NULL) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    i64 = ac_to_dtype(w, AC_INT64);
    CHECK(ac_qlinear_pack(i64, NULL) == NULL && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(ac_qlinear_new(NULL, NULL, NULL) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_qlinear_forward(NULL, x) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_qlinear_forward(q, NULL) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_qlinear_forward(q, x) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(strstr(ac_last_error(), "qlinear_forward") != NULL);
    CHECK(ac_qlinear_forward(q, i64) == NULL && ac_last_error_code() == AC_ERR_DTYPE);
    ac_tensor_set_requires_grad(ok_x, 1);
    CHECK(ac_qlinear_forward(q, ok_x) == NULL && ac_last_error_code() == AC_ERR_STATE);
    ac_set_grad_enabled(0);
    x3 = ac_qlinear_forward(q, ok_x);
    CHECK(x3 != NULL);
    ac_tensor_free(x3);
    ac_set_grad_enabled(1);
    CHECK(ac_qlinear_in_features(NULL) < 0 && ac_qlinear_nbytes(NULL) < 0);
    CHECK(ac_qlinear_weight(NULL) == NULL && ac_qlinear_scale(NULL) == NULL);
    CHECK(ac_qlinear_free(NULL) == AC_OK);
    x3 = ac_randn(shape3, 3);
    CHECK(ac_qlstm(x3, NULL, NULL, q, q2, 0, 0, NULL, NULL) == NULL &&
          ac_last_error_code() == AC_ERR_SHAPE);      /* 4 rows: hidden 1, but hh is (4, 6) */
    CHECK(ac_qgru(x3, NULL, q, NULL, 0, 0, NULL) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_qgru(x, NULL, q, q2, 0, 0, NULL) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(ac_qlinear_pack(w, bias3) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    ac_set_grad_enabled(0);
    y = ac_qlinear_forward(q, ok_x);        /* still usable */
    CHECK(y != NULL && ac_last_error_code() == AC_ERR_SHAPE);
    ac_tensor_free(y);
    ac_set_grad_enabled(1);
    ac_clear_error();
    ac_tensor_free(bias3);
    ac_tensor_free(x3);
    ac_tensor_free(i64);
    ac_qlinear_free(q2);
    ac_qlinear_free(q);
    ac_tensor_free(big);
    ac_tensor_free(ok_x);
    ac_tensor_free(x);
    ac_tensor_free(w);
}

int main(void)
{
    ac_manual_seed(7);
    RUN(test_every_set_matches_the_reference);
    RUN(test_panel_kernels);
    RUN(test_threads_give_the_same_bits);
    RUN(test_pack_quantizes_rows);
    RUN(test_views_share_the_block);
    RUN(test_special_rows_and_scopes);
    RUN(test_safetensors_round_trip);
    RUN(test_recurrent_layers);
    RUN(test_bad_arguments);
    return TEST_REPORT();
}
