"""Grading throughput: ``python -m npusim.course.grading.throughput [--submissions N] [--root COURSE]``.

Grades the same N submissions (lab 00 solved and lab 01 unattempted, alternating, taken from the course's
``solutions/`` and ``labs/``) with ``--jobs 1``, ``--jobs 2`` and on a local Dask cluster of two
single-threaded worker processes, and prints one JSON line per backend: ``backend``, ``submissions``,
``seconds`` (grading only; the cluster's start-up is ``startup_s``), ``per_minute``, and the isolation
used. The cluster runs over TLS, as ``npusim grade --scheduler`` requires (certificates made with
``openssl`` for the run). On a shared machine compare the figures of one run with each other.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
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


def make_certificates(folder: Path) -> dict[str, str]:
    """A CA and one certificate signed by it for every endpoint of a test cluster (``openssl``), in
    ``folder`` (mode 700, files 600): ``{"ca": ..., "cert": ..., "key": ...}``."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca, key, cert, req = (folder / n for n in ("ca.pem", "key.pem", "cert.pem", "req.pem"))

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=npusim grading CA",
        "-keyout", str(folder / "ca-key.pem"), "-out", str(ca))
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=npusim grading", "-keyout", str(key), "-out", str(req))
    run("x509", "-req", "-in", str(req), "-CA", str(ca), "-CAkey", str(folder / "ca-key.pem"), "-CAcreateserial",
        "-days", "2", "-out", str(cert))
    for p in folder.iterdir():
        p.chmod(0o600)
    return {"ca": str(ca), "cert": str(cert), "key": str(key)}


def cluster_security(tls: dict[str, str]):
    """``distributed.security.Security`` for a scheduler, workers and client that share one certificate."""
    from distributed.security import Security

    return Security(tls_ca_file=tls["ca"], tls_client_cert=tls["cert"], tls_client_key=tls["key"],
                    tls_scheduler_cert=tls["cert"], tls_scheduler_key=tls["key"], tls_worker_cert=tls["cert"],
                    tls_worker_key=tls["key"], require_encryption=True)


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
        sec = cluster_security(make_certificates(Path(tmp) / "tls"))
        t0 = time.perf_counter()
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                          protocol="tls", security=sec) as cluster:
            startup = time.perf_counter() - t0
            t0 = time.perf_counter()
            grades = run.grade_on_cluster(paths, cluster.scheduler_address, security=sec)
            record("dask LocalCluster over TLS, 2 workers x 1 thread", time.perf_counter() - t0, grades,
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
