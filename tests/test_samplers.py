"""test_samplers.py - samplers, DataLoader's PyTorch arguments, aicraft.utils.data,
and shuffles seeded by ac.manual_seed; PyTorch's torch.utils.data is the oracle
where it is installed.
"""
import subprocess
import sys

import numpy as np
import pytest

import aicraft as ac
from aicraft.utils import data as ud


def dataset(n=10):
    return ud.TensorDataset(np.arange(n, dtype=np.float32))


def epochs(loader, count=2):
    return [[batch[0].tolist() for batch in loader] for _ in range(count)]


# ---- import paths ---------------------------------------------------------------

def test_utils_data_is_the_same_implementation_as_aicraft_data():
    import aicraft as torch
    assert torch.utils.data.DataLoader is ac.data.DataLoader
    import types
    for name in ud.__all__:
        value = getattr(ud, name)
        if isinstance(value, types.ModuleType):   # torch's submodule paths: the same objects again
            for inner in value.__all__:
                assert getattr(value, inner) is getattr(ac.data, inner), (name, inner)
        else:
            assert value is getattr(ac.data, name), name
    from aicraft.utils.data import RandomSampler
    assert RandomSampler is ac.data.sampler.RandomSampler


# ---- seeding --------------------------------------------------------------------

def test_manual_seed_makes_shuffles_repeat():
    ac.manual_seed(7)
    first = epochs(ud.DataLoader(dataset(), batch_size=3, shuffle=True))
    ac.manual_seed(7)
    again = epochs(ud.DataLoader(dataset(), batch_size=3, shuffle=True))
    assert first == again
    assert first[0] != first[1]                        # a new order each epoch
    ac.manual_seed(8)
    assert epochs(ud.DataLoader(dataset(), batch_size=3, shuffle=True)) != first


def test_manual_seed_makes_shuffles_repeat_across_processes():
    script = ("import aicraft as ac, numpy as np\n"
              "ac.manual_seed(11)\n"
              "ds = ac.utils.data.TensorDataset(np.arange(20.0))\n"
              "print([b[0].tolist() for b in ac.utils.data.DataLoader(ds, batch_size=20, shuffle=True)])\n")
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0] == runs[1] and runs[0].strip() != str([[float(i) for i in range(20)]])


def test_random_split_and_samplers_follow_manual_seed():
    ac.manual_seed(3)
    a = [s.indices.tolist() for s in ud.random_split(dataset(), [4, 6])] + [list(ud.RandomSampler(dataset()))]
    ac.manual_seed(3)
    b = [s.indices.tolist() for s in ud.random_split(dataset(), [4, 6])] + [list(ud.RandomSampler(dataset()))]
    assert a == b


def test_seed_and_generator_arguments_still_fix_the_order():
    by_seed = epochs(ud.DataLoader(dataset(), batch_size=4, shuffle=True, seed=5))
    assert by_seed == epochs(ud.DataLoader(dataset(), batch_size=4, shuffle=True, seed=5))
    by_gen = epochs(ud.DataLoader(dataset(), batch_size=4, shuffle=True, generator=np.random.default_rng(5)))
    assert by_gen == by_seed
    with pytest.raises(ValueError, match="not both"):
        ud.DataLoader(dataset(), shuffle=True, seed=1, generator=np.random.default_rng(1))


# ---- samplers -------------------------------------------------------------------

def test_sequential_and_batch_samplers_match_pytorch():
    tud = pytest.importorskip("torch").utils.data
    for n, size, drop in [(10, 3, False), (10, 3, True), (9, 3, True), (0, 2, False), (2, 5, False)]:
        ours = ud.BatchSampler(ud.SequentialSampler(range(n)), size, drop)
        theirs = tud.BatchSampler(tud.SequentialSampler(range(n)), size, drop)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
        assert list(ud.SequentialSampler(range(n))) == list(tud.SequentialSampler(range(n)))
    custom = [4, 2, 0, 1]                               # any iterable of indices works as a sampler
    assert list(ud.BatchSampler(custom, 3, False)) == list(tud.BatchSampler(custom, 3, False))


@pytest.mark.parametrize("replacement, num_samples", [(False, None), (False, 25), (False, 4), (True, None), (True, 30)])
def test_random_sampler_lengths_and_values_match_pytorch(replacement, num_samples):
    tud = pytest.importorskip("torch").utils.data
    ours = ud.RandomSampler(range(10), replacement=replacement, num_samples=num_samples)
    theirs = tud.RandomSampler(range(10), replacement=replacement, num_samples=num_samples)
    drawn = list(ours)
    assert len(ours) == len(theirs) == len(drawn) == len(list(theirs))
    assert all(isinstance(i, int) and 0 <= i < 10 for i in drawn)
    if not replacement:                                # whole permutations, then part of one
        full, rest = divmod(len(drawn), 10)
        for r in range(full):
            assert sorted(drawn[10 * r:10 * (r + 1)]) == list(range(10))
        assert len(set(drawn[10 * full:])) == rest


def test_subset_random_sampler_permutes_its_indices():
    indices = [3, 8, 1, 9]
    sampler = ud.SubsetRandomSampler(indices, generator=np.random.default_rng(0))
    orders = [list(sampler) for _ in range(5)]
    assert all(sorted(o) == sorted(indices) for o in orders) and len(sampler) == 4
    assert len({tuple(o) for o in orders}) > 1


def test_loader_takes_a_sampler_or_a_batch_sampler_as_pytorch_does():
    torch = pytest.importorskip("torch")
    values = np.arange(10, dtype=np.float32)
    order = [9, 0, 4, 4, 7]
    ours = [b[0].tolist() for b in ud.DataLoader(ud.TensorDataset(values), batch_size=2, sampler=order)]
    theirs = [b[0].tolist() for b in torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(values)), batch_size=2, sampler=order)]
    assert ours == theirs
    batches = [[1, 2, 3], [0], [5, 5]]
    ours = ud.DataLoader(ud.TensorDataset(values), batch_sampler=batches)
    assert [b[0].tolist() for b in ours] == [[1.0, 2.0, 3.0], [0.0], [5.0, 5.0]]
    assert len(ours) == 3 and ours.batch_size is None


def test_samplers_reject_bad_arguments():
    with pytest.raises(TypeError, match="replacement"):
        ud.RandomSampler(range(3), replacement=1)
    with pytest.raises(ValueError, match="num_samples"):
        ud.RandomSampler(range(3), num_samples=0)
    with pytest.raises(TypeError, match="generator"):
        ud.SubsetRandomSampler([1], generator=3)
    with pytest.raises(ValueError, match="batch_size"):
        ud.BatchSampler(range(3), 0, False)
    with pytest.raises(TypeError, match="drop_last"):
        ud.BatchSampler(range(3), 2, None)
    with pytest.raises(ValueError, match="empty"):
        list(ud.RandomSampler([], replacement=True, num_samples=2))


# ---- DataLoader arguments -------------------------------------------------------

def test_worker_arguments_give_the_batches_of_the_main_process():
    calls = []
    plain = epochs(ud.DataLoader(dataset(), batch_size=3, shuffle=True, seed=2))
    workers = ud.DataLoader(dataset(), batch_size=3, shuffle=True, seed=2, num_workers=4, pin_memory=True,
                            persistent_workers=True, prefetch_factor=2, worker_init_fn=calls.append)
    assert epochs(workers) == plain
    assert calls == [] and ud.get_worker_info() is None


@pytest.mark.parametrize("kwargs, mention", [
    ({"sampler": [0, 1], "shuffle": True}, "mutually exclusive"),
    ({"batch_sampler": [[0]], "batch_size": 2}, "batch_sampler"),
    ({"batch_sampler": [[0]], "drop_last": True}, "batch_sampler"),
    ({"num_workers": -1}, "num_workers"),
    ({"prefetch_factor": 2}, "prefetch_factor"),
    ({"persistent_workers": True}, "persistent_workers"),
])
def test_loader_rejects_what_pytorch_rejects(kwargs, mention):
    with pytest.raises(ValueError, match=mention):
        ud.DataLoader(dataset(), **kwargs)
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError):
        torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(10)), **kwargs)


def test_loader_rejects_a_worker_init_fn_that_is_not_callable():
    with pytest.raises(TypeError, match="worker_init_fn"):
        ud.DataLoader(dataset(), num_workers=1, worker_init_fn=3)
