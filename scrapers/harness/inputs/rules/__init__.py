"""The harness search's rules, one module per family; `order.py` runs them in priority order.

Each family module exports RULES (a list of `base.Rule`). A rule names what failure it reacts to
(`Trigger`: message words or regexes, error types, or a predicate) and proposes the next specs to try
with one signature, `propose(spec, failure, cand)`. To add a rule, add an entry to its family's RULES with
a priority between its neighbours' (order.py lists the families).
"""
