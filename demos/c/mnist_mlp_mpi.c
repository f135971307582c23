/*
 * mnist_mlp_mpi.c - the MLP of demos/c/mnist_mlp.c (784-128-10, Adam 1e-3)
 * trained data-parallel from C: libac for the model, MPI_Allreduce for the
 * gradients. libac links no MPI; this program does.
 *
 *     mpiexec -n 2 build/demos/mnist_mlp_mpi [data/MNIST/raw] [epochs] [batch per rank]
 *
 * Built by the Makefile when mpicc is found (the mpich wheel brings one). Every
 * rank draws the same shuffled order each epoch and takes its own slice of
 * each global batch (ranks x batch images); after backward the four gradients
 * are copied into one flat buffer (ac_grads_to_flat), summed over the ranks in
 * place by one MPI_Allreduce, and copied back divided by the number of ranks
 * (ac_grads_from_flat), so N ranks of batch b take the steps one process of
 * batch N*b would. Rank 0's initial weights are broadcast first. Rank 0 prints.
 */
#include "mnist.h"

#include <mpi.h>
#include <stdlib.h>

#define HIDDEN 128
#define CLASSES 10
#define N_PARAMS 4

typedef struct {
    AcTensor *param, *exp_avg, *exp_avg_sq;
} AdamSlot;

static int rank, ranks;

static void die(const char *what)
{
    fprintf(stderr, "mnist_mlp_mpi (rank %d): %s: %s\n", rank, what, ac_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);   /* MPI_Abort does not return */
}

static AcTensor *forward(AcTensor *const *p, const AcTensor *x)
{
    return ac_linear(ac_relu(ac_linear(x, p[0], p[1])), p[2], p[3]);
}

/* Correct predictions over the test set, each rank counting its own share. */
static int64_t count_correct(AcTensor *const *params, const AcTensor *images, const AcTensor *labels,
                             float *x, float *y, int64_t batch)
{
    int64_t n_images = images->shape[0], correct = 0, start, i;
    int previous = ac_set_grad_enabled(0);
    for (start = (int64_t)rank * batch; start < n_images; start += (int64_t)ranks * batch) {
        int64_t n = n_images - start < batch ? n_images - start : batch;
        int64_t shape[2] = {n, PIXELS};
        AcCheckpoint scope = ac_mem_checkpoint();
        AcTensor *predicted;
        mnist_batch(images, labels, NULL, start, n, x, y);
        predicted = ac_argmax(forward(params, ac_tensor_from_data(x, shape, 2)), 1, 0);
        if (!predicted) die("evaluate");
        for (i = 0; i < n; i++) correct += ((int64_t *)predicted->data)[i] == (int64_t)y[i];
        ac_mem_restore(scope);
    }
    ac_set_grad_enabled(previous);
    MPI_Allreduce(MPI_IN_PLACE, &correct, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return correct;
}

/* The gradients' mean over the ranks, through flat (which holds them all). */
static void average_gradients(AcTensor *const *params, AcTensor *flat)
{
    if (ac_grads_to_flat(params, N_PARAMS, flat) != AC_OK) die("grads_to_flat");
    MPI_Allreduce(MPI_IN_PLACE, flat->data, (int)flat->size, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (ac_grads_from_flat(params, N_PARAMS, 1.0f / (float)ranks, flat) != AC_OK) die("grads_from_flat");
}

int main(int argc, char **argv)
{
    const char *folder = argc > 1 ? argv[1] : "data/MNIST/raw";
    int epochs = argc > 2 ? atoi(argv[2]) : 5, epoch, i;
    int64_t batch = argc > 3 ? atoll(argv[3]) : 64, n_train, n_test, start, step = 0, total = 0;
    AcTensor *train_images, *train_labels, *test_images, *test_labels, *flat;
    AcTensor *params[N_PARAMS];
    AdamSlot adam[N_PARAMS];
    int64_t *order;
    float *x, *y, checksum[2];
    uint64_t random_state = 0x9E3779B97F4A7C15ULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (epochs < 1 || batch < 1) {
        if (rank == 0) fprintf(stderr, "usage: mnist_mlp_mpi [folder] [epochs >= 1] [batch per rank >= 1]\n");
        MPI_Finalize();
        return 2;
    }
    train_images = mnist_read("mnist_mlp_mpi", folder, "train-images-idx3-ubyte");
    train_labels = mnist_read("mnist_mlp_mpi", folder, "train-labels-idx1-ubyte");
    test_images = mnist_read("mnist_mlp_mpi", folder, "t10k-images-idx3-ubyte");
    test_labels = mnist_read("mnist_mlp_mpi", folder, "t10k-labels-idx1-ubyte");
    if (!train_images || !train_labels || !test_images || !test_labels) MPI_Abort(MPI_COMM_WORLD, 1);
    n_train = train_images->shape[0];
    n_test = test_images->shape[0];
    order = malloc((size_t)n_train * sizeof *order);
    x = malloc((size_t)batch * PIXELS * sizeof *x);
    y = malloc((size_t)batch * sizeof *y);
    if (!order || !x || !y) die("out of memory");

    ac_manual_seed((uint64_t)rank);   /* different everywhere until rank 0's are broadcast */
    params[0] = linear_parameter((int64_t[]){HIDDEN, PIXELS}, 2, PIXELS);
    params[1] = linear_parameter((int64_t[]){HIDDEN}, 1, PIXELS);
    params[2] = linear_parameter((int64_t[]){CLASSES, HIDDEN}, 2, HIDDEN);
    params[3] = linear_parameter((int64_t[]){CLASSES}, 1, HIDDEN);
    for (i = 0; i < N_PARAMS; i++) {
        if (!params[i]) die("parameter");
        MPI_Bcast(params[i]->data, (int)params[i]->size, MPI_FLOAT, 0, MPI_COMM_WORLD);
        adam[i].param = params[i];
        adam[i].exp_avg = ac_tensor_new(params[i]->shape, params[i]->ndim);
        adam[i].exp_avg_sq = ac_tensor_new(params[i]->shape, params[i]->ndim);
        if (!adam[i].exp_avg || !adam[i].exp_avg_sq) die("adam state");
        total += params[i]->size;
    }
    flat = ac_tensor_new(&total, 1);
    if (!flat) die("flat gradient buffer");

    for (epoch = 1; epoch <= epochs; epoch++) {
        double began = seconds(), loss_sum = 0.0, took;
        int64_t steps = 0, correct, global_batch = batch * ranks;
        mnist_shuffle(order, n_train, &random_state);
        /* Whole global batches only, so every rank takes every step. */
        for (start = 0; start + global_batch <= n_train; start += global_batch) {
            int64_t shape[2] = {batch, PIXELS};
            AcCheckpoint scope = ac_mem_checkpoint();
            AcTensor *loss;
            mnist_batch(train_images, train_labels, order, start + rank * batch, batch, x, y);
            loss = ac_cross_entropy(forward(params, ac_tensor_from_data(x, shape, 2)),
                                    ac_tensor_from_data(y, &batch, 1), AC_REDUCTION_MEAN, 0.0f);
            for (i = 0; i < N_PARAMS; i++) ac_tensor_zero_grad(params[i]);
            if (!loss || ac_backward(loss) != AC_OK) die("training step");
            average_gradients(params, flat);
            step++;
            for (i = 0; i < N_PARAMS; i++)
                if (ac_adam_step(adam[i].param, adam[i].exp_avg, adam[i].exp_avg_sq, step, 1e-3f,
                                 0.9f, 0.999f, 1e-8f, 0.0f, 0) != AC_OK)
                    die("adam step");
            loss_sum += loss->data[0];
            steps++;
            ac_mem_restore(scope);
        }
        MPI_Allreduce(MPI_IN_PLACE, &loss_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        took = seconds() - began;
        correct = count_correct(params, test_images, test_labels, x, y, batch);
        if (rank == 0)
            printf("epoch %d: loss %.4f  test accuracy %.2f%%  (%d ranks, %.1f s, %.0f samples/s)\n",
                   epoch, loss_sum / (double)(steps * ranks), 100.0 * (double)correct / (double)n_test,
                   ranks, took, (double)(steps * global_batch) / took);
    }

    /* Every rank must hold the same weights: compare the sums of their squares. */
    if (ac_params_to_flat(params, N_PARAMS, flat) != AC_OK) die("params_to_flat");
    checksum[0] = 0.0f;
    for (start = 0; start < total; start++) checksum[0] += flat->data[start] * flat->data[start];
    checksum[1] = -checksum[0];
    MPI_Allreduce(MPI_IN_PLACE, checksum, 2, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("weights: sum of squares %.6f on every rank: %s\n", checksum[0],
               checksum[0] == -checksum[1] ? "yes" : "no");

    for (i = 0; i < N_PARAMS; i++) {
        ac_tensor_free(params[i]);
        ac_tensor_free(adam[i].exp_avg);
        ac_tensor_free(adam[i].exp_avg_sq);
    }
    ac_tensor_free(flat);
    ac_tensor_free(train_images);
    ac_tensor_free(train_labels);
    ac_tensor_free(test_images);
    ac_tensor_free(test_labels);
    free(order);
    free(x);
    free(y);
    MPI_Finalize();
    return 0;
}
