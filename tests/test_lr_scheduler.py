"""test_lr_scheduler.py - aicraft.optim.lr_scheduler against the closed-form
schedules (stepping once per epoch) and, when torch is installed, against
torch.optim.lr_scheduler's own sequences; chaining, resuming and state_dict.
"""
import math
import warnings
from bisect import bisect_right

import pytest

import aicraft as ac
from aicraft import optim
from aicraft.optim import lr_scheduler

EPOCHS = 30


def make_optimizer(lrs=(0.1,)):
    """An SGD with one param group per lr."""
    groups = [{"params": [ac.zeros(1, requires_grad=True)], "lr": lr} for lr in lrs]
    return optim.SGD(groups, lr=lrs[0])


def run(scheduler, epochs=EPOCHS):
    """The lrs of every group at epochs 0 .. epochs-1, checking the optimizer's groups agree."""
    values = []
    for _ in range(epochs):
        lrs = scheduler.get_last_lr()
        assert lrs == [group["lr"] for group in scheduler.optimizer.param_groups]
        values.append(list(lrs))
        scheduler.optimizer.step()
        scheduler.step()
    return values


def closed_form(formula, base_lrs, epochs=EPOCHS):
    return [[formula(base, epoch) for base in base_lrs] for epoch in range(epochs)]


def assert_sequences_close(got, expected, rel=1e-9):
    assert len(got) == len(expected)
    for epoch, (a, b) in enumerate(zip(got, expected)):
        assert a == pytest.approx(b, rel=rel, abs=1e-15), "epoch %d" % epoch


BASES = (0.1, 0.02)

# name: (make a scheduler from a scheduler module and an optimizer, its closed form)
SCHEDULES = {
    "StepLR": (lambda m, opt: m.StepLR(opt, step_size=4, gamma=0.5),
               lambda base, e: base * 0.5 ** (e // 4)),
    "MultiStepLR": (lambda m, opt: m.MultiStepLR(opt, milestones=[3, 8, 8, 20], gamma=0.1),
                    lambda base, e: base * 0.1 ** bisect_right([3, 8, 8, 20], e)),
    "ExponentialLR": (lambda m, opt: m.ExponentialLR(opt, gamma=0.9),
                      lambda base, e: base * 0.9 ** e),
    "CosineAnnealingLR": (lambda m, opt: m.CosineAnnealingLR(opt, T_max=7, eta_min=0.001),
                          lambda base, e: 0.001 + (base - 0.001) * (1 + math.cos(math.pi * e / 7)) / 2),
    "LambdaLR": (lambda m, opt: m.LambdaLR(opt, lambda e: 1.0 / (1 + e)),
                 lambda base, e: base / (1 + e)),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_stepping_once_per_epoch_follows_the_closed_form(name):
    make, formula = SCHEDULES[name]
    scheduler = make(lr_scheduler, make_optimizer(BASES))
    assert scheduler.last_epoch == 0
    assert_sequences_close(run(scheduler), closed_form(formula, BASES))
    assert scheduler.last_epoch == EPOCHS


def test_cosine_annealing_reaches_eta_min_at_t_max_and_climbs_back():
    scheduler = lr_scheduler.CosineAnnealingLR(make_optimizer(), T_max=5, eta_min=0.01)
    values = [lrs[0] for lrs in run(scheduler, 11)]
    assert values[5] == pytest.approx(0.01)
    assert values[10] == pytest.approx(0.1)
    assert values[4] > values[5] < values[6]


def test_lambda_lr_takes_one_lambda_per_group():
    opt = make_optimizer(BASES)
    scheduler = lr_scheduler.LambdaLR(opt, [lambda e: 0.5 ** e, lambda e: 1.0 + e])
    expected = [[0.1 * 0.5 ** e, 0.02 * (1.0 + e)] for e in range(10)]
    assert_sequences_close(run(scheduler, 10), expected)
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        lr_scheduler.LambdaLR(make_optimizer(BASES), [lambda e: 1.0])


def test_chained_schedulers_multiply():
    opt = make_optimizer()
    exponential = lr_scheduler.ExponentialLR(opt, gamma=0.9)
    steps = lr_scheduler.StepLR(opt, step_size=3, gamma=0.1)
    values = []
    for _ in range(12):
        values.append([opt.param_groups[0]["lr"]])
        opt.step()
        exponential.step()
        steps.step()
    assert_sequences_close(values, closed_form(lambda base, e: base * 0.9 ** e * 0.1 ** (e // 3), [0.1], 12))


def test_step_with_an_epoch_jumps_to_the_closed_form_and_warns():
    scheduler = lr_scheduler.StepLR(make_optimizer(), step_size=2, gamma=0.5)
    with pytest.warns(UserWarning, match="epoch parameter"):
        scheduler.step(7)
    assert scheduler.last_epoch == 7
    assert scheduler.get_last_lr() == pytest.approx([0.1 * 0.5 ** 3])
    scheduler = lr_scheduler.LambdaLR(make_optimizer(), lambda e: e + 1)
    with pytest.warns(UserWarning):
        scheduler.step(4)
    assert scheduler.get_last_lr() == pytest.approx([0.5])


def test_scheduler_sets_initial_lr_and_base_lrs():
    opt = make_optimizer(BASES)
    scheduler = lr_scheduler.ExponentialLR(opt, gamma=0.5)
    assert [group["initial_lr"] for group in opt.param_groups] == list(BASES)
    assert scheduler.base_lrs == list(BASES)
    scheduler.step()
    assert [group["initial_lr"] for group in opt.param_groups] == list(BASES)


def test_state_dict_round_trip_resumes_the_schedule():
    opt = make_optimizer(BASES)
    scheduler = lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=0.0)
    run(scheduler, 4)
    saved_opt, saved = opt.state_dict(), scheduler.state_dict()
    assert "optimizer" not in saved and saved["last_epoch"] == 4
    expected = run(scheduler, 8)

    opt2 = make_optimizer((0.5, 0.5))
    opt2.load_state_dict(saved_opt)
    scheduler2 = lr_scheduler.CosineAnnealingLR(opt2, T_max=3)
    scheduler2.load_state_dict(saved)
    assert scheduler2.T_max == 10 and scheduler2.base_lrs == list(BASES)
    assert_sequences_close(run(scheduler2, 8), expected, rel=1e-12)


def test_lambda_lr_state_dict_keeps_callable_objects_but_not_functions():
    class Decay:
        def __init__(self, rate):
            self.rate = rate

        def __call__(self, epoch):
            return self.rate ** epoch

    scheduler = lr_scheduler.LambdaLR(make_optimizer(BASES), [Decay(0.5), lambda e: 1.0])
    saved = scheduler.state_dict()
    assert saved["lr_lambdas"] == [{"rate": 0.5}, None]
    other = lr_scheduler.LambdaLR(make_optimizer(BASES), [Decay(0.9), lambda e: 1.0])
    other.load_state_dict(saved)
    assert other.lr_lambdas[0].rate == 0.5


def test_resuming_with_last_epoch_needs_initial_lr():
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(make_optimizer(), step_size=2, last_epoch=3)
    opt = make_optimizer()
    lr_scheduler.StepLR(opt, step_size=2)
    resumed = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5, last_epoch=3)
    assert resumed.last_epoch == 4


def test_bad_arguments():
    with pytest.raises(TypeError, match="is not an Optimizer"):
        lr_scheduler.StepLR(object(), step_size=2)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        lr_scheduler.LambdaLR([], lambda e: 1.0)
    with pytest.raises(ValueError, match="step_size"):
        lr_scheduler.StepLR(make_optimizer(), step_size=0)
    with pytest.raises(ValueError, match="T_max"):
        lr_scheduler.CosineAnnealingLR(make_optimizer(), T_max=0)


# ---- torch's own sequences, when torch is installed ------------------------------

@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_sequences_match_torch(name):
    torch = pytest.importorskip("torch")
    make, _ = SCHEDULES[name]
    ours = run(make(lr_scheduler, make_optimizer(BASES)))
    torch_opt = torch.optim.SGD([{"params": [torch.zeros(1, requires_grad=True)], "lr": lr}
                                 for lr in BASES], lr=BASES[0])
    scheduler = make(torch.optim.lr_scheduler, torch_opt)
    theirs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(EPOCHS):
            theirs.append(list(scheduler.get_last_lr()))
            torch_opt.step()
            scheduler.step()
    assert_sequences_close(ours, theirs, rel=1e-12)
