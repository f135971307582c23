/* test_integer_ops.c - type promotion (ac_result_type) and ac_binary's integer
   and bool path: exact int64, wrapping, uint8, bool logic, Python's division
   signs, integer pow, shifts, and its errors. */
#include "ac.h"
#include "test.h"

static int64_t *i64(const AcTensor *t) { return (int64_t *)(void *)t->data; }
static uint8_t *u8(const AcTensor *t) { return (uint8_t *)(void *)t->data; }

static void test_result_type(void)
{
    CHECK(ac_result_type(AC_INT64, AC_KIND_TENSOR, AC_FLOAT32, AC_KIND_SCALAR) == AC_FLOAT32);
    CHECK(ac_result_type(AC_UINT8, AC_KIND_TENSOR, AC_INT64, AC_KIND_SCALAR) == AC_UINT8);
    CHECK(ac_result_type(AC_UINT8, AC_KIND_TENSOR, AC_INT64, AC_KIND_ZERO_DIM) == AC_UINT8);
    CHECK(ac_result_type(AC_UINT8, AC_KIND_TENSOR, AC_INT64, AC_KIND_TENSOR) == AC_INT64);
    CHECK(ac_result_type(AC_BOOL, AC_KIND_TENSOR, AC_INT64, AC_KIND_SCALAR) == AC_INT64);
    CHECK(ac_result_type(AC_BOOL, AC_KIND_TENSOR, AC_BOOL, AC_KIND_SCALAR) == AC_BOOL);
    CHECK(ac_result_type(AC_INT64, AC_KIND_TENSOR, AC_FLOAT32, AC_KIND_ZERO_DIM) == AC_FLOAT32);
    CHECK(ac_result_type(AC_FLOAT32, AC_KIND_ZERO_DIM, AC_INT64, AC_KIND_SCALAR) == AC_FLOAT32);
    CHECK(ac_result_type(AC_UINT8, AC_KIND_TENSOR, AC_INT8, AC_KIND_TENSOR) == AC_ERR_DTYPE);
    CHECK(ac_result_type(AC_UINT8, AC_KIND_TENSOR, AC_UINT8, AC_KIND_SCALAR) == AC_ERR_ARG);
    CHECK(ac_result_type(9, AC_KIND_TENSOR, AC_INT64, AC_KIND_TENSOR) == AC_ERR_DTYPE);
    CHECK(ac_result_type(AC_INT64, 5, AC_INT64, AC_KIND_TENSOR) == AC_ERR_ARG);
}

static void test_int64_arithmetic_is_exact(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    int64_t s[1] = {4}, one[1] = {1}, v[4] = {((int64_t)1 << 40) + 1, INT64_MAX, -7, INT64_MIN};
    int64_t d[4] = {1, 1, 2, -1};
    AcTensor *a = ac_tensor_from_typed(v, s, 1, AC_INT64), *b = ac_tensor_from_typed(d, s, 1, AC_INT64);
    AcTensor *o = ac_tensor_from_typed(one, NULL, 0, AC_INT64), *r;
    r = ac_mul(a, o);
    CHECK(r && r->dtype == AC_INT64 && i64(r)[0] == ((int64_t)1 << 40) + 1 && i64(r)[1] == INT64_MAX);
    r = ac_binary(AC_OP_ADD, a, o, AC_SCALAR_B);
    CHECK(r && i64(r)[1] == INT64_MIN && i64(r)[0] == ((int64_t)1 << 40) + 2);   /* wraps */
    r = ac_binary(AC_OP_FLOOR_DIVIDE, a, b, 0);
    CHECK(r && i64(r)[2] == -4 && i64(r)[3] == INT64_MIN);   /* -7 // 2, INT64_MIN // -1 wraps */
    r = ac_binary(AC_OP_REMAINDER, a, b, 0);
    CHECK(r && i64(r)[2] == 1 && i64(r)[3] == 0);
    r = ac_binary(AC_OP_DIV, a, b, 0);
    CHECK(r && r->dtype == AC_FLOAT32 && r->data[2] == -3.5f);
    r = ac_neg(a);
    CHECK(r && r->dtype == AC_INT64 && i64(r)[2] == 7 && i64(r)[3] == INT64_MIN);
    r = ac_compare(a, ac_binary(AC_OP_SUB, a, o, AC_SCALAR_B), AC_GT);
    CHECK(r && r->dtype == AC_BOOL && u8(r)[0] && u8(r)[1] && u8(r)[2] && !u8(r)[3]);
    r = ac_binary(AC_OP_POW, b, ac_tensor_from_typed(d, s, 1, AC_INT64), 0);
    CHECK(r && i64(r)[2] == 4 && i64(r)[3] == -1);           /* 2**2, (-1)**-1 */
    r = ac_binary(AC_OP_RSHIFT, a, b, 0);
    CHECK(r && i64(r)[2] == -2);                             /* -7 >> 2, arithmetic */
    r = ac_binary(AC_OP_FLOOR_DIVIDE, a, ac_binary(AC_OP_SUB, b, b, 0), 0);
    CHECK(!r && ac_last_error_code() == AC_ERR_ARG);         /* integer division by zero */
    r = ac_binary(AC_OP_POW, a, ac_neg(o), AC_SCALAR_B);
    CHECK(!r && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_binary(99, a, b, 0) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_binary(AC_OP_ADD, a, b, AC_SCALAR_B) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(!ac_binary(AC_OP_ADD, NULL, b, 0) && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_mem_restore(cp) == AC_OK);
}

static void test_uint8_and_bool(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    int64_t s[1] = {2}, hundred[1] = {100};
    uint8_t u[2] = {200, 1}, p[2] = {1, 1}, q[2] = {1, 0};
    AcTensor *a = ac_tensor_from_typed(u, s, 1, AC_UINT8), *h = ac_tensor_from_typed(hundred, NULL, 0, AC_INT64);
    AcTensor *x = ac_tensor_from_typed(p, s, 1, AC_BOOL), *y = ac_tensor_from_typed(q, s, 1, AC_BOOL), *r;
    r = ac_binary(AC_OP_ADD, a, h, AC_SCALAR_B);
    CHECK(r && r->dtype == AC_UINT8 && u8(r)[0] == 44 && u8(r)[1] == 101);
    r = ac_add(a, h);   /* a 0-d int64 tensor: uint8 still decides */
    CHECK(r && r->dtype == AC_UINT8 && u8(r)[0] == 44);
    r = ac_add(x, y);
    CHECK(r && r->dtype == AC_BOOL && u8(r)[0] == 1 && u8(r)[1] == 1);
    r = ac_mul(x, y);
    CHECK(r && r->dtype == AC_BOOL && u8(r)[0] == 1 && u8(r)[1] == 0);
    r = ac_bitwise_not(y);
    CHECK(r && r->dtype == AC_BOOL && u8(r)[0] == 0 && u8(r)[1] == 1);
    CHECK(!ac_sub(x, y) && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(!ac_neg(x) && ac_last_error_code() == AC_ERR_DTYPE);
    r = ac_where_typed(x, a, h, AC_SCALAR_B);
    CHECK(r && r->dtype == AC_UINT8 && u8(r)[0] == 200 && u8(r)[1] == 1);
    CHECK(ac_mem_restore(cp) == AC_OK);
}

static void test_orders_sums_and_products(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    int64_t s[2] = {2, 2}, v[4] = {((int64_t)1 << 40) + 1, (int64_t)1 << 40, INT64_MIN, 3};
    AcTensor *a = ac_tensor_from_typed(v, s, 2, AC_INT64), *idx = NULL, *r;
    int dim1 = 1;
    r = ac_sort(a, 1, 0, &idx);
    CHECK(r && r->dtype == AC_INT64 && i64(r)[0] == (int64_t)1 << 40 && i64(r)[1] == ((int64_t)1 << 40) + 1);
    CHECK(idx && i64(idx)[0] == 1 && i64(idx)[2] == 0);
    r = ac_topk(a, 1, 0, 1, &idx);
    CHECK(r && i64(r)[0] == ((int64_t)1 << 40) + 1 && i64(r)[1] == (int64_t)1 << 40);
    r = ac_cumsum(a, 1);
    CHECK(r && r->dtype == AC_INT64 && i64(r)[1] == ((int64_t)1 << 41) + 1 && i64(r)[3] == INT64_MIN + 3);
    r = ac_max(a, NULL, 0, 0);
    CHECK(r && r->dtype == AC_INT64 && r->ndim == 0 && i64(r)[0] == ((int64_t)1 << 40) + 1);
    r = ac_min(a, &dim1, 1, 0);
    CHECK(r && r->ndim == 1 && i64(r)[0] == (int64_t)1 << 40 && i64(r)[1] == INT64_MIN);
    r = ac_argmax(a, 0, 0);
    CHECK(r && i64(r)[0] == 0 && i64(r)[1] == 0);
    r = ac_matmul(a, a);   /* wraps as int64 does */
    CHECK(r && r->dtype == AC_INT64 &&
          i64(r)[1] == (int64_t)((uint64_t)(((int64_t)1 << 40) + 1) * ((uint64_t)1 << 40) + ((uint64_t)1 << 40) * 3u));
    CHECK(!ac_matmul(a, ac_to_dtype(a, AC_FLOAT32)) && ac_last_error_code() == AC_ERR_DTYPE);
    CHECK(ac_mem_restore(cp) == AC_OK);
}

int main(void)
{
    RUN(test_result_type);
    RUN(test_int64_arithmetic_is_exact);
    RUN(test_uint8_and_bool);
    RUN(test_orders_sums_and_products);
    return TEST_REPORT();
}
