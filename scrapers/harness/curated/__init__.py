"""Curated level-4 inputs: one reviewed entry per mined problem, sized from production model configs.

Public entry points: `default()` (the shipped registry), `load(dir)`, `Registry.match(candidate)`;
`python -m mgbench.scrapers.harness.curated` checks every file and lists the entries (docs/level4-curated.md)."""

from mgbench.scrapers.harness.curated.registry import Config, Entry, Registry, RegistryError, default, load

__all__ = ["Config", "Entry", "Registry", "RegistryError", "default", "load"]
