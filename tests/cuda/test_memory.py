"""Device memory under the scopes: a training step inside ac.checkpoint() makes no
cudaMalloc once warm and hands its device bytes back; parameters moved with
Module.to stay where they are across steps; a step freed at root reuses the cache."""
import numpy as np

import aicraft as ac
from aicraft import nn, optim
from gpu import needs_gpu, seeded  # noqa: F401 (seeded: an autouse fixture)

pytestmark = needs_gpu


def mlp_step_setup(device):
    ac.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    opt = optim.Adam(model.parameters(), lr=1e-3)
    x = ac.randn(64, 784)
    g = ac.randn(64, 10)
    return model, opt, x, g


def step(model, opt, x, g, device):
    out = model(x.to(device))
    opt.zero_grad()
    out.backward(g.to(device))   # the loss's gradient given: only ops with CUDA kernels run
    opt.step()


def test_scoped_steps_make_no_cuda_malloc_once_warm():
    model, opt, x, g = mlp_step_setup("cuda")
    assert all(p.device == "cuda:0" for p in model.parameters())
    for i in range(100):
        with ac.checkpoint():
            step(model, opt, x, g, "cuda")
        if i == 2:
            warm = ac.memory_stats()
    after = ac.memory_stats()
    assert after["cuda_mallocs"] == warm["cuda_mallocs"]
    assert after["device_bytes_in_use"] == warm["device_bytes_in_use"]
    assert after["heap_allocations"] == warm["heap_allocations"]


def test_cuda_training_matches_the_cpu():
    results = []
    for device in ("cpu", "cuda"):
        model, opt, x, g = mlp_step_setup(device)
        for _ in range(5):
            with ac.checkpoint():
                step(model, opt, x, g, device)
        results.append([p.cpu().detach().numpy() for p in model.parameters()])
    for cuda, cpu in zip(results[1], results[0]):
        np.testing.assert_allclose(cuda, cpu, rtol=1e-4, atol=1e-5)


def test_restore_hands_device_bytes_back_and_nested_scopes_pop():
    base = ac.memory_stats()["device_bytes_in_use"]
    with ac.checkpoint():
        a = ac.ones(1000, device="cuda")
        with ac.checkpoint():
            b = a * 2
            assert ac.memory_stats()["device_bytes_in_use"] > base
        assert (a + 1).cpu().tolist()[:2] == [2.0, 2.0]
        kept = (a * 3).keep()
    assert ac.memory_stats()["device_bytes_in_use"] == base + 4096 and kept.tolist()[0] == 3.0
    del kept, b
    assert ac.memory_stats()["device_bytes_in_use"] == base


def test_root_tensors_come_back_from_the_size_class_cache():
    x = ac.ones(12345, device="cuda")
    del x
    before = ac.memory_stats()["cuda_mallocs"]
    for _ in range(20):
        y = ac.ones(12345, device="cuda")
        del y
    assert ac.memory_stats()["cuda_mallocs"] == before


def test_module_to_moves_parameters_in_place_and_back():
    m = nn.Linear(3, 2)
    w = m.weight
    before = w.detach().numpy()
    assert m.to("cuda") is m and m.weight is w and w.device == "cuda:0" and w.requires_grad
    m.cpu()
    assert w.device == "cpu" and np.array_equal(w.detach().numpy(), before)
