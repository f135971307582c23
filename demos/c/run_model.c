/*
 * run_model.c - runs the MNIST CNN that demos/mnist_cnn.py exports (a program
 * file: its forward graph and weights, written by ac.export) on the MNIST test
 * set, and prints the test accuracy the Python demo prints last: the same
 * preprocessing, the same batches, the same kernels. No layer is written here;
 * the program says what to run.
 *
 *     build/demos/run_model [data/mnist_cnn.acprog] [data/MNIST/raw]
 */
#include "mnist.h"

#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "data/mnist_cnn.acprog";
    const char *folder = argc > 2 ? argv[2] : "data/MNIST/raw";
    AcProgram *program = ac_program_load(path);
    AcTensor *images, *labels;
    int64_t shape[AC_MAX_DIMS], batch, n_images, correct = 0, start, p;
    int dtype;
    float *x;
    if (!program) {
        fprintf(stderr, "run_model: %s\n(run demos/mnist_cnn.py first)\n", ac_last_error());
        return 1;
    }
    if (ac_program_num_inputs(program) != 1 || ac_program_input_info(program, 0, &dtype, shape) != 4 ||
        dtype != AC_FLOAT32 || shape[1] * shape[2] * shape[3] != PIXELS) {
        fprintf(stderr, "run_model: %s does not take a batch of 28x28 images\n", path);
        return 1;
    }
    batch = shape[0];
    if (!(x = malloc((size_t)(batch * PIXELS) * sizeof *x))) {
        fprintf(stderr, "run_model: out of memory\n");
        return 1;
    }
    images = mnist_read("run_model", folder, "t10k-images-idx3-ubyte");
    labels = mnist_read("run_model", folder, "t10k-labels-idx1-ubyte");
    if (!images || !labels) return 1;
    n_images = images->shape[0];

    for (start = 0; start < n_images; start += batch) {
        int64_t n = n_images - start < batch ? n_images - start : batch;
        AcCheckpoint scope = ac_mem_checkpoint();
        AcTensor *input, *logits, *predicted;
        mnist_batch(images, labels, NULL, start, n, x, NULL);
        /* a short last batch is padded with zeros: in eval mode each image's
           logits depend on that image alone */
        memset(x + n * PIXELS, 0, (size_t)((batch - n) * PIXELS) * sizeof *x);
        input = ac_tensor_from_data(x, shape, 4);
        if (!input || ac_program_run(program, &input, 1, &logits, 1) != AC_OK ||
            !(predicted = ac_argmax(logits, 1, 0))) {
            fprintf(stderr, "run_model: %s\n", ac_last_error());
            return 1;
        }
        for (p = 0; p < n; p++)   /* argmax gives int64 indices; IDX labels read as floats */
            correct += ((int64_t *)predicted->data)[p] == (int64_t)labels->data[start + p];
        ac_mem_restore(scope);
    }
    printf("test accuracy: %.2f%% (%lld/%lld)\n", 100.0 * (double)correct / (double)n_images,
           (long long)correct, (long long)n_images);

    ac_program_free(program);
    ac_tensor_free(images);
    ac_tensor_free(labels);
    free(x);
    return 0;
}
