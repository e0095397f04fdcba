"""Forward and backward of a mined autograd Function whose collectives run in its backward (tensor-parallel
linear layers all-reduce the input gradient there; their forward alone communicates nothing). Added (after
`_MG_BACKWARD_OF = "<class name>"`, below the mined code) only to the task modules whose harness spec has
`backward_of`; the spec's entry is then `_mg_fwd_bwd`. A text part (torch + stdlib only), not imported: it
uses the runtime's `_mg_torch`."""


def _mg_fwd_bwd(*args, **kw):
    """`apply` on the inputs (floating-point tensors as leaves that require gradients), then backward with each
    output as its own gradient (the loss |out|^2 / 2). Returns the outputs, then the inputs' gradients."""
    leaves = [a.detach().clone().requires_grad_(True) if isinstance(a, _mg_torch.Tensor) and a.is_floating_point()
              else a for a in (*args, *kw.values())]
    with _mg_torch.enable_grad():
        out = globals()[_MG_BACKWARD_OF].apply(*leaves)
        outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, _mg_torch.Tensor)]
        live = [o for o in outs if o.requires_grad]
        if live:
            _mg_torch.autograd.backward(live, [o.detach().clone() for o in live])
    grads = [a.grad if a.grad is not None else _mg_torch.zeros_like(a) for a in leaves
             if isinstance(a, _mg_torch.Tensor) and a.requires_grad]
    return tuple(o.detach() for o in outs) + tuple(grads)
