"""The room that runs a made module: sandboxed gloo ranks and what they report.

sandbox.py (ranks forked from a torch-preloaded forkserver, with limits), child.py and probe.py (inside a
rank: confine, load, call, trace the collectives, fingerprint the outputs), outcomes.py (why a run
failed, one table), settle.py and settle_run.py (an accepted harness's output, changed inputs and full
size, decided once), crosscheck.py (gloo fingerprints against NCCL). Imports the make room only."""
