"""Optimizer inputs of a harness: a real `torch.optim.SGD` over parameters with gradients ("optimizer"), its
`param_groups` alone ("param_groups": one group of those parameters with the usual hyperparameters), and
an optimizer's per-parameter state ("optim_state": an empty `defaultdict(dict)`, as `torch.optim`'s).
Added only to the task modules whose harness spec draws one of these kinds; it wraps the runtime's
`_mg_value`, `_mg_clone` and `_mg_plain`, kept as `*_plain` (the runtime's `_mg_clean` and comparisons go
through `_mg_plain`). A text part (torch + stdlib only), not imported: it uses the runtime's `_mg_torch`."""
import collections as _mg_collections  # noqa: E402
import copy as _mg_copy  # noqa: E402

_MG_GROUP_DEFAULTS = {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01, "momentum": 0.9,
                      "nesterov": False, "dampening": 0.0, "amsgrad": False, "maximize": False,
                      "bias_correction": True}
_mg_value_plain, _mg_clone_plain, _mg_plain_plain = _mg_value, _mg_clone, _mg_plain


class _MgOptimState(_mg_collections.defaultdict):
    """An optimizer's per-parameter state (`self.state[p]`), keyed by parameter: `_MgOptimState(dict)`."""


def _mg_optim_params(opt):
    return [p for group in opt.param_groups for p in group["params"]]


def _mg_value(a, index, seed, rank, ws, n, device):
    """The runtime's `_mg_value`, with optimizers, parameter groups and optimizer state."""
    if a["kind"] == "optim_state":
        return _MgOptimState(dict)
    if a["kind"] not in ("optimizer", "param_groups"):
        return _mg_value_plain(a, index, seed, rank, ws, n, device)
    params = _mg_value_plain({**a, "kind": "tensors", "grads": True}, index, seed, rank, ws, n, device)
    group = {"params": params, **_MG_GROUP_DEFAULTS, **_mg_fields(a, index, seed, rank, ws, n, device)}
    if a["kind"] == "param_groups":
        return [group]
    return _mg_torch.optim.SGD([group], lr=group["lr"])


def _mg_clone(x):
    """Optimizers and optimizer state are copied whole (parameters with their gradients, state): calls never
    share them."""
    if isinstance(x, (_mg_torch.optim.Optimizer, _MgOptimState)):
        memo = {}
        y = _mg_copy.deepcopy(x, memo)
        params = _mg_optim_params(x) if isinstance(x, _mg_torch.optim.Optimizer) else list(x)
        for p in params:                                    # a Parameter's deepcopy drops its gradient
            if id(p) in memo and p.grad is not None:
                memo[id(p)].grad = p.grad.clone()
        return y
    return _mg_clone_plain(x)


def _mg_plain(x):
    """An optimizer as its parameters, their gradients and its state (outputs, comparisons)."""
    if isinstance(x, _mg_torch.optim.Optimizer):
        return (_mg_plain_plain(_mg_optim_params(x)), _mg_plain(_MgOptimState(dict, x.state)))
    if isinstance(x, _MgOptimState):        # by parameter order, not by the parameters' text
        return tuple(x.values())
    return _mg_plain_plain(x)
