/*
 * predict.c - loads the weights demos/mnist_mlp.py saved (safetensors) and
 * prints their MNIST test accuracy, which matches the Python demo's last line:
 * the same file, the same preprocessing, the same kernels. A quantized file
 * (ac.quantization.quantize_dynamic's state_dict: int8 weights with their
 * scales) runs on the int8 layers, as the quantized Python model does.
 *
 *     build/demos/predict [data/mnist_mlp.safetensors] [data/MNIST/raw]
 */
#include "mnist.h"

#include <stdlib.h>

#define BATCH 1000

static AcTensor *weight(const AcStateDict *weights, const char *name)
{
    AcTensor *t = ac_state_dict_get(weights, name);
    if (!t) {
        fprintf(stderr, "predict: the weights have no tensor '%s'\n", name);
        exit(1);
    }
    return t;
}

/* One Linear layer, float (weight, bias) or int8 (packed), named prefix.weight etc. */
typedef struct {
    AcTensor *weight, *bias;
    AcQLinear *packed;
} Layer;

static Layer layer(const AcStateDict *weights, const char *prefix)
{
    char name[64];
    Layer l = {NULL, NULL, NULL};
    snprintf(name, sizeof name, "%s.weight", prefix);
    l.weight = weight(weights, name);
    snprintf(name, sizeof name, "%s.bias", prefix);
    l.bias = weight(weights, name);
    if (l.weight->dtype == AC_INT8) {
        snprintf(name, sizeof name, "%s.weight_scale", prefix);
        l.packed = ac_qlinear_new(l.weight, weight(weights, name), l.bias);
        if (!l.packed) {
            fprintf(stderr, "predict: %s\n", ac_last_error());
            exit(1);
        }
    }
    return l;
}

static AcTensor *forward(const Layer *l, const AcTensor *x)
{
    return l->packed ? ac_qlinear_forward(l->packed, x) : ac_linear(x, l->weight, l->bias);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "data/mnist_mlp.safetensors";
    const char *folder = argc > 2 ? argv[2] : "data/MNIST/raw";
    AcStateDict *weights = ac_load_safetensors(path);
    AcTensor *images, *labels;
    Layer l1, l2;
    int64_t n_images, correct = 0, start, p;
    float *x = malloc((size_t)BATCH * PIXELS * sizeof *x);
    if (!weights) {
        fprintf(stderr, "predict: %s\n(run demos/mnist_mlp.py first)\n", ac_last_error());
        return 1;
    }
    if (!x) {
        fprintf(stderr, "predict: out of memory\n");
        return 1;
    }
    /* nn.Sequential(Linear(784, 128), ReLU(), Linear(128, 10)) names them so */
    l1 = layer(weights, "0");
    l2 = layer(weights, "2");
    images = mnist_read("predict", folder, "t10k-images-idx3-ubyte");
    labels = mnist_read("predict", folder, "t10k-labels-idx1-ubyte");
    if (!images || !labels) return 1;
    n_images = images->shape[0];

    ac_set_grad_enabled(0);
    for (start = 0; start < n_images; start += BATCH) {
        int64_t n = n_images - start < BATCH ? n_images - start : BATCH, shape[2] = {0, PIXELS};
        AcCheckpoint scope = ac_mem_checkpoint();
        AcTensor *logits, *predicted;
        mnist_batch(images, labels, NULL, start, n, x, NULL);
        shape[0] = n;
        logits = forward(&l2, ac_relu(forward(&l1, ac_tensor_from_data(x, shape, 2))));
        predicted = ac_argmax(logits, 1, 0);
        if (!predicted) {
            fprintf(stderr, "predict: %s\n", ac_last_error());
            return 1;
        }
        for (p = 0; p < n; p++)   /* argmax gives int64 indices; IDX labels read as floats */
            correct += ((int64_t *)predicted->data)[p] == (int64_t)labels->data[start + p];
        ac_mem_restore(scope);
    }
    printf("test accuracy%s: %.2f%% (%lld/%lld)\n", l1.packed ? " (int8)" : "",
           100.0 * (double)correct / (double)n_images, (long long)correct, (long long)n_images);
    ac_qlinear_free(l1.packed);
    ac_qlinear_free(l2.packed);

    ac_state_dict_free(weights);
    ac_tensor_free(images);
    ac_tensor_free(labels);
    free(x);
    return 0;
}
