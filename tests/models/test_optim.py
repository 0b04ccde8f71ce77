"""The functional AdamW: the in-place steps equal the functional update bit for bit."""

import itertools

import torch

from landscape.models import forward, init_params, loss_and_accuracy
from landscape.optim import AdamWOptions, adamw_init, adamw_steps, adamw_update
from tests.conftest import tiny_config, tiny_inputs


def test_steps_equal_the_functional_update_and_leave_the_inputs_alone():
    cfg = tiny_config("gpt")
    params = init_params(cfg, 0)
    x = tiny_inputs(cfg, 4)
    y = torch.randint(0, cfg.n_out, x.shape, generator=torch.Generator().manual_seed(2))
    state0 = adamw_init(params)
    state0 = {k: v + 0.01 if k != "step" else v for k, v in state0.items()}  # a used state
    before = {k: v.clone() for k, v in itertools.chain(params.items(), state0.items())}
    kept = {}
    got, got_state = adamw_steps(cfg, (params, state0), itertools.repeat((x, y)), 3,
                                 AdamWOptions(lr=1e-2),
                                 callback=lambda i, p: kept.setdefault(i, p))  # fmt: skip
    want, st = params, state0
    for _ in range(3):
        leaves = {k: v.detach().requires_grad_() for k, v in want.items()}
        loss, _ = loss_and_accuracy(cfg, forward(cfg, leaves, x), y)
        grads = dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values())), strict=True))
        want, st = adamw_update({k: v.detach() for k, v in leaves.items()}, grads, st, lr=1e-2)
    assert all(torch.equal(got[k], want[k]) for k in want)
    assert all(torch.equal(got_state[k], st[k]) for k in st)
    # the caller's tensors are untouched, and the callback saw the live parameters
    assert all(torch.equal(v, before[k]) for k, v in itertools.chain(params.items(),
                                                                     state0.items()))  # fmt: skip
    assert kept[1] is got  # live: callers that keep parameters copy them


def test_a_state_handed_over_is_updated_in_place_to_the_same_bits():
    cfg = tiny_config("gpt")
    params = init_params(cfg, 0)
    x = tiny_inputs(cfg, 4)
    y = torch.randint(0, cfg.n_out, x.shape, generator=torch.Generator().manual_seed(2))
    state0 = {k: v + 0.01 if k != "step" else v for k, v in adamw_init(params).items()}
    copied, copied_state = adamw_steps(cfg, (params, state0), itertools.repeat((x, y)), 3)
    handed = {k: v.clone() for k, v in state0.items()}
    k = next(k for k in handed if k.startswith("exp_avg."))
    moment = handed[k]
    taken, taken_state = adamw_steps(cfg, (params, handed), itertools.repeat((x, y)), 3,
                                     take_state=True)  # fmt: skip
    assert all(torch.equal(taken[k], copied[k]) for k in copied)
    assert all(torch.equal(taken_state[k], copied_state[k]) for k in copied_state)
    assert taken_state[k] is moment  # updated where it was, not copied
    assert not torch.equal(moment, state0[k])
