/*
 * test_program.c - a C program records a small CNN's forward pass, saves it as
 * a program and loads it back: the same bits as eager, memory flat over 1,000
 * runs; training graphs are refused; truncated, corrupt and inconsistent files
 * fail with AC_ERR_FORMAT; bad calls fail cleanly.
 */
#define _POSIX_C_SOURCE 200809L
#include "ac.h"
#include "test.h"

#include <string.h>
#include <unistd.h>

typedef struct {
    AcTensor *conv_w, *conv_b, *mean, *var, *gamma, *beta, *fc_w, *fc_b;
} Net;

static char path[256], bad_path[256];

static AcMemStats stats(void)
{
    AcMemStats s;
    ac_memory_stats(&s);
    return s;
}

static void net_init(Net *n)
{
    const int64_t conv[4] = {4, 2, 3, 3}, four[1] = {4}, fc[2] = {5, 4 * 3 * 3}, five[1] = {5};
    ac_manual_seed(3);
    n->conv_w = ac_randn(conv, 4);
    n->conv_b = ac_randn(four, 1);
    n->mean = ac_randn(four, 1);
    n->var = ac_full(four, 1, 2.0f);
    n->gamma = ac_randn(four, 1);
    n->beta = ac_randn(four, 1);
    n->fc_w = ac_randn(fc, 2);
    n->fc_b = ac_randn(five, 1);
}

static void net_free(Net *n)
{
    AcTensor *all[8] = {n->conv_w, n->conv_b, n->mean, n->var, n->gamma, n->beta, n->fc_w, n->fc_b};
    int i;
    for (i = 0; i < 8; i++) ac_tensor_free(all[i]);
}

/* conv, batch norm (eval), relu, max pool, flatten, linear; and the log-softmax
   and the per-row sum of squares (a reduction over listed dims). */
static void net_forward(const Net *n, AcTensor *x, AcTensor **out)
{
    const int64_t rows[2] = {-1, 5};
    const int dims[1] = {1};
    AcTensor *h = ac_conv2d(x, n->conv_w, n->conv_b, 1, 1, 1, 1, 1, 1, 1);
    h = ac_batch_norm(h, n->gamma, n->beta, n->mean, n->var, 0, 0.1f, 1e-5f);
    h = ac_max_pool2d(ac_relu(h), 2, 2, 2, 2, 0, 0);
    h = ac_linear(ac_flatten(h, 1, -1), n->fc_w, n->fc_b);
    out[0] = ac_log_softmax(ac_reshape(h, rows, 2), 1);
    out[1] = ac_sum(ac_mul(h, h), dims, 1, 0);
}

static AcTensor *input_batch(uint64_t seed)
{
    const int64_t shape[4] = {3, 2, 6, 6};
    ac_manual_seed(seed);
    return ac_randn(shape, 4);
}

/* Record net's forward on a (3, 2, 6, 6) input and save it to path. */
static void save_net(const Net *n)
{
    AcCheckpoint cp = ac_mem_checkpoint();   /* the recording call's tensors */
    AcTensor *x = input_batch(1), *out[2];
    AcGraph *g = ac_graph_begin();
    CHECK(ac_graph_input(g, x) == AC_OK);
    net_forward(n, x, out);
    CHECK(ac_graph_end(g, out, 2) == AC_OK);
    CHECK(ac_program_save(g, path) == AC_OK);
    ac_graph_free(g);
    ac_mem_restore(cp);
}

static int same_bits(const AcTensor *a, const AcTensor *b)
{
    return a && b && a->ndim == b->ndim && memcmp(a->shape, b->shape, (size_t)a->ndim * 8) == 0 &&
           memcmp(a->data, b->data, (size_t)a->size * sizeof(float)) == 0;
}

static void test_loaded_program_runs_as_eager(void)
{
    Net n;
    AcProgram *p;
    AcTensor *x, *eager[2], *ran[2] = {NULL, NULL};
    int64_t shape[AC_MAX_DIMS];
    int dtype = -1, k;
    net_init(&n);
    save_net(&n);
    p = ac_program_load(path);
    CHECK(p != NULL);
    if (!p) {
        fprintf(stderr, "%s\n", ac_last_error());
        net_free(&n);
        return;
    }
    CHECK(ac_program_num_inputs(p) == 1 && ac_program_num_outputs(p) == 2);
    CHECK(ac_program_input_info(p, 0, &dtype, shape) == 4);
    CHECK(dtype == AC_FLOAT32 && shape[0] == 3 && shape[1] == 2 && shape[2] == 6 && shape[3] == 6);
    CHECK(ac_program_output_info(p, 1, &dtype, shape) == 1 && shape[0] == 3);
    for (k = 2; k < 5; k++) {   /* new data each time, the same bits as eager */
        AcCheckpoint cp = ac_mem_checkpoint();
        x = input_batch((uint64_t)k);
        net_forward(&n, x, eager);
        CHECK(ac_program_run(p, &x, 1, ran, 2) == AC_OK);
        CHECK(same_bits(eager[0], ran[0]) && same_bits(eager[1], ran[1]));
        CHECK(ran[0]->scope_depth == cp.depth);
        ac_mem_restore(cp);
    }
    CHECK(ac_program_free(p) == AC_OK);
    net_free(&n);
}

static void test_memory_stays_flat_over_1000_runs(void)
{
    Net n;
    AcProgram *p;
    AcTensor *x, *out[2];
    AcMemStats before, after;
    int i;
    net_init(&n);
    save_net(&n);
    net_free(&n);   /* the program holds what it needs */
    p = ac_program_load(path);
    x = input_batch(7);
    CHECK(p != NULL && ac_program_run(p, &x, 1, out, 2) == AC_OK);   /* warms the arena */
    ac_tensor_free(out[0]);
    ac_tensor_free(out[1]);
    before = stats();
    for (i = 0; i < 1000; i++) {
        CHECK(ac_program_run(p, &x, 1, out, 2) == AC_OK);
        ac_tensor_free(out[0]);
        ac_tensor_free(out[1]);
    }
    after = stats();
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.live_tensors == before.live_tensors);
    CHECK(after.heap_allocations - before.heap_allocations <= 2 * 1000);   /* the two outputs, at root */
    ac_tensor_free(x);
    ac_program_free(p);
}

static void test_training_graphs_and_training_mode_are_refused(void)
{
    const int64_t shape[2] = {4, 3};
    AcTensor *w = ac_randn(shape, 2), *x, *loss, *y;
    AcCheckpoint cp = ac_mem_checkpoint();
    AcGraph *g;
    ac_tensor_set_requires_grad(w, 1);
    x = ac_randn(shape, 2);
    g = ac_graph_begin();
    ac_graph_input(g, x);
    loss = ac_sum(ac_mul(x, w), NULL, 0, 0);
    ac_backward(loss);
    CHECK(ac_graph_end(g, &loss, 1) == AC_OK);
    CHECK(ac_program_save(g, path) == AC_ERR_ARG);
    CHECK(strstr(ac_last_error(), "node 2 is backward, which a program cannot hold") != NULL);
    ac_graph_free(g);
    ac_tensor_zero_grad(w);

    ac_set_grad_enabled(0);
    g = ac_graph_begin();
    ac_graph_input(g, x);
    y = ac_dropout(x, 0.5f, 1);
    CHECK(ac_graph_end(g, &y, 1) == AC_OK);
    CHECK(ac_program_save(g, path) == AC_ERR_ARG);
    CHECK(strstr(ac_last_error(), "node 0 (dropout): argument 1 is 1, where a program takes only 0 "
                                  "(record it in eval mode)") != NULL);
    ac_graph_free(g);
    ac_set_grad_enabled(1);
    ac_mem_restore(cp);
    ac_tensor_free(w);
}

/* The bytes of path; *size gets their count. */
static unsigned char *file_bytes(const char *name, long *size)
{
    FILE *f = fopen(name, "rb");
    unsigned char *bytes;
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    bytes = malloc((size_t)*size);
    CHECK(fread(bytes, 1, (size_t)*size, f) == (size_t)*size);
    fclose(f);
    return bytes;
}

static void write_bytes(const unsigned char *bytes, long size)
{
    FILE *f = fopen(bad_path, "wb");
    CHECK(fwrite(bytes, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
}

/* bad_path fails to load with code, and its message holds text. */
static void check_load_fails(int code, const char *text)
{
    AcProgram *p = ac_program_load(bad_path);
    CHECK(p == NULL && ac_last_error_code() == code);
    if (text && !strstr(ac_last_error(), text)) {
        CHECK(!"message");
        fprintf(stderr, "  got: %s\n  expected: %s\n", ac_last_error(), text);
    }
    if (p) ac_program_free(p);
}

/* relu of a (2, 3) input, saved: buffer 0 (the input) at byte 24, buffer 1
   (the output) at 52 (dims at 64 and 72), the node at 80. */
static unsigned char *relu_program(long *size)
{
    const int64_t shape[2] = {2, 3};
    AcTensor *x = ac_tensor_new(shape, 2), *y;
    AcGraph *g = ac_graph_begin();
    ac_graph_input(g, x);
    y = ac_relu(x);
    CHECK(ac_graph_end(g, &y, 1) == AC_OK);
    CHECK(ac_program_save(g, path) == AC_OK);
    ac_graph_free(g);
    ac_tensor_free(y);
    ac_tensor_free(x);
    return file_bytes(path, size);
}

static void test_corrupt_and_truncated_files_fail_with_format_errors(void)
{
    AcMemStats before = stats(), after;
    unsigned char *bytes, saved;
    long size, cut, at;
    Net n;
    net_init(&n);
    save_net(&n);
    net_free(&n);
    bytes = file_bytes(path, &size);
    ac_set_memory_limit(64 << 20);   /* a changed dim may claim any size */
    for (cut = 0; cut < size; cut += cut < 400 ? 1 : 97) {
        write_bytes(bytes, cut);
        check_load_fails(AC_ERR_FORMAT, NULL);
    }
    for (at = 0; at < size; at += at < 600 ? 1 : 211) {   /* any byte changed: loads or fails cleanly */
        AcProgram *p;
        saved = bytes[at];
        bytes[at] ^= 0x41;
        write_bytes(bytes, size);
        p = ac_program_load(bad_path);
        if (p) ac_program_free(p);
        else CHECK(ac_last_error_code() == AC_ERR_FORMAT || ac_last_error_code() == AC_ERR_MEMORY);
        bytes[at] = saved;
    }
    ac_set_memory_limit(0);
    free(bytes);
    after = stats();
    CHECK(after.bytes_in_use == before.bytes_in_use && after.live_tensors == before.live_tensors);
}

static void test_mismatched_files_name_what_is_wrong(void)
{
    long size;
    unsigned char *bytes = relu_program(&size), *longer;
    AcProgram *p;
    write_bytes(bytes, size);
    p = ac_program_load(bad_path);
    CHECK(p != NULL);
    if (p) ac_program_free(p);
    bytes[72] = 4;   /* the output's recorded shape (2, 4) */
    write_bytes(bytes, size);
    check_load_fails(AC_ERR_FORMAT, "node 0 (relu) gives float32 (2, 3) where its buffer records float32 (2, 4)");
    bytes[72] = 3;
    memcpy(bytes + 84, "relv", 4);
    write_bytes(bytes, size);
    check_load_fails(AC_ERR_FORMAT, "node 0 is an op 'relv' that programs do not know");
    memcpy(bytes + 84, "relu", 4);
    bytes[88] = 2;   /* n_in */
    write_bytes(bytes, size);
    check_load_fails(AC_ERR_FORMAT, "node 0 (relu) has 2 inputs, 1 outputs and 0 scalar arguments");
    bytes[88] = 1;
    bytes[100] = 7;   /* the node's input id */
    write_bytes(bytes, size);
    check_load_fails(AC_ERR_FORMAT, "relu names buffer 7, outside [-1, 2)");
    bytes[100] = 1;   /* reads its own output */
    write_bytes(bytes, size);
    check_load_fails(AC_ERR_FORMAT, "node 0 (relu) reads buffer 1, which nothing gave before");
    bytes[100] = 0;
    bytes[0] = 'X';
    write_bytes(bytes, size);
    check_load_fails(AC_ERR_FORMAT, "not a program file");
    bytes[0] = 'A';
    bytes[8] = 200;   /* n_buffers */
    write_bytes(bytes, size);
    check_load_fails(AC_ERR_FORMAT, "200 buffers need more than");
    bytes[8] = 2;
    longer = malloc((size_t)size + 1);
    memcpy(longer, bytes, (size_t)size);
    longer[size] = 0;
    write_bytes(longer, size + 1);
    check_load_fails(AC_ERR_FORMAT, "1 bytes follow the data");
    free(longer);
    free(bytes);
}

static void test_bad_calls_fail_cleanly(void)
{
    const int64_t shape[2] = {2, 3}, other[2] = {3, 2};
    long size;
    unsigned char *bytes = relu_program(&size);
    AcProgram *p = ac_program_load(path);
    AcTensor *x = ac_tensor_new(shape, 2), *wrong = ac_tensor_new(other, 2), *out = NULL;
    AcGraph *g;
    int64_t dims[AC_MAX_DIMS];
    int dtype;
    free(bytes);
    CHECK(p != NULL);
    CHECK(ac_program_save(NULL, path) == AC_ERR_ARG);
    g = ac_graph_begin();
    CHECK(ac_program_save(g, path) == AC_ERR_STATE);   /* still recording */
    CHECK(ac_program_load(path) == NULL && ac_last_error_code() == AC_ERR_STATE);
    ac_graph_end(g, NULL, 0);
    CHECK(ac_program_save(g, NULL) == AC_ERR_ARG);
    CHECK(ac_program_save(g, "/nonexistent-dir/x.acprog") == AC_ERR_IO);
    ac_graph_free(g);
    CHECK(ac_program_load(NULL) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_program_load("/nonexistent-dir/x.acprog") == NULL && ac_last_error_code() == AC_ERR_IO);
    CHECK(ac_program_load("/") == NULL && ac_last_error_code() == AC_ERR_IO);
    CHECK(ac_program_run(NULL, &x, 1, &out, 1) == AC_ERR_ARG);
    CHECK(ac_program_run(p, &x, 2, &out, 1) == AC_ERR_ARG);
    CHECK(ac_program_run(p, NULL, 1, &out, 1) == AC_ERR_ARG);
    CHECK(ac_program_run(p, &x, 1, NULL, 1) == AC_ERR_ARG);
    CHECK(ac_program_run(p, &wrong, 1, &out, 1) == AC_ERR_SHAPE);
    CHECK(ac_program_free(NULL) == AC_ERR_ARG);
    CHECK(ac_program_num_inputs(NULL) == AC_ERR_ARG && ac_program_num_outputs(NULL) == AC_ERR_ARG);
    CHECK(ac_program_input_info(NULL, 0, &dtype, dims) == AC_ERR_ARG);
    CHECK(ac_program_input_info(p, 1, &dtype, dims) == AC_ERR_INDEX);
    CHECK(ac_program_output_info(p, -1, &dtype, dims) == AC_ERR_INDEX);
    CHECK(ac_program_output_info(p, 0, NULL, dims) == AC_ERR_ARG);
    CHECK(ac_program_output_info(p, 0, &dtype, NULL) == AC_ERR_ARG);
    CHECK(ac_program_run(p, &x, 1, &out, 1) == AC_OK && out != NULL);   /* still usable */
    ac_tensor_free(out);
    ac_program_free(p);
    ac_tensor_free(x);
    ac_tensor_free(wrong);
}

int main(void)
{
    AcMemStats start, end;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/test_program-%ld.acprog", tmp, (long)getpid());
    snprintf(bad_path, sizeof bad_path, "%s/test_program-%ld-bad.acprog", tmp, (long)getpid());
    start = stats();
    RUN(test_loaded_program_runs_as_eager);
    RUN(test_memory_stays_flat_over_1000_runs);
    RUN(test_training_graphs_and_training_mode_are_refused);
    RUN(test_corrupt_and_truncated_files_fail_with_format_errors);
    RUN(test_mismatched_files_name_what_is_wrong);
    RUN(test_bad_calls_fail_cleanly);
    remove(path);
    remove(bad_path);
    end = stats();
    CHECK(end.live_tensors == start.live_tensors);
    CHECK(end.bytes_in_use == start.bytes_in_use);
    return TEST_REPORT();
}
