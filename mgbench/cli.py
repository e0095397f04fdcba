"""The `mgbench` command line: the table below wires every pipeline stage's subcommands.

Each stage module defines register(subparsers), which adds its commands and sets their handlers with
set_defaults(func=...). A missing stage module is an ImportError here, never a command that silently
disappears. Handlers import their heavy or optional dependencies (datasets, ray, inspect_ai, ...)
inside themselves, so that `mgbench --help` stays fast and works without them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import mgbench.dataset.commands
import mgbench.generator.commands
import mgbench.scrapers.commands
import mgbench.taxonomy.commands
import mgbench.validation.commands
import mgbench.validation.eval.commands

Register = Callable[[argparse._SubParsersAction], None]

# Each stage's register function, in the order `mgbench --help` lists their commands.
STAGES: dict[str, Register] = {
    "generator": mgbench.generator.commands.register,  # generate, build
    "validation": mgbench.validation.commands.register,  # validate
    "eval": mgbench.validation.eval.commands.register,  # eval, score
    "dataset": mgbench.dataset.commands.register,  # publish
    "scrapers": mgbench.scrapers.commands.register,  # scrape (and its harness, crosscheck, ...)
    "taxonomy": mgbench.taxonomy.commands.register,  # taxonomy
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mgbench", description="Generate, validate, publish and score multi-GPU kernel tasks."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in STAGES.values():
        register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted; finished results are kept, re-run to resume", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"mgbench {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
