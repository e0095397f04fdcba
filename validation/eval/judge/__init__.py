"""The judge of `mgbench eval`: checking, reference and timing statistics out of the candidate's reach.

What runs where (docs/eval.md, "Trust boundary"):
- the judge (the `mgbench eval` parent process) holds the secret seeds, its own copy of every input
  it ships, the expected outputs, the tolerances, the choice of which timed calls are verified, the
  clock and the timing statistics; it never imports candidate code and reads candidate replies only
  through `wire.safe_loads` (plain data, no pickled objects);
- the reference ranks (`reference.py`, a RankPool that never loads candidate code) draw inputs with
  make_inputs under the judge's secret seeds, run the reference and the oracle, and are timed by the
  same clock as the candidate;
- the candidate ranks (`candidate.py`, fresh for every candidate) receive inputs as bytes, run
  solution(), and send back outputs, inputs and fingerprints (`rankbatch.py`) as bytes.
Modules, one job each: wire (the buffer exchange and fingerprints), reference, candidate, rankbatch
(a timed batch on a rank), clock (the judge's clock), verify (comparisons and tolerances in the
judge), isolate (the candidate's processes stopped while the reference is timed), sandbox (the
candidate's ranks in namespaces of their own: started, probed and cleared from the judge) and walls
(what runs inside it), session (the phases of one evaluation).
"""
