"""The ``npusim`` command: ``npusim bench`` (and more subcommands added by later modules)."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="npusim", description="Ascend-style NPU simulator for teaching")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="time the simulator against plain numpy; one JSON object per line")
    b.add_argument("--repeat", type=int, default=5, help="timed launches per case (median reported)")
    b.add_argument("--only", action="append", help="run only the named case(s)")
    args = parser.parse_args(argv)
    if args.command == "bench":
        from .bench import run

        return run(repeat=args.repeat, only=args.only)
    return 2


if __name__ == "__main__":
    sys.exit(main())
