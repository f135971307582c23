"""mnist_ddp.py - the MLP of mnist_mlp.py (784-128-10, Adam 1e-3) trained
data-parallel over MPI ranks, written as one would with torch.distributed.

    python -m aicraft.distributed.run -n 2 demos/mnist_ddp.py --epochs 1
    mpiexec -n 2 python demos/mnist_ddp.py --epochs 1      # the runtime's own launcher

Each rank reads its share of every epoch (DistributedSampler) in batches of
--batch-size, and DistributedDataParallel averages the gradients over the ranks
after each backward, so every rank takes the same steps: N ranks of batch b
train as one process of batch N*b. Rank 0 fetches MNIST into --data first,
evaluates, prints and saves the weights (which demos/c/predict.c reads).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import aicraft as ac  # noqa: E402
import aicraft.distributed as dist  # noqa: E402
from aicraft import nn, optim  # noqa: E402
from aicraft.data import DataLoader, DistributedSampler, transforms  # noqa: E402
from aicraft.data.datasets import MNIST  # noqa: E402
from aicraft.nn.parallel import DistributedDataParallel  # noqa: E402
from mnist_common import argument_parser, evaluate, parse_args, save_weights, train_one_epoch  # noqa: E402


def main():
    args = parse_args(argument_parser(__doc__, epochs=5, out="mnist_ddp.safetensors"))
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.threads:
        ac.set_num_threads(args.threads)
    to_input = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,)),
                                   transforms.Flatten()])
    if rank == 0:                      # one download, not one per rank
        MNIST(args.data, train=True, download=True)
    dist.barrier()
    train_set = MNIST(args.data, train=True, transform=to_input)
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    ac.manual_seed(args.seed)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    if rank == 0:
        print("%d ranks, %d thread%s each, batch %d per rank" % (world, ac.get_num_threads(),
              "s" * (ac.get_num_threads() > 1), args.batch_size))

    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        start = time.perf_counter()
        loss = ac.tensor([train_one_epoch(model, train_loader, loss_fn, optimizer) / len(train_loader)])
        dist.all_reduce(loss, dist.ReduceOp.AVG)
        seconds = time.perf_counter() - start
        if rank == 0:
            correct, total = evaluate(model.module, DataLoader(MNIST(args.data, train=False, transform=to_input),
                                                               batch_size=1000))
            print("epoch %d: loss %.4f  test accuracy %.2f%%  (%.1f s, %.0f samples/s)"
                  % (epoch, loss.item(), 100.0 * correct / total, seconds, len(train_set) / seconds))
    if rank == 0:
        save_weights(model.module, args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
