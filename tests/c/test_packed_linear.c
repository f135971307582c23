/*
 * test_packed_linear.c - the packed Linear layer (ac_packed_linear_*): each row's
 * bits the same in a batch of any size, on every kernel set this CPU runs, and
 * ac_linear's results, for one to many rows and odd widths; with
 * AC_ACTIVATION_RELU, the bits of the layer without it and then ac_relu (and
 * gemm_packed_bias's ReLU on a B it reads as it lies); a copy, untouched by
 * later writes to the weight; no leaks inside a scope or at root; recorded
 * into a graph, replayed with the eager bits after the layer is freed, and
 * refused by a program; and the argument checks.
 */
#define _POSIX_C_SOURCE 200809L

#include "ac.h"
#include "kernels/gemm.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const SETS[] = {"generic", "avx2", "avx512"};
#define N_SETS 3

static AcTensor *randn2(int64_t rows, int64_t cols)
{
    int64_t shape[2];
    shape[0] = rows;
    shape[1] = cols;
    return ac_randn(shape, 2);
}

static int same_bits(const AcTensor *a, const AcTensor *b)
{
    return a && b && a->size == b->size && memcmp(a->data, b->data, (size_t)a->size * sizeof(float)) == 0;
}

/* Every element of a within tol * (1 + |b|) of b's. */
static int close_to(const AcTensor *a, const AcTensor *b, float tol)
{
    int64_t i;
    if (!a || !b || a->size != b->size) return 0;
    for (i = 0; i < a->size; i++)
        if (!(fabsf(a->data[i] - b->data[i]) <= tol * (1.0f + fabsf(b->data[i])))) return 0;
    return 1;
}

/* On every set this CPU runs: the first `rows` rows of a batch of 100 have the bits
   they have in the whole batch; ac_linear's bits from five rows on, its values to
   rounding below (it sums a few rows in another order). */
static void test_every_set_gives_each_row_its_bits(void)
{
    static const int64_t outs[] = {1, 10, 37, 128, 130};
    static const int64_t ins[] = {1, 13, 64, 784};
    static const int64_t rows[] = {1, 2, 4, 5, 12, 33, 100};
    size_t a, b, c;
    int set;
    for (set = 0; set < N_SETS; set++) {
        if (!gemm_use_kernels(SETS[set])) continue;
        for (a = 0; a < sizeof outs / sizeof outs[0]; a++) {
            for (b = 0; b < sizeof ins / sizeof ins[0]; b++) {
                AcTensor *w = randn2(outs[a], ins[b]), *bias = randn2(1, outs[a]);
                AcTensor *bias1 = ac_reshape(bias, &outs[a], 1), *x = randn2(100, ins[b]);
                AcPackedLinear *p = ac_packed_linear_new(w, b % 2 ? NULL : bias1, AC_ACTIVATION_NONE);
                AcTensor *whole = ac_packed_linear_forward(p, x);
                CHECK(p != NULL && whole != NULL);
                for (c = 0; p && whole && c < sizeof rows / sizeof rows[0]; c++) {
                    AcCheckpoint cp = ac_mem_checkpoint();
                    int64_t shape[2];
                    AcTensor *part, *want, *got, *expected;
                    shape[0] = rows[c];
                    shape[1] = ins[b];
                    part = ac_tensor_from_data(x->data, shape, 2);
                    want = ac_linear(part, w, b % 2 ? NULL : bias1);
                    got = ac_packed_linear_forward(p, part);
                    shape[1] = outs[a];
                    expected = ac_tensor_from_data(whole->data, shape, 2);
                    CHECK(same_bits(got, expected));
                    /* summing k products in another order: within about k ulps */
                    CHECK(rows[c] > 4 ? same_bits(got, want)
                                      : close_to(got, want, 1e-6f * (float)(ins[b] + 1)));
                    ac_mem_restore(cp);
                }
                ac_tensor_free(whole);
                ac_packed_linear_free(p);
                ac_tensor_free(x);
                ac_tensor_free(bias1);
                ac_tensor_free(bias);
                ac_tensor_free(w);
            }
        }
    }
    gemm_use_kernels(NULL);
}

/* Whether y is x with ac_relu applied, bit for bit (NaN included); adds the
   negative elements of x (those the ReLU changed) to *negatives. */
static int relu_of(const AcTensor *y, const AcTensor *x, int64_t *negatives)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    int same = same_bits(y, ac_relu(x));
    int64_t i;
    for (i = 0; i < x->size; i++) *negatives += x->data[i] < 0.0f;
    ac_mem_restore(cp);
    return same;
}

/* On every set this CPU runs, for 1 to 40 rows (the few-rows panels and the
   tiles), with and without bias, over one depth slice and several (1500): the
   layer made with AC_ACTIVATION_RELU gives the bits of the layer without it
   followed by ac_relu; a NaN in the input stays NaN, as ac_relu leaves it. */
static void test_relu_gives_the_layer_then_relu_on_every_set(void)
{
    static const int64_t outs[] = {1, 10, 37, 128, 130};
    static const int64_t ins[] = {1, 13, 64, 784, 1500};
    size_t a, b;
    int set, with_bias;
    int64_t rows, negatives = 0;
    for (set = 0; set < N_SETS; set++) {
        if (!gemm_use_kernels(SETS[set])) continue;
        for (a = 0; a < sizeof outs / sizeof outs[0]; a++) {
            for (b = 0; b < sizeof ins / sizeof ins[0]; b++) {
                for (with_bias = 0; with_bias < 2; with_bias++) {
                    AcCheckpoint outer = ac_mem_checkpoint();
                    AcTensor *w = randn2(outs[a], ins[b]), *x = randn2(40, ins[b]);
                    AcTensor *bias = with_bias ? ac_reshape(randn2(1, outs[a]), &outs[a], 1) : NULL;
                    AcPackedLinear *plain = ac_packed_linear_new(w, bias, AC_ACTIVATION_NONE);
                    AcPackedLinear *fused = ac_packed_linear_new(w, bias, AC_ACTIVATION_RELU);
                    CHECK(plain != NULL && fused != NULL);
                    x->data[3 * ins[b]] = NAN;    /* row 3 */
                    for (rows = 1; plain && fused && rows <= 40; rows++) {
                        AcCheckpoint cp = ac_mem_checkpoint();
                        int64_t shape[2];
                        AcTensor *part, *got, *before;
                        shape[0] = rows;
                        shape[1] = ins[b];
                        part = ac_tensor_from_data(x->data, shape, 2);
                        got = ac_packed_linear_forward(fused, part);
                        before = ac_packed_linear_forward(plain, part);
                        CHECK(got != NULL && before != NULL);
                        if (got && before && !relu_of(got, before, &negatives)) {
                            CHECK(!"fused ReLU differs from the layer then ac_relu");
                            fprintf(stderr, "  set %s, out %lld, in %lld, bias %d, rows %lld\n",
                                    SETS[set], (long long)outs[a], (long long)ins[b], with_bias,
                                    (long long)rows);
                        }
                        if (got && rows > 3) CHECK(isnan(got->data[3 * outs[a]]));
                        ac_mem_restore(cp);
                    }
                    ac_packed_linear_free(fused);
                    ac_packed_linear_free(plain);
                    ac_mem_restore(outer);
                }
            }
        }
    }
    CHECK(negatives > 100000);    /* the ReLU had work to do */
    gemm_use_kernels(NULL);
}

/* gemm_packed_bias's ReLU where the packed B keeps its source (B read as it
   lies for a few rows, by rows and by columns; the tiles from five rows on):
   the bits of the product without it, then ac_relu. */
static void test_gemm_packed_bias_relu_with_b_kept(void)
{
    const int64_t k = 70, n = 45;
    int set, trans_b;
    int64_t m, negatives = 0;
    for (set = 0; set < N_SETS; set++) {
        if (!gemm_use_kernels(SETS[set])) continue;
        for (trans_b = 0; trans_b < 2; trans_b++) {
            AcCheckpoint cp = ac_mem_checkpoint();
            AcTensor *b = trans_b ? randn2(n, k) : randn2(k, n), *a = randn2(9, k);
            AcTensor *bias = randn2(1, n), *plain = randn2(9, n), *fused = randn2(9, n);
            float *panels = malloc(gemm_packed_b_floats(k, n) * sizeof(float));
            GemmPackedB packed;
            CHECK(panels != NULL);
            if (!panels) {
                ac_mem_restore(cp);
                continue;
            }
            packed = gemm_pack_b(trans_b, k, n, b->data, trans_b ? k : n, panels);
            for (m = 1; m <= 9; m++) {
                AcCheckpoint inner = ac_mem_checkpoint();
                int64_t shape[2];
                AcTensor *got, *before;
                gemm_packed_bias(m, a->data, k, &packed, bias->data, 0, plain->data, n);
                gemm_packed_bias(m, a->data, k, &packed, bias->data, 1, fused->data, n);
                shape[0] = m;
                shape[1] = n;
                got = ac_tensor_from_data(fused->data, shape, 2);
                before = ac_tensor_from_data(plain->data, shape, 2);
                CHECK(relu_of(got, before, &negatives));
                ac_mem_restore(inner);
            }
            free(panels);
            ac_mem_restore(cp);
        }
    }
    CHECK(negatives > 100);
    gemm_use_kernels(NULL);
}

static void a_copy_that_leaks_nothing(int activation)
{
    AcMemStats before, packed, after;
    AcTensor *w = randn2(128, 784), *x = randn2(32, 784), *want, *got;
    AcPackedLinear *p;
    int i;
    ac_memory_stats(&before);
    p = ac_packed_linear_new(w, NULL, activation);
    ac_memory_stats(&packed);
    /* the block, and the header of the tensor that holds it */
    CHECK(packed.bytes_in_use - before.bytes_in_use >= ac_packed_linear_nbytes(p));
    CHECK(packed.bytes_in_use - before.bytes_in_use <= ac_packed_linear_nbytes(p) + 512);
    CHECK(ac_packed_linear_nbytes(p) >= 128 * 784 * 4);
    CHECK(ac_packed_linear_nbytes(p) <= 128 * 784 * 4 + 4096);    /* 128 columns: 4 full panels */
    want = ac_packed_linear_forward(p, x);
    w->data[0] += 1.0f;            /* the layer holds its own copy */
    got = ac_packed_linear_forward(p, x);
    CHECK(same_bits(want, got));
    ac_tensor_free(got);
    for (i = 0; i < 50; i++) {
        AcCheckpoint cp = ac_mem_checkpoint();
        CHECK(ac_packed_linear_forward(p, x) != NULL);
        ac_mem_restore(cp);
    }
    ac_packed_linear_free(p);
    ac_tensor_free(want);
    ac_memory_stats(&after);
    CHECK(after.bytes_in_use == before.bytes_in_use);
    ac_tensor_free(x);
    ac_tensor_free(w);
}

static void test_a_copy_that_leaks_nothing(void)
{
    a_copy_that_leaks_nothing(AC_ACTIVATION_NONE);
    a_copy_that_leaks_nothing(AC_ACTIVATION_RELU);
}

/* A graph records the forward (both activations, one layer after the other) and
   holds the layers' blocks: replays on new rows give the eager bits after the
   layers were freed, the blocks go with the graph, and a program refuses it. */
static void test_recorded_into_a_graph(void)
{
    AcTensor *w1 = randn2(37, 13), *w2 = randn2(5, 37), *x = randn2(6, 13), *y, *out = NULL;
    AcTensor *want[3], *rows[3];
    AcPackedLinear *p1 = ac_packed_linear_new(w1, NULL, AC_ACTIVATION_RELU);
    AcPackedLinear *p2 = ac_packed_linear_new(w2, NULL, AC_ACTIVATION_NONE);
    AcMemStats before, after;
    AcGraph *g;
    int i, ok = 1;
    char path[] = "/tmp/ac_packed_program_XXXXXX";
    int fd = mkstemp(path);
    ac_memory_stats(&before);
    for (i = 0; i < 3; i++) {
        rows[i] = randn2(6, 13);
        want[i] = ac_packed_linear_forward(p2, y = ac_packed_linear_forward(p1, rows[i]));
        ac_tensor_free(y);
    }
    g = ac_graph_begin();
    CHECK(g != NULL && ac_graph_input(g, x) == AC_OK);
    y = ac_packed_linear_forward(p1, x);
    out = ac_packed_linear_forward(p2, y);
    CHECK(ac_graph_end(g, &out, 1) == AC_OK);
    CHECK(ac_graph_num_nodes(g) == 2 && strcmp(ac_graph_node_op(g, 0), "packed_linear") == 0);
    ac_tensor_free(out);
    ac_tensor_free(y);
    ac_packed_linear_free(p1);
    ac_packed_linear_free(p2);
    for (i = 0; i < 3; i++) {
        AcCheckpoint cp = ac_mem_checkpoint();
        ok &= ac_graph_replay(g, &rows[i], 1, &out, 1) == AC_OK && same_bits(out, want[i]);
        ac_mem_restore(cp);
    }
    CHECK(ok);
    CHECK(fd >= 0 && ac_program_save(g, path) == AC_ERR_ARG &&
          strstr(ac_last_error(), "node 0 is packed_linear, which a program cannot hold") != NULL);
    if (fd >= 0) {
        close(fd);
        remove(path);
    }
    ac_graph_free(g);
    for (i = 0; i < 3; i++) {
        ac_tensor_free(want[i]);
        ac_tensor_free(rows[i]);
    }
    ac_memory_stats(&after);
    CHECK(after.bytes_in_use < before.bytes_in_use);   /* the blocks went with the graph */
    ac_tensor_free(x);
    ac_tensor_free(w2);
    ac_tensor_free(w1);
}

static void test_bad_arguments(void)
{
    AcTensor *w = randn2(3, 4), *x = randn2(2, 5), *b = randn2(1, 3), *leaf = randn2(2, 4);
    int64_t three = 3, four = 4;
    AcTensor *b1 = ac_reshape(b, &three, 1), *bad_bias = ac_reshape(w, &four, 1);
    AcPackedLinear *p = ac_packed_linear_new(w, b1, AC_ACTIVATION_NONE);
    AcPackedLinear *fused = ac_packed_linear_new(w, b1, AC_ACTIVATION_RELU);
    AcMemStats before, after;
    CHECK(p != NULL && fused != NULL);
    CHECK(ac_packed_linear_new(NULL, NULL, AC_ACTIVATION_NONE) == NULL &&
          ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_packed_linear_new(b1, NULL, AC_ACTIVATION_NONE) == NULL &&
          ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(ac_packed_linear_new(w, w, AC_ACTIVATION_NONE) == NULL &&
          ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(bad_bias == NULL || (ac_packed_linear_new(w, bad_bias, AC_ACTIVATION_NONE) == NULL &&
                               ac_last_error_code() == AC_ERR_SHAPE));
    ac_memory_stats(&before);
    CHECK(ac_packed_linear_new(w, b1, 2) == NULL && ac_last_error_code() == AC_ERR_ARG &&
          strstr(ac_last_error(), "activation must be") != NULL);
    CHECK(ac_packed_linear_new(w, NULL, -1) == NULL && ac_last_error_code() == AC_ERR_ARG);
    ac_memory_stats(&after);
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(ac_packed_linear_forward(NULL, x) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_packed_linear_forward(p, NULL) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_packed_linear_forward(p, x) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    ac_tensor_set_requires_grad(leaf, 1);
    CHECK(ac_packed_linear_forward(p, leaf) == NULL && ac_last_error_code() == AC_ERR_STATE);
    CHECK(ac_packed_linear_forward(fused, leaf) == NULL && ac_last_error_code() == AC_ERR_STATE);
    CHECK(ac_packed_linear_forward(fused, x) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(ac_packed_linear_in_features(NULL) < 0 && ac_packed_linear_out_features(NULL) < 0);
    CHECK(ac_packed_linear_has_bias(NULL) < 0 && ac_packed_linear_nbytes(NULL) < 0);
    CHECK(ac_packed_linear_in_features(p) == 4 && ac_packed_linear_out_features(p) == 3);
    CHECK(ac_packed_linear_has_bias(p) == 1);
    CHECK(ac_packed_linear_free(NULL) == AC_OK);
    ac_packed_linear_free(fused);
    ac_packed_linear_free(p);
    ac_tensor_free(bad_bias);
    ac_tensor_free(b1);
    ac_tensor_free(leaf);
    ac_tensor_free(b);
    ac_tensor_free(x);
    ac_tensor_free(w);
}

int main(void)
{
    ac_manual_seed(11);
    RUN(test_every_set_gives_each_row_its_bits);
    RUN(test_relu_gives_the_layer_then_relu_on_every_set);
    RUN(test_gemm_packed_bias_relu_with_b_kept);
    RUN(test_a_copy_that_leaks_nothing);
    RUN(test_recorded_into_a_graph);
    RUN(test_bad_arguments);
    return TEST_REPORT();
}
