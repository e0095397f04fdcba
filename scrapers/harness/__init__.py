"""Harness synthesis for mined candidates: a mined function made into a standalone level-4 task module,
run on sandboxed gloo ranks, with inputs a reviewed curated entry gives (or the search finds).

Three rooms and one road:

- make/: make a standalone module of a candidate (inline repository helpers, stand-ins for imports it
  cannot have, render the task module with the spec's inputs, the task-side runtime text);
- run/: run it (sandboxed ranks, the rank-side probe, the failure categories, settling an accepted
  harness, the gloo-vs-NCCL cross-check);
- inputs/: find its inputs: the curated entry's inputs first (initial.py, from curated/), the error-driven
  search and its rules; inputs/discovery/ holds the guessing and capture code, a discovery aid that no
  longer decides what ships;
- curated/: the reviewed registry of inputs per mined problem;
- driver.py (the road every candidate takes through the rooms) and commands.py (`mgbench scrape harness`,
  `scrape settle`, `scrape crosscheck`).

A room imports only the rooms before it (make <- run <- inputs/discovery <- inputs <- driver)."""
