"""Grading on a Dask distributed cluster (``npusim grade --scheduler tls://HOST:8786 --tls-ca-file CA
--tls-cert CERT --tls-key KEY``; ``pip install -e '.[grade-dask]'`` on the grading machine and on every
worker, from the same checkout).

The cluster's connections are TLS with mutual authentication (``distributed.security.Security``,
``require_encryption``): only holders of a certificate signed by the course's CA, readable by the grader
and the workers alone, can connect. Workers get the course package without ``solutions/`` and the labs as
learners have them (check cells included: a submission is scored by check id), scattered once without
waiting for every worker (``Client.scatter``: workers fetch them when their first task needs them). Each
submission is one task that gets the file's bytes (no shared file system needed) and grades it exactly
as a local job does, in the same sandbox (:mod:`.sandbox`: a kernel in its own network namespace cannot
reach the scheduler or anything else), and returns its row. A task whose worker dies is retried once on
another; a task that still fails gives a ``grader-error`` row.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Callable

from .labs import Lab
from .sandbox import choose_isolation
from .scoring import Grade
from .snapshot import Snapshot
from .submission import Options, grade_submission


def security(ca_file: str, cert: str, key: str):
    """The grader's side of the cluster's TLS (``distributed.security.Security``)."""
    from distributed.security import Security

    return Security(tls_ca_file=ca_file, tls_client_cert=cert, tls_client_key=key, require_encryption=True)


def grade_task(name: str, data: bytes, snapshot: Snapshot, labs: dict[str, Lab], isolation: str,
               options: Options) -> Grade:
    """One submission, on a worker: ``name`` is its path on the grading machine (for names and lab)."""
    if snapshot.solutions:
        raise RuntimeError("a worker was sent the course's solutions; it must get Snapshot.for_workers()")
    return grade_submission(Path(name), labs, snapshot, choose_isolation(isolation), options, data=data)


def grade_on_cluster(run: Any, paths: list[Path], scheduler, progress: Callable[[Grade], None] | None = None,
                     security: Any = None) -> list[Grade]:
    """Grade ``paths`` of ``run`` (an :class:`.engine.GradingRun`) on the cluster at ``scheduler`` (an
    address such as ``tls://host:8786`` with its ``security``, or a ``Client``); rows come back in the
    order of ``paths``."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise RuntimeError("--scheduler needs Dask: pip install -e '.[grade-dask]'") from None
    client = scheduler if isinstance(scheduler, Client) else Client(scheduler, security=security)
    grades: list[Grade | None] = [None] * len(paths)
    futures = {}
    token = secrets.token_hex(4)
    try:
        snap, labs = client.scatter([run.snapshot.for_workers(), run.labs], hash=False)
        for i, path in enumerate(paths):
            try:
                data = path.read_bytes()
            except OSError:   # nothing to send: the row says why, as locally
                grades[i] = grade_submission(path, run.labs, run.snapshot, run.isolation, run.options)
                if progress:
                    progress(grades[i])
                continue
            run.started(i)
            fut = client.submit(grade_task, str(path), data, snap, labs, run.requested_isolation, run.options,
                                key=f"npusim-grade-{token}-{i}", pure=False, retries=1)
            futures[fut] = i
        for fut, result in as_completed(futures, with_results=True, raise_errors=False):
            i = futures[fut]
            if not isinstance(result, Grade):
                result = Grade(paths[i], paths[i].stem, None, status="grader-error",
                               reasons=[f"the cluster task failed: {type(result).__name__}: {result}"])
            grades[i] = run.finished(i, result)
            if progress:
                progress(grades[i])
    except BaseException:
        client.cancel(list(futures))
        raise
    finally:
        if client is not scheduler:
            client.close()
    return [g for g in grades if g is not None]
