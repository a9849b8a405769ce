"""Grading throughput: ``python -m npusim.course.grading.throughput [--submissions N] [--root COURSE]``.

Grades the same N submissions (lab 00 solved and lab 01 unattempted, alternating, taken from the course's
``solutions/`` and ``labs/``) with ``--jobs 1``, ``--jobs 2`` and on a local Dask cluster of two
single-threaded worker processes, and prints one JSON line per backend: ``backend``, ``submissions``,
``seconds`` (grading only; the cluster's start-up is ``startup_s``), ``per_minute``, and the isolation
used. On a shared machine compare the figures of one run with each other, not across runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .engine import GradingRun
from .labs import default_root
from .submission import Options


def _submissions(root: Path, folder: Path, n: int) -> list[Path]:
    sources = [root / "solutions" / "00_tour.ipynb", root / "labs" / "01_vector_add.ipynb"]
    paths = []
    for k in range(n):
        src = sources[k % 2]
        paths.append(folder / f"learner{k:03d}_{src.name}")
        shutil.copyfile(src, paths[-1])
    return paths


def measure(root: Path, n: int = 8) -> list[dict]:
    """Submissions per minute for ``--jobs 1``, ``--jobs 2`` and a local 2-worker Dask cluster."""
    run = GradingRun(root, Options(cell_timeout=120, seed=0))
    results = []
    with tempfile.TemporaryDirectory(prefix="npusim-throughput-") as tmp:
        paths = _submissions(root, Path(tmp), n)

        def record(backend: str, seconds: float, grades, **extra) -> None:
            bad = [g.status for g in grades if g.status != "ok"]
            results.append({"case": "grading", "backend": backend, "submissions": len(grades),
                            "seconds": round(seconds, 1), "per_minute": round(60 * len(grades) / seconds, 2),
                            "not_ok": bad, "isolation": run.isolation.describe(), **extra})
            print(json.dumps(results[-1]), flush=True)

        for jobs in (1, 2):
            t0 = time.perf_counter()
            grades = run.grade_local(paths, jobs)
            record(f"local --jobs {jobs}", time.perf_counter() - t0, grades)
        try:
            from distributed import LocalCluster
        except ImportError:
            print(json.dumps({"case": "grading", "backend": "dask", "error": "pip install -e '.[grade-dask]'"}))
            return results
        t0 = time.perf_counter()
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            startup = time.perf_counter() - t0
            t0 = time.perf_counter()
            grades = run.grade_on_cluster(paths, cluster.scheduler_address)
            record("dask LocalCluster, 2 workers x 1 thread", time.perf_counter() - t0, grades,
                   startup_s=round(startup, 1))
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m npusim.course.grading.throughput", description=__doc__.split("\n")[0])
    p.add_argument("--submissions", type=int, default=8, help="submissions per backend (default: 8)")
    p.add_argument("--root", help="the course (default: found from the current folder)")
    args = p.parse_args(argv)
    measure(Path(args.root).resolve() if args.root else default_root(), args.submissions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
