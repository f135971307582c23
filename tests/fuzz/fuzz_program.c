/* fuzz_program.c - ac_program_load on any bytes: a program that then runs on
   zeros of its input shapes, or a clean read error; never a crash, an overread
   or a leak. The memory limit bounds what a file may claim a run needs. */
#include "fuzz.h"

#define MAX_TENSORS 8

static void run_on_zeros(AcProgram *p)
{
    AcTensor *in[MAX_TENSORS], *out[MAX_TENSORS];
    int64_t shape[AC_MAX_DIMS];
    int n_in = ac_program_num_inputs(p), n_out = ac_program_num_outputs(p), i, dtype, ndim;
    if (n_in > MAX_TENSORS || n_out > MAX_TENSORS) return;
    for (i = 0; i < n_in; i++) {
        ndim = ac_program_input_info(p, i, &dtype, shape);
        FUZZ_CHECK(ndim >= 0);
        in[i] = ac_tensor_new_typed(shape, ndim, dtype);
        FUZZ_CHECK(in[i] != NULL);
    }
    /* the loader ran it on zeros already: a failure now is a bug */
    FUZZ_CHECK(ac_program_run(p, in, n_in, out, n_out) == AC_OK);
    for (i = 0; i < n_out; i++) ac_tensor_free(out[i]);
    for (i = 0; i < n_in; i++) ac_tensor_free(in[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzMemory before;
    AcProgram *p;
    FUZZ_CHECK(ac_set_memory_limit(64 << 20) == AC_OK);
    before = fuzz_memory();
    p = ac_program_load(fuzz_write(data, size));
    if (p) {
        run_on_zeros(p);
        FUZZ_CHECK(ac_program_free(p) == AC_OK);
    } else {
        fuzz_expect_read_error();
    }
    fuzz_memory_back_to(before);
    return 0;
}
