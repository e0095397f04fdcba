"""Arguments as real callers pass them: run the repository's own tests that call a candidate, with a
recorder in place of the candidate's entry, and keep what they passed (shapes, dtypes, value ranges,
counts and splits, and how each scales with the world size) as the candidate's initial arguments.

- caller.py: a test unit that calls a candidate, as a candidate record the harness renders;
- record.py: the recorder and the JSON record of an argument (rank-process side);
- fit.py: records of every rank at world sizes 2 and 4 -> harness argument specs;
- run.py: the runs, in the sandbox, into SCRAPE/captured.jsonl
  (`python -m mgbench.scrapers.harness.inputs.discovery.capture.run`).
"""
