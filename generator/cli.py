"""The `mgbench` command line: each pipeline package registers its own subcommands."""
from __future__ import annotations

import argparse
import importlib
import sys

# Each module defines register(subparsers); its handlers are set with set_defaults(func=...).
COMMAND_MODULES = ("generator.commands", "validation.commands", "validation.eval_commands",
                   "dataset.commands", "scrapers.commands", "taxonomy.commands")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mgbench", description="Generate, validate, publish and score multi-GPU kernel tasks.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue
            raise
        mod.register(sub)
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
