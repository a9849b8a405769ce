"""The ``npusim`` command line: ``npusim bench``, ``npusim labs make|check``, ``npusim grade``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _bench(args) -> int:
    from .bench import run

    return run(repeat=args.repeat, only=args.only)


def _labs(args) -> int:
    from .course.notebooks import Course, find_root

    course = Course(Path(args.root).resolve() if args.root else find_root())
    if args.action == "make":
        cleaned = course.clean_solutions() if args.clean_solutions else []
        for p in cleaned:
            print(f"cleared outputs of {p.relative_to(course.root)}")
        changed = course.make()
        for p in changed:
            print(f"wrote {p.relative_to(course.root)}")
        print(f"labs/ is current ({len(course.notebooks())} notebooks, {len(changed)} rewritten)")
        return 0
    problems = course.problems()
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"labs/ is current ({len(course.notebooks())} notebooks)")
    return 0


def _grade(args) -> int:
    from .course.grading.command import main as grade

    return grade(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="npusim", description="Ascend-style NPU simulator for teaching")
    sub = parser.add_subparsers(dest="command", required=True)

    b = sub.add_parser("bench", help="time the simulator against plain numpy; one JSON object per line")
    b.add_argument("--repeat", type=int, default=5, help="timed launches per case (median reported)")
    b.add_argument("--only", action="append", help="run only the named case(s)")
    b.set_defaults(func=_bench)

    labs = sub.add_parser("labs", help="generate labs/ from solutions/ (make) or verify it is current (check)")
    labs.add_argument("action", choices=["make", "check"])
    labs.add_argument("--root", help="course root (default: found from the current folder)")
    labs.add_argument("--clean-solutions", action="store_true", help="(make) also clear outputs in solutions/")
    labs.set_defaults(func=_labs)

    g = sub.add_parser("grade", help="run learner notebooks, each isolated, with the canonical check cells; "
                                     "write a CSV gradebook, a per-learner summary and Markdown feedback")
    from .course.grading.command import add_arguments

    add_arguments(g)
    g.set_defaults(func=_grade)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
