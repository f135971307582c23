"""aicraft.optim - optimizers and learning-rate schedules, as torch.optim.

    opt = ac.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = ac.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
"""
from aicraft.optim import lr_scheduler
from aicraft.optim.adam import Adam, AdamW
from aicraft.optim.adaptive import Adadelta, Adagrad, RMSprop
from aicraft.optim.lbfgs import LBFGS
from aicraft.optim.optimizer import Optimizer
from aicraft.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adadelta", "RMSprop", "Adagrad", "LBFGS",
           "lr_scheduler"]
