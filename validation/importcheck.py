"""Child-process check that task modules import and define the contract's names.

Usage: python -m mgbench.validation.importcheck FILE [FILE...]; prints one JSON object per failure.
"""

from __future__ import annotations

import json
import sys
import warnings

from mgbench.validation.contract import check_contract, load_module


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")
    need_oracle = "--oracle" in argv
    bad = 0
    for path in (a for a in argv if a != "--oracle"):
        try:
            check_contract(load_module(path), path, need_oracle=need_oracle)
        except Exception as e:  # noqa: BLE001 - report any import failure
            bad += 1
            print(json.dumps({"path": path, "error": f"{type(e).__name__}: {e}".splitlines()[0]}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
