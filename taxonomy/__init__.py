"""Taxonomy of mgbench: parallelism dims, workloads, communication realizations and task families.

The data lives in YAML files beside this module; `load_taxonomy()` reads and validates them.
"""

from mgbench.taxonomy.loader import load_taxonomy
from mgbench.taxonomy.model import (
    CORE_SUITE,
    Dim,
    Family,
    PlanAxis,
    Realization,
    Taxonomy,
    TaxonomyError,
    Tradeoff,
    Variant,
    Workload,
)

__all__ = [
    "CORE_SUITE",
    "Dim",
    "Family",
    "PlanAxis",
    "Realization",
    "Taxonomy",
    "TaxonomyError",
    "Tradeoff",
    "Variant",
    "Workload",
    "load_taxonomy",
]
