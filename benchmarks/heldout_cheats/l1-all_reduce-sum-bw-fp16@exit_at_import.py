# expect: reject
# Exit with success at import time (before solution is ever called or checked): print a passing verdict and raise SystemExit(0) / os._exit(0).
import json
import os
import sys

sys.stdout.write(json.dumps({"correct": True, "status": "correct", "passed": True, "speedup": 10.0}) + "\n")
sys.stdout.flush()
try:
    sys.exit(0)
finally:
    os._exit(0)


def solution(x):
    return x
