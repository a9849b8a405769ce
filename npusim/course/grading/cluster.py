"""Grading on a Dask distributed cluster (``npusim grade --scheduler ADDRESS``; ``pip install -e
'.[grade-dask]'`` on the grading machine and on every worker, from the same checkout).

The course snapshot goes to every worker once (``Client.scatter(..., broadcast=True)``); each submission
is one task that gets the file's bytes (so workers need no shared file system) and grades it exactly as a
local job does, isolated on its worker by that worker's means (:func:`.sandbox.choose_isolation`), and
returns its row. The caller checks its own course folder after each row and writes the gradebook. A task
whose worker dies is retried once on another; a task that still fails gives a ``grader-error`` row.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Callable

from .labs import Lab, labs_from_solutions
from .sandbox import choose_isolation
from .scoring import Grade
from .snapshot import Snapshot
from .submission import Options, grade_submission

_LABS: dict[str, dict[str, Lab]] = {}   # on a worker: the labs of each snapshot seen, by its digest


def grade_task(name: str, data: bytes, snapshot: Snapshot, isolation: str, options: Options) -> Grade:
    """One submission, on a worker: ``name`` is its path on the grading machine (for names and lab)."""
    labs = _LABS.get(snapshot.digest)
    if labs is None:
        labs = _LABS[snapshot.digest] = labs_from_solutions(snapshot.solutions, [])
    return grade_submission(Path(name), labs, snapshot, choose_isolation(isolation), options, data=data)


def grade_on_cluster(run: Any, paths: list[Path], scheduler,
                     progress: Callable[[Grade], None] | None = None) -> list[Grade]:
    """Grade ``paths`` of ``run`` (an :class:`.engine.GradingRun`) on the cluster at ``scheduler`` (an
    address such as ``tcp://host:8786``, a cluster object or a ``Client``); rows come back in the order of
    ``paths``."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise RuntimeError("--scheduler needs Dask: pip install -e '.[grade-dask]'") from None
    client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    grades: list[Grade | None] = [None] * len(paths)
    futures = {}
    token = secrets.token_hex(4)
    try:
        snap = client.scatter(run.snapshot, broadcast=True, hash=False)
        for i, path in enumerate(paths):
            try:
                data = path.read_bytes()
            except OSError:   # nothing to send: the row says why, as locally
                grades[i] = grade_submission(path, run.labs, run.snapshot, run.isolation, run.options)
                if progress:
                    progress(grades[i])
                continue
            run.started(i)
            fut = client.submit(grade_task, str(path), data, snap, run.requested_isolation, run.options,
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
