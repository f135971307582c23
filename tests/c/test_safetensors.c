/*
 * test_safetensors.c - AcStateDict, and safetensors files: round trips, the
 * exact bytes written, files from other writers, corrupt files (a table of
 * hand-made ones plus random flips and truncations of a valid file), and I/O
 * errors. Run under ASan to prove the reader never reads out of bounds.
 */
#define _POSIX_C_SOURCE 200809L
#include "ac.h"
#include "test.h"

#include <dirent.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char test_dir[256];

static const char *path_in(const char *name)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", test_dir, name);
    return p;
}

static AcMemStats stats(void)
{
    AcMemStats s;
    ac_memory_stats(&s);
    return s;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f;
    remove(path);   /* a new file, not a truncated one: ext4 flushes truncated files on close */
    f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(data, 1, n, f) == n);
    fclose(f);
}

/* The whole file, malloc'd; *n gets its length. */
static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long len;
    *n = 0;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(len > 0 ? (size_t)len : 1);
    if (buf && fread(buf, 1, (size_t)len, f) == (size_t)len) *n = (size_t)len;
    fclose(f);
    return buf;
}

/* A safetensors file: the header's length, the header as given, data_bytes of data. */
static void write_safetensors(const char *path, const char *header, const void *data,
                              size_t data_bytes)
{
    size_t header_len = strlen(header), total = 8 + header_len + data_bytes;
    unsigned char *buf = malloc(total);
    int i;
    for (i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)header_len >> (8 * i));
    memcpy(buf + 8, header, header_len);
    if (data_bytes) memcpy(buf + 8 + header_len, data, data_bytes);
    write_bytes(path, buf, total);
    free(buf);
}

static int files_left_with(const char *fragment)
{
    DIR *dir = opendir(test_dir);
    struct dirent *e;
    int found = 0;
    if (!dir) return -1;
    while ((e = readdir(dir)) != NULL)
        if (strstr(e->d_name, fragment)) found++;
    closedir(dir);
    return found;
}

static int bits_equal(const AcTensor *a, const AcTensor *b)
{
    int d;
    if (a->ndim != b->ndim || a->size != b->size) return 0;
    for (d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return a->size == 0 || memcmp(a->data, b->data, (size_t)a->size * sizeof(float)) == 0;
}

/* ---- round trips ---------------------------------------------------------- */

static void test_round_trip_keeps_names_shapes_values_and_order(void)
{
    static const char *names[] = {
        "layer.0.weight", "say \"hi\" \\ back\\slash", "unicode \xc3\xb1 \xe6\x97\xa5 \xf0\x9f\x99\x82",
        "control\n\ttab\x01", "", "scalar", "empty", "eight.dims",
    };
    int64_t s23[2] = {2, 3}, s5[1] = {5}, s04[2] = {0, 4}, s8[8] = {1, 2, 1, 1, 1, 1, 3, 1};
    float special[5] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
    AcMemStats before = stats();
    AcTensor *made[8];
    AcStateDict *dict = ac_state_dict_new(), *back;
    const char *path = path_in("round_trip.safetensors");
    int i;
    made[0] = ac_randn(s23, 2);
    made[1] = ac_arange(0, 7, 1);
    made[2] = ac_tensor_from_data(special, s5, 1);
    made[3] = ac_full(s5, 1, 1e-40f);                /* subnormal */
    made[4] = ac_full(s23, 2, -3.5f);
    made[5] = ac_full(NULL, 0, 42.0f);               /* 0-d */
    made[6] = ac_tensor_new(s04, 2);                 /* no elements */
    made[7] = ac_randn(s8, 8);
    for (i = 0; i < 8; i++) {
        CHECK(made[i] != NULL);
        CHECK(ac_state_dict_set(dict, names[i], made[i]) == AC_OK);
    }
    CHECK(ac_save_safetensors(dict, path) == AC_OK);
    back = ac_load_safetensors(path);
    CHECK(back != NULL);
    if (back) {
        CHECK(ac_state_dict_size(back) == 8);
        for (i = 0; i < 8 && i < ac_state_dict_size(back); i++) {
            AcTensor *t = ac_state_dict_tensor(back, i);
            CHECK(strcmp(ac_state_dict_name(back, i), names[i]) == 0);
            CHECK(bits_equal(t, made[i]));
            CHECK(t->scope_depth == 0 && t->refcount == 1 && t->node == NULL);
            CHECK(ac_state_dict_get(back, names[i]) == t);
        }
    }
    CHECK(ac_state_dict_free(back) == AC_OK);
    CHECK(ac_state_dict_free(dict) == AC_OK);
    for (i = 0; i < 8; i++) ac_tensor_free(made[i]);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
}

static void test_saved_bytes_are_the_safetensors_layout(void)
{
    const float values[3] = {1.0f, -2.0f, 0.5f};
    const unsigned char expected_data[12] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0,
                                             0x00, 0x00, 0x00, 0x3f};
    const char *expected_header =
        "{\"a\\\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
        "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[12,12]}}";
    int64_t n3 = 3, n0 = 0;
    AcTensor *a = ac_tensor_from_data(values, &n3, 1), *z = ac_tensor_new(&n0, 1);
    AcStateDict *dict = ac_state_dict_new();
    const char *path = path_in("layout.safetensors");
    unsigned char *file;
    size_t n, header_len = 0, i;
    ac_state_dict_set(dict, "a\"b", a);
    ac_state_dict_set(dict, "z", z);
    CHECK(ac_save_safetensors(dict, path) == AC_OK);
    file = read_bytes(path, &n);
    CHECK(file != NULL && n >= 8);
    if (file && n >= 8) {
        for (i = 0; i < 8; i++) header_len |= (size_t)file[i] << (8 * i);
        CHECK(header_len % 8 == 0);
        CHECK(8 + header_len + 12 == n);
        CHECK(header_len >= strlen(expected_header));
        CHECK(memcmp(file + 8, expected_header, strlen(expected_header)) == 0);
        for (i = 8 + strlen(expected_header); i < 8 + header_len && i < n; i++) CHECK(file[i] == ' ');
        if (8 + header_len + 12 == n) CHECK(memcmp(file + 8 + header_len, expected_data, 12) == 0);
    }
    free(file);
    ac_state_dict_free(dict);
    ac_tensor_free(a);
    ac_tensor_free(z);
}

static void test_empty_dict_round_trips(void)
{
    AcStateDict *dict = ac_state_dict_new(), *back;
    const char *path = path_in("empty.safetensors");
    size_t n;
    unsigned char *file;
    CHECK(ac_save_safetensors(dict, path) == AC_OK);
    file = read_bytes(path, &n);
    CHECK(n == 16 && file && memcmp(file + 8, "{}      ", 8) == 0);
    free(file);
    back = ac_load_safetensors(path);
    CHECK(back != NULL && ac_state_dict_size(back) == 0);
    ac_state_dict_free(back);
    ac_state_dict_free(dict);
}

/* ---- the container -------------------------------------------------------- */

static void test_state_dict_holds_references_and_root_copies(void)
{
    int64_t shape[2] = {2, 2};
    AcMemStats before = stats();
    AcStateDict *dict = ac_state_dict_new();
    AcTensor *root = ac_full(shape, 2, 1.0f), *other = ac_full(shape, 2, 2.0f), *kept;
    AcCheckpoint cp;
    CHECK(ac_state_dict_set(dict, "w", root) == AC_OK);
    CHECK(root->refcount == 2);                     /* held, not copied */
    CHECK(ac_state_dict_get(dict, "w") == root);

    cp = ac_mem_checkpoint();
    CHECK(ac_state_dict_set(dict, "scoped", ac_full(shape, 2, 7.0f)) == AC_OK);
    CHECK(ac_mem_restore(cp) == AC_OK);
    kept = ac_state_dict_get(dict, "scoped");       /* a root copy outlives the scope */
    CHECK(kept && kept->scope_depth == 0 && kept->data[3] == 7.0f);

    CHECK(ac_state_dict_set(dict, "w", other) == AC_OK);   /* replaces, keeps position */
    CHECK(root->refcount == 1);
    CHECK(ac_state_dict_size(dict) == 2);
    CHECK(strcmp(ac_state_dict_name(dict, 0), "w") == 0 && ac_state_dict_tensor(dict, 0) == other);
    CHECK(ac_state_dict_set(dict, "w", other) == AC_OK);   /* the same tensor again */
    CHECK(other->refcount == 2);
    ac_tensor_free(root);
    ac_tensor_free(other);
    CHECK(ac_state_dict_get(dict, "w")->data[0] == 2.0f);
    CHECK(ac_state_dict_free(dict) == AC_OK);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
}

static void test_state_dict_rejects_bad_arguments(void)
{
    int64_t n = 2;
    AcStateDict *dict = ac_state_dict_new();
    AcTensor *t = ac_tensor_new(&n, 1);
    CHECK(ac_state_dict_set(NULL, "a", t) == AC_ERR_ARG);
    CHECK(ac_state_dict_set(dict, NULL, t) == AC_ERR_ARG);
    CHECK(ac_state_dict_set(dict, "a", NULL) == AC_ERR_ARG);
    CHECK(ac_state_dict_set(dict, "__metadata__", t) == AC_ERR_ARG);
    CHECK(strstr(ac_last_error(), "reserved") != NULL);
    CHECK(ac_state_dict_set(dict, "bad \xff utf8", t) == AC_ERR_ARG);
    CHECK(ac_state_dict_set(dict, "overlong \xc0\xaf", t) == AC_ERR_ARG);
    CHECK(ac_state_dict_set(dict, "surrogate \xed\xa0\x80", t) == AC_ERR_ARG);
    CHECK(ac_state_dict_set(dict, "cut \xe6\x97", t) == AC_ERR_ARG);
    CHECK(ac_state_dict_size(dict) == 0 && t->refcount == 1);
    CHECK(ac_state_dict_size(NULL) == AC_ERR_ARG);
    CHECK(ac_state_dict_get(dict, "absent") == NULL && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(strstr(ac_last_error(), "absent") != NULL);
    CHECK(ac_state_dict_get(NULL, "a") == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_state_dict_get(dict, NULL) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_state_dict_name(dict, 0) == NULL && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(ac_state_dict_tensor(dict, -1) == NULL && ac_last_error_code() == AC_ERR_INDEX);
    CHECK(ac_state_dict_name(NULL, 0) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_save_safetensors(NULL, path_in("x")) == AC_ERR_ARG);
    CHECK(ac_save_safetensors(dict, NULL) == AC_ERR_ARG);
    CHECK(ac_load_safetensors(NULL) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_state_dict_free(NULL) == AC_OK);
    /* still usable */
    CHECK(ac_state_dict_set(dict, "a", t) == AC_OK && ac_state_dict_size(dict) == 1);
    ac_state_dict_free(dict);
    ac_tensor_free(t);
}

/* ---- files from other writers ------------------------------------------- */

static void test_load_accepts_any_valid_header_layout(void)
{
    /* Fields in any order, spaces and newlines, metadata, escapes, and data
       stored in a different order than the header lists the tensors. */
    const char *header =
        " {\n  \"__metadata__\" : {\"format\": \"pt\", \"note\": \"a \\\"b\\\"\"},\n"
        "  \"caf\\u00e9 \\ud83d\\ude42\\/\\t\" : { \"shape\" : [ 2 ] , \"data_offsets\" : [ 8 , 16 ],"
        " \"dtype\" : \"F32\" },\n"
        "  \"second\": {\"data_offsets\": [0, 8], \"dtype\": \"F32\", \"shape\": [1, 2]},\n"
        "  \"nothing\": {\"dtype\": \"F32\", \"shape\": [3, 0], \"data_offsets\": [16, 16]}\n"
        "}    ";
    const float data[4] = {10.0f, 20.0f, 1.5f, -2.5f};
    const char *path = path_in("other_writer.safetensors");
    AcStateDict *dict;
    AcTensor *t;
    write_safetensors(path, header, data, sizeof data);
    dict = ac_load_safetensors(path);
    CHECK(dict != NULL);
    if (!dict) {
        fprintf(stderr, "  %s\n", ac_last_error());
        return;
    }
    CHECK(ac_state_dict_size(dict) == 3);
    CHECK(strcmp(ac_state_dict_name(dict, 0), "caf\xc3\xa9 \xf0\x9f\x99\x82/\t") == 0);
    t = ac_state_dict_tensor(dict, 0);
    CHECK(t->ndim == 1 && t->shape[0] == 2 && t->data[0] == 1.5f && t->data[1] == -2.5f);
    t = ac_state_dict_get(dict, "second");
    CHECK(t && t->ndim == 2 && t->shape[0] == 1 && t->shape[1] == 2);
    CHECK(t && t->data[0] == 10.0f && t->data[1] == 20.0f);
    t = ac_state_dict_get(dict, "nothing");
    CHECK(t && t->ndim == 2 && t->size == 0);
    ac_state_dict_free(dict);
}

static void test_loaded_tensors_live_at_root_inside_a_scope(void)
{
    const float data[2] = {3.0f, 4.0f};
    const char *path = path_in("scope.safetensors");
    AcCheckpoint cp;
    AcStateDict *dict;
    write_safetensors(path, "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8);
    cp = ac_mem_checkpoint();
    dict = ac_load_safetensors(path);
    CHECK(ac_mem_restore(cp) == AC_OK);
    CHECK(dict != NULL);
    if (!dict) return;
    CHECK(ac_state_dict_tensor(dict, 0)->scope_depth == 0);
    CHECK(ac_state_dict_tensor(dict, 0)->data[1] == 4.0f);
    ac_state_dict_free(dict);
}

/* ---- corrupt files ------------------------------------------------------- */

typedef struct {
    const char *header;
    size_t data_bytes;      /* zero bytes of data after the header */
    const char *mention;    /* the message must contain this */
} CorruptCase;

#define REC(name, shape, offsets) "\"" name "\":{\"dtype\":\"F32\",\"shape\":" shape ",\"data_offsets\":" offsets "}"

static const CorruptCase corrupt_cases[] = {
    /* JSON syntax */
    {"", 0, "expected '{'"},
    {"[]", 0, "expected '{'"},
    {"{", 0, "expected"},
    {"{\"a\"", 0, "expected ':'"},
    {"{\"a\":", 0, "expected '{'"},
    {"{\"a\" {}}", 0, "expected ':'"},
    {"{" REC("a", "[1]", "[0,4]") ",}", 4, "expected a string"},
    {"{" REC("a", "[1]", "[0,4]") "}x", 4, "only spaces"},
    {"{" REC("a", "[1]", "[0,4]") " " REC("b", "[1]", "[4,8]") "}", 8, "',' or '}'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]", 4, "',' or '}'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1 2],\"data_offsets\":[0,4]}}", 4, "',' or ']'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,],\"data_offsets\":[0,4]}}", 4, "a number"},
    {"{\"unterminated", 0, "closing"},
    {"{\"a\tb\":{}}", 0, "control characters"},
    {"{\"a\\qb\":{}}", 0, "escape"},
    {"{\"a\\", 0, "escape"},
    {"{\"a\\u12\":{}}", 0, "hex digits"},
    {"{\"a\\udc00\":{}}", 0, "surrogate"},
    {"{\"a\\ud800\":{}}", 0, "surrogate"},
    {"{\"a\\ud800\\u0041\":{}}", 0, "surrogate"},
    {"{\"a\\u0000\":{}}", 0, "u0000"},
    {"{\"bad \xff\":{}}", 0, "UTF-8"},
    {"{\"overlong \xc0\x80\":{}}", 0, "UTF-8"},
    {"{\"a\":5}", 0, "expected '{'"},
    {"{\"a\":{\"dtype\":5}}", 0, "expected a string"},
    /* records */
    {"{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]}}", 2, "F16"},
    {"{\"a\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2]}}", 2, "BF16"},
    {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "no dtype"},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "no shape"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "no data_offsets"},
    {"{\"a\":{}}", 0, "no dtype"},
    {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype twice"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "shape twice"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", 4, "unknown field 'extra'"},
    {"{" REC("a", "[-1]", "[0,4]") "}", 4, "negative"},
    {"{" REC("a", "[1.5]", "[0,4]") "}", 4, "not a whole"},
    {"{" REC("a", "[1e3]", "[0,4]") "}", 4, "not a whole"},
    {"{" REC("a", "[01]", "[0,4]") "}", 4, "leading zeros"},
    {"{" REC("a", "[+1]", "[0,4]") "}", 4, "a number"},
    {"{" REC("a", "[\"1\"]", "[0,4]") "}", 4, "a number"},
    {"{" REC("a", "[99999999999999999999]", "[0,4]") "}", 4, "2^63"},
    {"{" REC("a", "[9223372036854775808]", "[0,4]") "}", 4, "2^63"},
    {"{" REC("a", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4, "more than 8"},
    {"{" REC("a", "[4294967296,4294967296]", "[0,4]") "}", 4, "too many elements"},
    {"{" REC("a", "[3037000500,3037000500,4]", "[0,4]") "}", 4, "too many elements"},
    {"{" REC("a", "[1]", "[0]") "}", 4, "not 2"},
    {"{" REC("a", "[1]", "[0,4,8]") "}", 8, "more than 2"},
    {"{" REC("a", "[1]", "[4,0]") "}", 4, "not a range"},
    {"{" REC("a", "[2]", "[0,4]") "}", 4, "needs 8"},
    {"{" REC("a", "[1]", "[0,4]") "}", 2, "not a range"},
    {"{" REC("a", "[1]", "[18446744073709551612,0]") "}", 4, "2^63"},
    {"{" REC("a", "[1]", "[9223372036854775803,9223372036854775807]") "}", 4, "not a range"},
    {"{" REC("a", "[2]", "[0,8]") "," REC("b", "[1]", "[4,8]") "}", 8, "overlaps"},
    {"{" REC("a", "[1]", "[0,4]") "," REC("b", "[1]", "[0,4]") "}", 4, "overlaps"},
    {"{" REC("a", "[1]", "[0,4]") "," REC("b", "[1]", "[8,12]") "}", 12, "belong to no tensor"},
    {"{" REC("a", "[1]", "[4,8]") "}", 8, "belong to no tensor"},
    {"{" REC("a", "[1]", "[0,4]") "}", 8, "belong to no tensor"},
    {"{" REC("a", "[0]", "[2,2]") "," REC("b", "[1]", "[0,4]") "}", 4, "overlaps"},
    {"{}", 4, "no tensors"},
    {"{" REC("a", "[1]", "[0,4]") "," REC("a", "[1]", "[4,8]") "}", 8, "'a' appears twice"},
    {"{\"__metadata__\":{\"k\":1}}", 0, "not a string"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "twice"},
    {"{\"__metadata__\":[]}", 0, "expected '{'"},
};

static void check_corrupt(const char *path, const char *what, const char *mention)
{
    AcStateDict *dict = ac_load_safetensors(path);
    CHECK(dict == NULL);
    CHECK(ac_last_error_code() == AC_ERR_FORMAT);
    CHECK(strstr(ac_last_error(), path) != NULL);
    CHECK(strstr(ac_last_error(), mention) != NULL);
    if (!strstr(ac_last_error(), mention))
        fprintf(stderr, "  case %s: wanted \"%s\" in: %s\n", what, mention, ac_last_error());
    if (dict) {
        fprintf(stderr, "  case %s was accepted\n", what);
        ac_state_dict_free(dict);
    }
}

static void test_corrupt_headers_fail_with_format_errors(void)
{
    static const unsigned char zeros[64];
    const char *path = path_in("corrupt.safetensors");
    AcMemStats before = stats();
    size_t i, n = sizeof corrupt_cases / sizeof corrupt_cases[0];
    for (i = 0; i < n; i++) {
        char what[400];
        snprintf(what, sizeof what, "%zu: %s", i, corrupt_cases[i].header);
        write_safetensors(path, corrupt_cases[i].header, zeros, corrupt_cases[i].data_bytes);
        check_corrupt(path, what, corrupt_cases[i].mention);
    }
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
}

static void test_bad_lengths_and_truncation_fail_with_format_errors(void)
{
    const char *path = path_in("lengths.safetensors");
    const char *header = "{" REC("a", "[4]", "[0,16]") "}";
    unsigned char buf[256];
    size_t header_len = strlen(header);
    int i;
    write_bytes(path, "", 0);
    check_corrupt(path, "empty file", "fewer than the 8");
    write_bytes(path, "\x02\0\0\0", 4);
    check_corrupt(path, "4-byte file", "fewer than the 8");
    write_bytes(path, "\0\0\0\0\0\0\0\0", 8);
    check_corrupt(path, "header length 0", "expected '{'");
    /* a header length past the file, and one past 100 MB */
    for (i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)(header_len + 17) >> (8 * i));
    memcpy(buf + 8, header, header_len);
    memset(buf + 8 + header_len, 0, 16);
    write_bytes(path, buf, 8 + header_len + 16);
    check_corrupt(path, "header length past the end", "runs past the end");
    for (i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)100000001 >> (8 * i));
    write_bytes(path, buf, 8 + header_len + 16);
    check_corrupt(path, "101 MB header", "limit");
    for (i = 0; i < 8; i++) buf[i] = 0xff;
    write_bytes(path, buf, 8 + header_len + 16);
    check_corrupt(path, "2^64 - 1 header", "limit");
    /* truncated data */
    for (i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)header_len >> (8 * i));
    write_bytes(path, buf, 8 + header_len + 12);
    check_corrupt(path, "truncated data", "not a range");
    /* padding must be spaces, not NULs */
    for (i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)(header_len + 4) >> (8 * i));
    memset(buf + 8 + header_len, 0, 4 + 16);
    write_bytes(path, buf, 8 + header_len + 4 + 16);
    check_corrupt(path, "NUL padding", "only spaces");
}

/* A small generator of its own, so the fuzz cases are the same on every run. */
static uint64_t fuzz_state = 0x2545F4914F6CDD1Dull;

static uint32_t fuzz_next(void)
{
    fuzz_state ^= fuzz_state << 13;
    fuzz_state ^= fuzz_state >> 7;
    fuzz_state ^= fuzz_state << 17;
    return (uint32_t)(fuzz_state >> 16);
}

static void test_random_damage_never_crashes_or_leaks(void)
{
    int64_t s23[2] = {2, 3}, s4[1] = {4};
    const char *good = path_in("fuzz_good.safetensors"), *bad = path_in("fuzz_bad.safetensors");
    AcStateDict *dict = ac_state_dict_new();
    AcTensor *a = ac_randn(s23, 2), *b = ac_randn(s4, 1), *c = ac_full(NULL, 0, 1.0f);
    AcMemStats before;
    unsigned char *original, *damaged;
    size_t n, i, header_end = 8;
    int round, loaded = 0, rejected = 0, other = 0;
    ac_state_dict_set(dict, "a.weight", a);
    ac_state_dict_set(dict, "b \"q\"", b);
    ac_state_dict_set(dict, "c", c);
    CHECK(ac_save_safetensors(dict, good) == AC_OK);
    original = read_bytes(good, &n);
    damaged = malloc(n);
    CHECK(original && damaged && n > 8);
    if (!original || !damaged) return;
    for (i = 0; i < 8; i++) header_end += (size_t)original[i] << (8 * i);
    before = stats();
    for (round = 0; round < 3000 + (int)n; round++) {
        size_t len = n;
        AcStateDict *back;
        memcpy(damaged, original, n);
        if (round < (int)n) {
            len = (size_t)round;                      /* every truncation */
        } else {
            int flips = 1 + (int)(fuzz_next() % 4), f;
            for (f = 0; f < flips; f++) {
                /* mostly inside the header, where the parser works */
                size_t at = fuzz_next() % 4 ? fuzz_next() % header_end : fuzz_next() % n;
                damaged[at] = fuzz_next() % 2 ? (unsigned char)(damaged[at] ^ (1u << (fuzz_next() % 8)))
                                              : (unsigned char)fuzz_next();
            }
            if (fuzz_next() % 8 == 0) len = fuzz_next() % n;
        }
        write_bytes(bad, damaged, len);
        back = ac_load_safetensors(bad);
        if (back) {
            loaded++;
            for (i = 0; i < (size_t)ac_state_dict_size(back); i++)
                CHECK(ac_state_dict_tensor(back, (int)i)->scope_depth == 0);
            ac_state_dict_free(back);
        } else if (ac_last_error_code() == AC_ERR_FORMAT) {
            rejected++;
        } else {
            other++;
            fprintf(stderr, "  fuzz round %d: %s\n", round, ac_last_error());
        }
    }
    CHECK(other == 0);
    CHECK(rejected > 0 && loaded > 0);   /* flips in the data bytes still load */
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    CHECK(stats().live_tensors == before.live_tensors);
    free(original);
    free(damaged);
    ac_state_dict_free(dict);
    ac_tensor_free(a);
    ac_tensor_free(b);
    ac_tensor_free(c);
}

/* ---- I/O errors, replacing files, memory limit ---------------------------- */

static void test_io_errors_name_the_path_and_leave_no_temp_files(void)
{
    int64_t n = 3;
    AcTensor *t = ac_full(&n, 1, 2.0f);
    AcStateDict *dict = ac_state_dict_new();
    const char *missing = path_in("no_such_file.safetensors");
    char unwritable[600];
    ac_state_dict_set(dict, "t", t);

    CHECK(ac_load_safetensors(missing) == NULL);
    CHECK(ac_last_error_code() == AC_ERR_IO);
    CHECK(strstr(ac_last_error(), missing) && strstr(ac_last_error(), "No such file"));

    CHECK(ac_load_safetensors(test_dir) == NULL);   /* a directory */
    CHECK(ac_last_error_code() == AC_ERR_IO);

    snprintf(unwritable, sizeof unwritable, "%s/no_such_dir/x.safetensors", test_dir);
    CHECK(ac_save_safetensors(dict, unwritable) == AC_ERR_IO);
    CHECK(strstr(ac_last_error(), unwritable) && strstr(ac_last_error(), "No such file"));

    /* the target is a directory: the rename fails and the temp file goes */
    CHECK(mkdir(path_in("a_dir.safetensors"), 0700) == 0);
    CHECK(ac_save_safetensors(dict, path_in("a_dir.safetensors")) == AC_ERR_IO);
    CHECK(files_left_with(".tmp-") == 0);
    rmdir(path_in("a_dir.safetensors"));

    ac_state_dict_free(dict);
    ac_tensor_free(t);
}

static void test_save_replaces_an_existing_file(void)
{
    int64_t n = 4;
    AcTensor *first = ac_full(&n, 1, 1.0f), *second = ac_full(&n, 1, 9.0f), *got;
    AcStateDict *dict = ac_state_dict_new(), *back;
    const char *path = path_in("replaced.safetensors");
    ac_state_dict_set(dict, "t", first);
    CHECK(ac_save_safetensors(dict, path) == AC_OK);
    ac_state_dict_set(dict, "t", second);
    ac_state_dict_set(dict, "u", first);
    CHECK(ac_save_safetensors(dict, path) == AC_OK);
    back = ac_load_safetensors(path);
    CHECK(back && ac_state_dict_size(back) == 2);
    got = back ? ac_state_dict_get(back, "t") : NULL;
    CHECK(got && got->data[3] == 9.0f);
    CHECK(files_left_with(".tmp-") == 0);
    ac_state_dict_free(back);
    ac_state_dict_free(dict);
    ac_tensor_free(first);
    ac_tensor_free(second);
}

static void test_memory_limit_fails_a_load_cleanly(void)
{
    int64_t n = 100000;   /* many chunks of the writer's buffer */
    AcTensor *t = ac_arange(0, (double)n, 1);
    AcStateDict *dict = ac_state_dict_new(), *back;
    const char *path = path_in("big.safetensors");
    AcMemStats before;
    ac_state_dict_set(dict, "big", t);
    CHECK(ac_save_safetensors(dict, path) == AC_OK);
    before = stats();
    ac_set_memory_limit(before.bytes_in_use + 200000);
    CHECK(ac_load_safetensors(path) == NULL);
    CHECK(ac_last_error_code() == AC_ERR_MEMORY);
    ac_set_memory_limit(0);
    CHECK(stats().bytes_in_use == before.bytes_in_use);
    back = ac_load_safetensors(path);
    CHECK(back && bits_equal(ac_state_dict_tensor(back, 0), t));
    ac_state_dict_free(back);
    ac_state_dict_free(dict);
    ac_tensor_free(t);
}

static void test_save_refuses_a_header_no_reader_accepts(void)
{
    size_t n = 100000001;
    char *name = malloc(n + 1);
    AcTensor *t = ac_full(NULL, 0, 1.0f);
    AcStateDict *dict = ac_state_dict_new();
    const char *path = path_in("huge_header.safetensors");
    CHECK(name != NULL);
    if (!name) return;
    memset(name, 'n', n);
    name[n] = '\0';
    CHECK(ac_state_dict_set(dict, name, t) == AC_OK);
    free(name);
    CHECK(ac_save_safetensors(dict, path) == AC_ERR_ARG);
    CHECK(strstr(ac_last_error(), "header") != NULL);
    CHECK(files_left_with("huge_header") == 0);
    ac_state_dict_free(dict);
    ac_tensor_free(t);
}

static void remove_test_dir(void)
{
    DIR *dir = opendir(test_dir);
    struct dirent *e;
    if (!dir) return;
    while ((e = readdir(dir)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) remove(path_in(e->d_name));
    closedir(dir);
    rmdir(test_dir);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(test_dir, sizeof test_dir, "%s/ac_safetensors_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(test_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_round_trip_keeps_names_shapes_values_and_order);
    RUN(test_saved_bytes_are_the_safetensors_layout);
    RUN(test_empty_dict_round_trips);
    RUN(test_state_dict_holds_references_and_root_copies);
    RUN(test_state_dict_rejects_bad_arguments);
    RUN(test_load_accepts_any_valid_header_layout);
    RUN(test_loaded_tensors_live_at_root_inside_a_scope);
    RUN(test_corrupt_headers_fail_with_format_errors);
    RUN(test_bad_lengths_and_truncation_fail_with_format_errors);
    RUN(test_random_damage_never_crashes_or_leaks);
    RUN(test_io_errors_name_the_path_and_leave_no_temp_files);
    RUN(test_save_replaces_an_existing_file);
    RUN(test_memory_limit_fails_a_load_cleanly);
    RUN(test_save_refuses_a_header_no_reader_accepts);
    remove_test_dir();
    return TEST_REPORT();
}
