# expect: reject
# Exit early with a fake success: print a plausible passing JSON verdict and os._exit(0) from inside
# solution, before any check can run.
import json
import os
import sys


def solution(x):
    verdict = {"correct": True, "status": "correct", "passed": True, "speedup": 50.0,
               "fast_1": True, "fast_1.5": True, "fast_2": True, "error": None}
    sys.stdout.write(json.dumps(verdict) + "\n")
    sys.stdout.flush()
    os._exit(0)
