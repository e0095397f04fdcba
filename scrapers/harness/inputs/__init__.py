"""The room that finds a candidate's inputs: a curated entry's first, then the search.

initial.py (the first spec: the curated entry's inputs over the discovery aid's guesses), search.py
(run -> judge -> propose -> retry at world size 2, confirmed at 4), candidate.py and failure.py (what
the rules read, parsed once), rules/ (the named rules in priority order, run by rules/order.py) and
their helpers (containerfix.py, optimfix.py, peerfix.py, sizefix.py, statefix.py). discovery/ guesses
and captures inputs from the repository: a discovery aid that no longer decides what ships (its
README.md). Imports the make and run rooms."""
