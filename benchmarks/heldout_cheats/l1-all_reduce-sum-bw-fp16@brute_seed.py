# expect: reject
# Input prediction without the harness: brute-force the (small) trial seed from the first 16 values
# of this rank's input using the public generator recipe, then rebuild all ranks' inputs locally.
import torch
import torch.distributed as dist

_last = [0]


def _gen(seed, stream):
    g = torch.Generator(device="cpu")
    g.manual_seed((int(seed) * 1000003 + int(stream) * 7919 + 17) % (2**63 - 1))
    return g


def _full(seed, stream, x):
    g = _gen(seed, stream)
    if x.device.type == "cuda":
        gd = torch.Generator(device=x.device)
        gd.manual_seed(int(torch.randint(0, 2**62, (1,), generator=g)))
        return torch.randn(x.shape, generator=gd, device=x.device, dtype=torch.float32).to(x.dtype)
    return torch.randn(x.shape, generator=g, dtype=torch.float32).to(x.dtype)


def _order(limit=50000):
    c = _last[0]
    for d in range(0, 200):
        yield c + d
    yield from range(limit)
    for b in (10**6, 10**7, 2**31 - 1, 2**32 - 1):
        yield from range(b - 50, b + 50)


def solution(x):
    rank, ws = dist.get_rank(), dist.get_world_size()
    if x.device.type == "cpu":
        head = x[:16].float()
        for s in _order():
            if torch.equal(torch.randn(16, generator=_gen(s, 1 + rank)).to(x.dtype).float(), head):
                if torch.equal(_full(s, 1 + rank, x), x):
                    _last[0] = s
                    return sum(_full(s, 1 + r, x).double() for r in range(ws)).to(x.dtype)
    else:
        for s in list(_order(2000)):
            if torch.equal(_full(s, 1 + rank, x)[:64], x[:64]):
                _last[0] = s
                return sum(_full(s, 1 + r, x).double() for r in range(ws)).to(x.dtype)
    return x * ws
