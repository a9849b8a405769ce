"""The ``npusim`` command line: ``npusim start``, ``npusim bench``, ``npusim labs make|check``, ``npusim grade``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose epilog may be a function, called only when the help is shown (the bench's
    list of cases imports the cases)."""

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


def _bench(args) -> int:
    from .bench import run

    only = list(args.only or []) + [f"compare_{name}" for name in args.compare or []]
    return run(repeat=args.repeat, only=only or None)


def _bench_cases() -> str:
    from .bench import describe

    return "cases (run one with --only NAME; the redraw_* cases need a clone of the course):\n" + describe()


def _course(args):
    from .course.notebooks import Course, find_root

    return Course(Path(args.root).resolve() if args.root else find_root())


def _labs(args) -> int:
    try:
        course = _course(args)
    except FileNotFoundError as e:
        print(f"npusim labs {args.action}: {e}", file=sys.stderr)
        return 2
    if args.action == "make":
        for p in course.clean_solutions() if args.clean_solutions else []:
            print(f"cleared outputs of {p.relative_to(course.root)}")
        report = course.make(force=args.force)
        for p in report.backups:
            print(f"kept your version in {p.relative_to(course.root)}")
        for p in report.written:
            print(f"wrote {p.relative_to(course.root)}")
        for p in report.refused:
            print(f"refused to overwrite {p.relative_to(course.root)}: it was edited since it was generated "
                  f"(your work?). Keep it, or run `npusim labs make --force` to replace it (a copy goes to "
                  f"{course.backup_dir.relative_to(course.root)}/)", file=sys.stderr)
        n = len(course.notebooks())
        if report.refused:
            print(f"labs/: {len(report.written)} written, {len(report.refused)} kept as edited ({n} notebooks)")
            return 1
        print(f"labs/ is current ({n} notebooks, {len(report.written)} rewritten)")
        return 0
    problems = course.problems(strict=args.strict)
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"labs/ is current ({len(course.notebooks())} notebooks{'' if args.strict else '; outputs ignored'})")
    return 0


def _grade(args) -> int:
    from .course.grading.command import main as grade

    return grade(args)


def _start(args) -> int:
    from .course.start import main as start

    return start(args)


LABS_HELP = """\
make   write labs/ (the learner notebooks) from solutions/: a missing lab, one that solutions/ has changed
       since, or one that was only run (outputs) is (re)written; a lab someone edited is never overwritten
       (npusim labs make names it and stops) unless --force, which first copies it to labs/.backup/.
check  say whether labs/ is what solutions/ generates: missing, stale or edited labs; a lab that was only
       run is fine. --strict (CI): labs also byte for byte as generated, solutions without outputs.
Both work inside a clone of the course repository (a folder with solutions/, labs/ and pyproject.toml)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="npusim", description="Ascend-style NPU simulator for teaching")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("start", help="open the labs in JupyterLab (at the repository root, on labs/00_tour.ipynb)",
                       description="Start JupyterLab for the labs: the file browser at the repository root (so "
                                   "docs/ and solutions/ open too), labs/00_tour.ipynb open; as root (a "
                                   "container) with --allow-root. Ctrl-C stops it.")
    s.add_argument("--port", type=int, help="port to listen on (default: 8888, or the next free one)")
    s.add_argument("--no-browser", action="store_true", help="do not open a browser (print the address)")
    s.add_argument("--ip", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    s.add_argument("--root", help="course root (default: found from the current folder)")
    s.add_argument("--check", action="store_true",
                   help="do not start: check that every lab's first cell imports, then exit (CI)")
    s.set_defaults(func=_start)

    b = sub.add_parser("bench", help="time the simulator against plain numpy, and every lab explorer's redraw; "
                                     "one JSON object per line", epilog=_bench_cases,
                       description="Time the simulator against plain numpy (the same tile loop) and the redraw "
                                   "of every lab's explorer; one JSON object per line, progress on stderr. "
                                   "Wall-clock times: compare ratios measured in one run.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("--repeat", type=int, default=5, help="timed launches per case, or passes over every "
                                                         "control of an explorer (median reported)")
    b.add_argument("--only", action="append", metavar="NAME", help="run only the named case(s)")
    b.add_argument("--compare", action="append", choices=["triton"],
                   help="time cases (a)-(c) beside Triton's CPU interpreter in one run (needs `pip install triton`)")
    b.set_defaults(func=_bench)

    labs = sub.add_parser("labs", help="generate labs/ from solutions/ (make) or check that it is current (check)",
                          description=LABS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    labs.add_argument("action", choices=["make", "check"])
    labs.add_argument("--root", help="course root (default: found from the current folder)")
    labs.add_argument("--clean-solutions", action="store_true", help="(make) also clear outputs in solutions/")
    labs.add_argument("--force", action="store_true",
                      help="(make) also replace labs someone edited, keeping a copy in labs/.backup/")
    labs.add_argument("--strict", action="store_true",
                      help="(check) labs byte for byte as generated and solutions without outputs (CI)")
    labs.set_defaults(func=_labs)

    g = sub.add_parser("grade", help="run learner notebooks, each isolated, with the canonical check cells; "
                                     "write a CSV gradebook, a per-learner summary and Markdown feedback")
    from .course.grading.command import add_arguments

    add_arguments(g)
    g.set_defaults(func=_grade)

    for action in sub._choices_actions:  # a subcommand's -h starts with what it does
        cmd = sub.choices[action.dest]
        cmd.description = cmd.description or action.help
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
