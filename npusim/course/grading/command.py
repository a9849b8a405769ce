"""``npusim grade``: its options, and the command itself (grade, print one line per submission, write the
gradebook, the summary, the feedback and the run record)."""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from .engine import GradingRun
from .gradebook import fmt, write_feedback, write_gradebook, write_run_record, write_summary
from .labs import default_root
from .sandbox import Limits
from .scoring import Grade
from .similarity import flag_similar
from .submission import DEFAULT_CELL_TIMEOUT, Options
from .submissions import expand

DEFAULT_OUT_DIR = "grading-out"


def add_arguments(g: argparse.ArgumentParser) -> None:
    """The options of ``npusim grade``."""
    g.add_argument("submissions", nargs="+", metavar="SUBMISSION.ipynb",
                   help="learner notebooks (a folder stands for every .ipynb below it)")
    g.add_argument("--out-dir", help=f"folder of all outputs (default: the folder of --out, else "
                                     f"./{DEFAULT_OUT_DIR}/): summary.csv, summary.md, run.json")
    g.add_argument("--out", help="the CSV gradebook (default: OUT_DIR/gradebook.csv)")
    g.add_argument("--feedback-dir", help="one Markdown file per learner (default: OUT_DIR/feedback/)")
    g.add_argument("--timeout", type=float, default=DEFAULT_CELL_TIMEOUT,
                   help=f"seconds one cell may run (default: {DEFAULT_CELL_TIMEOUT:g})")
    g.add_argument("--notebook-timeout", type=float,
                   help="seconds the whole notebook may run (default: 3 x --timeout, at least 600)")
    g.add_argument("--jobs", type=int, default=1, help="submissions graded at once on this machine (default: 1)")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="grade on this Dask cluster instead (tls://host:8786, with the three --tls-* files; "
                        "needs .[grade-dask] here and on the workers); --jobs is then ignored")
    g.add_argument("--tls-ca-file", help="the cluster's CA certificate (PEM)")
    g.add_argument("--tls-cert", help="the grader's certificate, signed by that CA (PEM)")
    g.add_argument("--tls-key", help="the grader's private key (PEM; readable by the grader alone)")
    g.add_argument("--seed", type=int,
                   help="the checks' hidden seed (NPUSIM_CHECK_SEED); default: a fresh secret one, recorded "
                        "in OUT_DIR/run.json so that a re-grade can reproduce the marks")
    g.add_argument("--isolation", choices=["auto", "user", "copy"], default="auto",
                   help="user: each submission as a user id of its own (needs root); copy: a fresh read-only "
                        "copy per submission, checked by hashes; auto (default): user when root, else copy")
    g.add_argument("--memory-limit", type=float, default=Limits().memory / 2**30,
                   help="GiB of address space per process of a submission (0: no limit; default: %(default)g)")
    g.add_argument("--root", help="the course graded: its solutions/ and npusim/ checks (default: found "
                                  "from the current folder)")
    g.add_argument("--keep", help="(debugging) keep each restored notebook and its raw results in this folder")


def _outputs(args) -> tuple[Path, Path, Path]:
    out_dir = Path(args.out_dir) if args.out_dir else Path(args.out).parent if args.out else Path(DEFAULT_OUT_DIR)
    out = Path(args.out) if args.out else out_dir / "gradebook.csv"
    feedback = Path(args.feedback_dir) if args.feedback_dir else out_dir / "feedback"
    return out_dir, out, feedback


def main(args: argparse.Namespace) -> int:
    """``npusim grade``."""
    try:
        import nbval  # noqa: F401  (the grading subprocess needs it)
    except ImportError:
        print("npusim grade needs pytest and nbval: pip install -e '.[grade]'", file=sys.stderr)
        return 2
    tls = [args.tls_ca_file, args.tls_cert, args.tls_key]
    if args.scheduler and (not args.scheduler.startswith("tls://") or not all(tls)):
        print("npusim grade: --scheduler needs a tls:// address and --tls-ca-file, --tls-cert and --tls-key "
              "(a cluster without TLS accepts anyone who reaches its port; see the README)", file=sys.stderr)
        return 2
    root = Path(args.root).resolve() if args.root else default_root()
    out_dir, out, feedback = _outputs(args)
    for folder in (out_dir, feedback, out.parent):
        folder.mkdir(parents=True, exist_ok=True)
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
    options = Options(cell_timeout=args.timeout, notebook_timeout=args.notebook_timeout, seed=args.seed,
                      limits=Limits(memory=int(args.memory_limit * 2**30)), keep=args.keep)
    problems: list[str] = []
    try:
        run = GradingRun(root, options, isolation=args.isolation, problems=problems,
                         save_changes=out_dir / "course-changes")
    except ValueError as e:
        print(f"npusim grade: {e}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"warning: solutions/{problem}", file=sys.stderr)
    if not run.labs:
        print(f"no labs in {root / 'solutions'}", file=sys.stderr)
        return 2
    paths = expand(args.submissions)
    if not paths:
        print("no submissions given", file=sys.stderr)
        return 2
    where = f"the Dask cluster at {args.scheduler}" if args.scheduler else f"{args.jobs} local job(s)"
    print(f"grading {len(paths)} submission(s) of {root} on {where}; isolation: {run.isolation.describe()}",
          flush=True)
    lock = threading.Lock()

    def progress(g: Grade) -> None:
        with lock:
            print(f"{g.learner:<16} {g.lab or '?':<16} {fmt(g.total):>4}/{fmt(g.max_points):<4} "
                  f"{g.status:<16} {g.seconds:6.1f} s  {g.path}", flush=True)

    started, t0 = datetime.datetime.now(datetime.timezone.utc), time.perf_counter()
    if args.scheduler:
        from .cluster import security

        grades = run.grade_on_cluster(paths, args.scheduler, progress, security(*tls))
    else:
        grades = run.grade_local(paths, args.jobs, progress)
    seconds = time.perf_counter() - t0
    similar = flag_similar(grades, run.labs, run.snapshot.solutions)
    write_gradebook(grades, run.labs, out)
    write_summary(grades, run.labs, out_dir)
    files = write_feedback(grades, feedback)
    per_minute = 60 * len(grades) / seconds if seconds > 0 else 0.0
    write_run_record(out_dir / "run.json", {
        "seed": run.options.seed, "started": started.isoformat(timespec="seconds"), "seconds": round(seconds, 1),
        "submissions": len(grades), "submissions_per_minute": round(per_minute, 2),
        "statuses": dict(Counter(g.status for g in grades)),
        "backend": f"dask {args.scheduler}" if args.scheduler else f"local, {args.jobs} job(s)",
        "isolation": run.isolation.describe(), "course": str(root), "course_sha256": run.snapshot.digest,
        "checks_from": str(run.snapshot.package_dir), "course_repairs": run.course_repairs,
        "cell_timeout": args.timeout, "notebook_timeout": options.notebook_timeout,
        "memory_limit_gib": args.memory_limit, "similar_flags": similar, "python": platform.python_version(),
        "gradebook": str(out), "feedback": str(feedback)})
    print(f"graded {len(grades)} submission(s) in {seconds:.1f} s ({per_minute:.1f} per minute) on {where}; "
          f"gradebook: {out}; summary and run record (seed): {out_dir}/; feedback: {len(files)} file(s) in "
          f"{feedback}/")
    if run.course_repairs:
        print("warning: the course folder was changed during grading and has been restored (the versions "
              f"found are in {out_dir / 'course-changes'}/): " + "; ".join(run.course_repairs), file=sys.stderr)
    return 0
