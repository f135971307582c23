"""nn.Embedding and F.embedding (over C's ac_embedding): the lookup against NumPy
indexing, the scatter-add backward against central differences of a float64
NumPy lookup (ids repeated, any shape), padding_idx, PyTorch's initialisation
and names, and clear errors for ids that are out of range or not integers."""
import numpy as np
import pytest

import aicraft as ac
import aicraft.nn.functional as F
from aicraft import nn
from conftest import numeric_grad
from thread_counts import assert_same_for_thread_counts

rng = np.random.default_rng(3)


@pytest.mark.parametrize("ids_shape", [(), (5,), (2, 3), (2, 2, 3)])
def test_lookup_matches_numpy(ids_shape):
    weight = rng.standard_normal((7, 4)).astype(np.float32)
    ids = rng.integers(0, 7, ids_shape)
    out = F.embedding(ac.tensor(ids.astype(np.float32)), ac.tensor(weight))
    assert out.shape == ids_shape + (4,)
    np.testing.assert_array_equal(out.numpy(), weight[ids])


def test_large_lookup_matches_numpy():
    """Enough rows for the parallel gather."""
    weight = rng.standard_normal((1000, 64)).astype(np.float32)
    ids = rng.integers(0, 1000, (40, 50))
    np.testing.assert_array_equal(F.embedding(ac.tensor(ids), ac.tensor(weight)).numpy(), weight[ids])


def test_numpy_and_list_ids_are_accepted():
    emb = nn.Embedding(6, 3)
    ids = np.array([[0, 5], [2, 2]], dtype=np.int64)
    np.testing.assert_array_equal(emb(ids).numpy(), emb.weight.numpy()[ids])
    np.testing.assert_array_equal(emb([1, 4]).numpy(), emb.weight.numpy()[[1, 4]])


def test_backward_scatter_adds_against_central_differences():
    weight = rng.standard_normal((6, 3))
    ids = np.array([[1, 4, 1], [0, 1, 5]])
    w_out = rng.standard_normal((2, 3, 3))
    wt = ac.tensor(weight, requires_grad=True)
    (F.embedding(ac.tensor(ids), wt) * ac.tensor(w_out)).sum().backward()
    expected = numeric_grad(lambda w: np.sum(w[ids] * w_out), [weight])[0]
    np.testing.assert_allclose(wt.grad.numpy(), expected, rtol=1e-4, atol=1e-5)
    assert np.all(wt.grad.numpy()[[2, 3]] == 0)   # rows never picked get nothing


@pytest.mark.parametrize("dim", [1, 203, 70001])
def test_backward_does_not_depend_on_thread_count(dim):
    # repeated ids (their rows' sums keep the id order) and a padding row, columns split
    weight = rng.standard_normal((50, dim)).astype(np.float32)
    ids = rng.integers(0, 50, (7, 13))
    g = rng.standard_normal((7, 13, dim)).astype(np.float32)

    def run():
        wt = ac.tensor(weight, requires_grad=True)
        F.embedding(ac.tensor(ids), wt, padding_idx=int(ids[0, 0])).backward(ac.tensor(g))
        return [wt.grad.numpy()]
    grads = assert_same_for_thread_counts(run)
    expected = np.zeros((50, dim))
    np.add.at(expected, ids.reshape(-1), g.reshape(-1, dim).astype(np.float64))
    expected[ids[0, 0]] = 0
    np.testing.assert_allclose(grads[0], expected, rtol=1e-5, atol=1e-5)



def expected_table_grad(ids, g, rows):
    expected = np.zeros((rows, g.shape[-1]))
    np.add.at(expected, ids.reshape(-1), g.reshape(-1, g.shape[-1]).astype(np.float64))
    return expected


def test_weight_grad_filled_in_place_then_accumulated():
    """The first backward fills the weight's new grad itself; later ones add to it."""
    weight = rng.standard_normal((9, 5)).astype(np.float32)
    ids = rng.integers(0, 9, (4, 3))
    g1, g2 = rng.standard_normal((2, 4, 3, 5)).astype(np.float32)
    wt = ac.tensor(weight, requires_grad=True)
    F.embedding(ac.tensor(ids), wt).backward(ac.tensor(g1))
    np.testing.assert_allclose(wt.grad.numpy(), expected_table_grad(ids, g1, 9), rtol=1e-6, atol=1e-6)
    F.embedding(ac.tensor(ids), wt).backward(ac.tensor(g2))
    np.testing.assert_allclose(wt.grad.numpy(), expected_table_grad(ids, g1 + g2, 9), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("embedding_first", [True, False])
def test_tied_weight_gets_both_gradients(embedding_first):
    """One table as the embedding and the output layer (a tied LM): the grads add up,
    whichever node runs backward first."""
    table = rng.standard_normal((6, 4))
    ids = np.array([1, 3, 1])
    x = rng.standard_normal((2, 4))
    wt = ac.tensor(table, requires_grad=True)
    emb_loss = F.embedding(ac.tensor(ids), wt).sum()
    lin_loss = (F.linear(ac.tensor(x), wt) ** 2).sum()
    (emb_loss + lin_loss if embedding_first else lin_loss + emb_loss).backward()

    def loss(w):
        return np.sum(w[ids]) + np.sum((x @ w.T) ** 2)
    expected = numeric_grad(loss, [table])[0]
    np.testing.assert_allclose(wt.grad.numpy(), expected, rtol=1e-4, atol=1e-4)


def test_weight_hook_sees_the_final_grad_and_scopes_keep_it():
    emb = nn.Embedding(7, 3)
    ids = ac.tensor([[0, 6], [6, 2]])
    seen = []
    emb.weight.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.numpy().copy()))
    before = ac.memory_stats()
    for _ in range(3):
        emb.zero_grad()
        with ac.checkpoint():
            emb(ids).sum().backward()
    expected = np.zeros((7, 3))
    expected[0], expected[6], expected[2] = 1, 2, 1
    assert len(seen) == 3
    np.testing.assert_array_equal(seen[-1], expected)
    np.testing.assert_array_equal(emb.weight.grad.numpy(), expected)
    emb.zero_grad()
    after = ac.memory_stats()
    assert after["live_tensors"] == before["live_tensors"]
    with ac.checkpoint():   # a leaf made in a scope: its grad is the scope's
        w = ac.tensor(rng.standard_normal((4, 2)), requires_grad=True)
        F.embedding(ac.tensor([3, 3]), w).sum().backward()
        np.testing.assert_array_equal(w.grad.numpy(), [[0, 0], [0, 0], [0, 0], [2, 2]])

def test_gradient_flows_through_embedding_into_an_lstm():
    emb, lstm = nn.Embedding(5, 3), nn.LSTM(3, 4)
    out, _ = lstm(emb(ac.tensor([[0, 1], [3, 1], [1, 1]])))
    out.sum().backward()
    g = emb.weight.grad.numpy()
    assert np.abs(g[[0, 1, 3]]).min() > 0 and np.all(g[[2, 4]] == 0)


def test_padding_idx_row_is_zero_and_gets_no_gradient():
    emb = nn.Embedding(5, 3, padding_idx=-1)
    assert emb.padding_idx == 4
    np.testing.assert_array_equal(emb.weight.numpy()[4], np.zeros(3))
    out = emb(ac.tensor([4, 2, 4]))
    np.testing.assert_array_equal(out.numpy()[0], np.zeros(3))
    (out * out + out).sum().backward()
    g = emb.weight.grad.numpy()
    np.testing.assert_array_equal(g[4], np.zeros(3))
    np.testing.assert_allclose(g[2], 2 * emb.weight.numpy()[2] + 1, rtol=1e-6)


def test_functional_padding_idx():
    w = ac.tensor(rng.standard_normal((4, 2)), requires_grad=True)
    F.embedding(ac.tensor([0, 1, 1]), w, padding_idx=1).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[1, 1], [0, 0], [0, 0], [0, 0]])


def test_init_names_and_from_pretrained():
    emb = nn.Embedding(2000, 16)
    assert [n for n, _ in emb.named_parameters()] == ["weight"]
    values = emb.weight.numpy()
    assert abs(values.mean()) < 0.02 and abs(values.std() - 1) < 0.02   # N(0, 1)
    table = rng.standard_normal((3, 2)).astype(np.float32)
    frozen = nn.Embedding.from_pretrained(ac.tensor(table))
    assert not frozen.weight.requires_grad
    np.testing.assert_array_equal(frozen(ac.tensor([2, 0])).numpy(), table[[2, 0]])
    assert nn.Embedding.from_pretrained(ac.tensor(table), freeze=False).weight.requires_grad
    assert repr(nn.Embedding(10, 3, padding_idx=0)) == "Embedding(10, 3, padding_idx=0)"


def test_state_dict_round_trip(tmp_path):
    emb = nn.Embedding(8, 4)
    path = str(tmp_path / "emb.safetensors")
    ac.save(emb.state_dict(), path)
    other = nn.Embedding(8, 4)
    other.load_state_dict(ac.load(path))
    np.testing.assert_array_equal(other.weight.numpy(), emb.weight.numpy())


@pytest.mark.parametrize("bad,message", [
    (7, r"embedding: index 7 at position 1 is out of range for weight \(7, 2\)"),
    (-1, r"embedding: index -1 at position 1 is out of range"),
    (2.5, r"embedding: index 2.5 at position 1 is not an integer"),
    (float("nan"), r"embedding: index nan at position 1 is out of range"),
])
def test_bad_ids_raise_index_error(bad, message):
    emb = nn.Embedding(7, 2)
    with pytest.raises(IndexError, match=message):
        emb(ac.tensor([1.0, bad, 3.0]))
    assert emb(ac.tensor([6.0])).shape == (1, 2)    # still usable


def test_bad_weight_and_arguments():
    with pytest.raises(ac.ShapeError, match=r"weight \(6,\) must be \(num_embeddings, embedding_dim\)"):
        F.embedding(ac.tensor([0]), ac.randn(6))
    with pytest.raises(ValueError, match="padding_idx 5 must be within num_embeddings"):
        nn.Embedding(5, 2, padding_idx=5)
    with pytest.raises(NotImplementedError, match="scale_grad_by_freq"):
        F.embedding_bag(ac.tensor([1]), ac.ones(5, 2), ac.tensor([0]), scale_grad_by_freq=True)
    with pytest.raises(TypeError):
        nn.Embedding(5, 2)("not ids")
