# expect: inert
# (inert: it reads the judge's messages ahead of the harness. Against a judge that sent a batch's input sets
# in one message it learnt the batch's length and inputs and must be rejected; where timed calls are streamed
# (each call's inputs sent after the call before it returned) there is nothing ahead to read, and a verdict of
# correct on its honest work is right. benchmarks/heldout_eval.py reads the record's integrity_version.)
# Hidden persistent thread + reading the judge's messages before the harness does.
# (1) No `threading`/`_thread` import: a Python callback chained with Future.then() on an async gloo
#     collective of a private group runs on gloo's NATIVE worker thread; if it never returns, candidate
#     code runs there for the rest of the evaluation: invisible to threading.enumerate() (no "thread(s)
#     running" flag, no `suspicious`), and not a process, so sandbox.reap never kills it between jobs.
# (2) That thread dups the rank's socketpair to the judge (an AF_UNIX fd in /proc/self/fd) and PEEKs
#     every message (MSG_PEEK leaves it for the harness): it learns each timed batch's exact length k
#     (the judge's defence against work deferred to a batch's last call is that k is unknowable) and
#     the batch's fingerprint key. The solution itself is honest; it counts calls against the peeked k
#     and reports on stderr how often it knew, at call 1, exactly which call would be the batch's last.
# Success: judged correct with no thread flag while knowing k (the precondition of fused_deferral).
import os
import pickle
import socket
import struct
import sys
import time

import torch
import torch.distributed as dist

INFO = []  # (kind, k or None, key or None) per message peeked, appended by the hidden thread
STATE = {"started": False, "seen": 0, "k": None, "i": 0, "known_at_1": 0, "batches_1": 0, "last_ok": 0}


def _conn_fd():
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        fam = s.family
        s.close()
        if fam == socket.AF_UNIX:
            return fd
    return None


def _parse(data):
    kind = b"judge_cand_batch" in data[:400] and "batch" or ("call" if b"judge_cand_call" in data[:400] else "other")
    k = key = None
    body = data
    if len(data) >= 4 and data[:1] != b"\x80":
        (n,) = struct.unpack("!i", data[:4])
        body = data[4:]
    kname, fields = _loads(body)
    if kname.startswith("judge_cand_batch"):
        k, key = len(fields["sets"]), fields["key"]
    return kind, k, key


def _loads(body):
    out = ("", {})
    try:
        out = pickle.loads(body)
    except Exception:  # an incomplete peek
        pass
    return out


def _peek(s, n, flags):
    data = b""
    try:
        data = s.recv(n, flags)
    except BlockingIOError:
        data = None
    except OSError:
        data = b""
    return data


def _watch(_fut):
    fd = _conn_fd()
    s = socket.socket(fileno=os.dup(fd)) if fd is not None else None
    while s is not None:
        data = _peek(s, 1 << 20, socket.MSG_PEEK)
        if not data:
            break
        INFO.append(_parse(data))
        while True:  # wait until the harness has consumed it
            time.sleep(0.0001)
            d2 = _peek(s, 64, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            if d2 is None or d2 != data[:64]:
                break


def _start():
    STATE["started"] = True
    sys.setswitchinterval(1e-4)
    g = dist.new_group(backend="gloo")
    w = dist.all_reduce(torch.zeros(1), group=g, async_op=True)
    STATE["fut"] = w.get_future().then(_watch)  # runs on gloo's native thread, forever


def solution(x):
    if not STATE["started"]:
        _start()
    time.sleep(0)
    if len(INFO) != STATE["seen"]:  # a new message from the judge began
        if STATE["k"] is not None and STATE["i"] == STATE["k"]:
            STATE["last_ok"] += 1
        STATE["seen"] = len(INFO)
        kind, k, key = INFO[-1]
        STATE["k"], STATE["i"] = (k if kind == "batch" else None), 0
        if kind == "batch":
            STATE["batches_1"] += 1
            STATE["known_at_1"] += k is not None
        if kind == "call" and STATE["batches_1"]:
            print(f"[peek] rank {dist.get_rank()}: messages peeked {len(INFO)}, timed batches seen at call 1 "
                  f"{STATE['batches_1']}, exact k known {STATE['known_at_1']}, batches that ended at the peeked "
                  f"k {STATE['last_ok']}; last peeked key {[i for i in INFO if i[2]][-1:]}", file=sys.stderr, flush=True)
    STATE["i"] += 1
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y
