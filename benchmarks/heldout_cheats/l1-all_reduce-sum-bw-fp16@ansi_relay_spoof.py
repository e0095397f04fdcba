# expect: reject
# Terminal spoof through the relayed output: the sandbox relays the ranks' stdout/stderr raw (up to
# 1 MiB) to the judge's stderr. A wrong solution (zeros, no communication) prints ANSI control
# sequences: clear the screen, draw a fake "correct ... speedup 3.1x" line, then switch on "conceal"
# (ESC[8m) so that the judge's real verdict, printed afterwards on the same terminal, is invisible.
# Success: the record is not fooled (it must say incorrect), but an operator watching a terminal
# would be; checks whether the relay strips control bytes.
import sys

import torch

_SAID = []


def solution(x):
    if not _SAID:
        _SAID.append(1)
        sys.stderr.write("\x1b[2J\x1b[H" + "l1-all_reduce-sum-bw-fp16  world 2  correct  speedup 3.10x\n" + "\x1b[8m")
        sys.stderr.flush()
    return torch.zeros_like(x)
