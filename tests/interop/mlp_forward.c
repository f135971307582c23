/*
 * mlp_forward.c - the C side of tests/test_c_interop.py: load an MLP's weights
 * that Python saved, run the same forward pass, write the outputs.
 *
 *   mlp_forward weights.safetensors input.f32 rows features output.f32
 */
#include <ac.h>

#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what)
{
    fprintf(stderr, "%s: %s\n", what, ac_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    AcStateDict *weights;
    AcTensor *x, *h, *y;
    int64_t shape[2];
    float *input;
    FILE *f;
    if (argc != 6) return 2;
    shape[0] = atoll(argv[3]);
    shape[1] = atoll(argv[4]);
    input = malloc((size_t)(shape[0] * shape[1]) * sizeof(float));
    f = fopen(argv[2], "rb");
    if (!input || !f || fread(input, sizeof(float), (size_t)(shape[0] * shape[1]), f) !=
                            (size_t)(shape[0] * shape[1]))
        return 3;
    fclose(f);
    weights = ac_load_safetensors(argv[1]);
    if (!weights) return fail("load");
    x = ac_tensor_from_data(input, shape, 2);
    h = ac_relu(ac_linear(x, ac_state_dict_get(weights, "0.weight"), ac_state_dict_get(weights, "0.bias")));
    y = h ? ac_linear(h, ac_state_dict_get(weights, "2.weight"), ac_state_dict_get(weights, "2.bias")) : NULL;
    if (!y) return fail("forward");
    f = fopen(argv[5], "wb");
    if (!f || fwrite(y->data, sizeof(float), (size_t)y->size, f) != (size_t)y->size) return 4;
    fclose(f);
    ac_tensor_free(x);
    ac_tensor_free(h);
    ac_tensor_free(y);
    ac_state_dict_free(weights);
    free(input);
    return 0;
}
