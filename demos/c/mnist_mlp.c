/*
 * mnist_mlp.c - the MLP of demos/mnist_mlp.py (784-128-10, Adam 1e-3, batch
 * 64, 5 epochs) trained from C against libac, on the IDX files the Python
 * demo downloads.
 *
 *     build/demos/mnist_mlp [data/MNIST/raw] [epochs]
 *
 * Everything a step makes lives in its scope (ac_mem_checkpoint ... restore);
 * the parameters, their gradients and Adam's moments live at root.
 */
#include "mnist.h"

#include <stdlib.h>

#define HIDDEN 128
#define CLASSES 10
#define BATCH 64
#define EVAL_BATCH 1000

typedef struct {
    AcTensor *w1, *b1, *w2, *b2;
} Mlp;

typedef struct {
    AcTensor *param, *exp_avg, *exp_avg_sq;
} AdamSlot;

static void die(const char *what)
{
    fprintf(stderr, "mnist_mlp: %s: %s\n", what, ac_last_error());
    exit(1);
}

static AcTensor *forward(const Mlp *m, const AcTensor *x)
{
    AcTensor *hidden = ac_relu(ac_linear(x, m->w1, m->b1));
    return ac_linear(hidden, m->w2, m->b2);
}

/* Correct predictions over the set, in batches of EVAL_BATCH, without a graph. */
static int64_t count_correct(const Mlp *m, const AcTensor *images, const AcTensor *labels,
                             float *x, float *y)
{
    int64_t n_images = images->shape[0], correct = 0, start, i;
    int previous = ac_set_grad_enabled(0);
    for (start = 0; start < n_images; start += EVAL_BATCH) {
        int64_t n = n_images - start < EVAL_BATCH ? n_images - start : EVAL_BATCH;
        int64_t shape[2] = {n, PIXELS};
        AcCheckpoint scope = ac_mem_checkpoint();
        AcTensor *predicted;
        mnist_batch(images, labels, NULL, start, n, x, y);
        predicted = ac_argmax(forward(m, ac_tensor_from_data(x, shape, 2)), 1, 0);
        if (!predicted) die("evaluate");
        for (i = 0; i < n; i++) correct += ((int64_t *)predicted->data)[i] == (int64_t)y[i];
        ac_mem_restore(scope);
    }
    ac_set_grad_enabled(previous);
    return correct;
}

int main(int argc, char **argv)
{
    const char *folder = argc > 1 ? argv[1] : "data/MNIST/raw";
    int epochs = argc > 2 ? atoi(argv[2]) : 5, epoch, i;
    AcTensor *train_images = mnist_read("mnist_mlp", folder, "train-images-idx3-ubyte");
    AcTensor *train_labels = mnist_read("mnist_mlp", folder, "train-labels-idx1-ubyte");
    AcTensor *test_images = mnist_read("mnist_mlp", folder, "t10k-images-idx3-ubyte");
    AcTensor *test_labels = mnist_read("mnist_mlp", folder, "t10k-labels-idx1-ubyte");
    int64_t n_train, n_test, start, step = 0;
    int64_t *order;
    float *x = malloc((size_t)EVAL_BATCH * PIXELS * sizeof *x), *y = malloc(EVAL_BATCH * sizeof *y);
    uint64_t random_state = 0x9E3779B97F4A7C15ULL;
    AdamSlot adam[4];
    Mlp model;
    if (!train_images || !train_labels || !test_images || !test_labels) return 1;
    n_train = train_images->shape[0];
    n_test = test_images->shape[0];
    order = malloc((size_t)n_train * sizeof *order);
    if (!order || !x || !y) {
        fprintf(stderr, "mnist_mlp: out of memory\n");
        return 1;
    }

    ac_manual_seed(0);
    model.w1 = linear_parameter((int64_t[]){HIDDEN, PIXELS}, 2, PIXELS);
    model.b1 = linear_parameter((int64_t[]){HIDDEN}, 1, PIXELS);
    model.w2 = linear_parameter((int64_t[]){CLASSES, HIDDEN}, 2, HIDDEN);
    model.b2 = linear_parameter((int64_t[]){CLASSES}, 1, HIDDEN);
    if (!model.w1 || !model.b1 || !model.w2 || !model.b2) die("parameter");
    adam[0].param = model.w1;
    adam[1].param = model.b1;
    adam[2].param = model.w2;
    adam[3].param = model.b2;
    for (i = 0; i < 4; i++) {
        adam[i].exp_avg = ac_tensor_new(adam[i].param->shape, adam[i].param->ndim);
        adam[i].exp_avg_sq = ac_tensor_new(adam[i].param->shape, adam[i].param->ndim);
        if (!adam[i].exp_avg || !adam[i].exp_avg_sq) die("adam state");
    }

    for (epoch = 1; epoch <= epochs; epoch++) {
        double began = seconds(), loss_sum = 0.0, took;
        int64_t steps = 0, correct;
        mnist_shuffle(order, n_train, &random_state);
        for (start = 0; start < n_train; start += BATCH) {
            int64_t n = n_train - start < BATCH ? n_train - start : BATCH;
            int64_t shape[2] = {n, PIXELS};
            AcCheckpoint scope = ac_mem_checkpoint();
            AcTensor *inputs, *targets, *loss;
            mnist_batch(train_images, train_labels, order, start, n, x, y);
            inputs = ac_tensor_from_data(x, shape, 2);
            targets = ac_tensor_from_data(y, &n, 1);

            loss = ac_cross_entropy(forward(&model, inputs), targets, AC_REDUCTION_MEAN, 0.0f);
            for (i = 0; i < 4; i++) ac_tensor_zero_grad(adam[i].param);
            if (!loss || ac_backward(loss) != AC_OK) die("training step");
            step++;
            for (i = 0; i < 4; i++)
                if (ac_adam_step(adam[i].param, adam[i].exp_avg, adam[i].exp_avg_sq, step, 1e-3f,
                                 0.9f, 0.999f, 1e-8f, 0.0f, 0) != AC_OK)
                    die("adam step");
            loss_sum += loss->data[0];
            steps++;
            ac_mem_restore(scope);
        }
        took = seconds() - began;
        correct = count_correct(&model, test_images, test_labels, x, y);
        printf("epoch %d: loss %.4f  test accuracy %.2f%%  (%.1f s, %.0f samples/s)\n", epoch,
               loss_sum / (double)steps, 100.0 * (double)correct / (double)n_test, took,
               (double)n_train / took);
    }

    ac_tensor_free(model.w1);
    ac_tensor_free(model.b1);
    ac_tensor_free(model.w2);
    ac_tensor_free(model.b2);
    for (i = 0; i < 4; i++) {
        ac_tensor_free(adam[i].exp_avg);
        ac_tensor_free(adam[i].exp_avg_sq);
    }
    ac_tensor_free(train_images);
    ac_tensor_free(train_labels);
    ac_tensor_free(test_images);
    ac_tensor_free(test_labels);
    free(order);
    free(x);
    free(y);
    return 0;
}
