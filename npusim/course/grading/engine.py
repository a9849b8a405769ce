"""A grading run: the course snapshot, the labs, the isolation and the seed, shared by every submission;
submissions graded on local threads (``--jobs``) or as tasks of a Dask cluster (``--scheduler``)."""

from __future__ import annotations

import secrets
import threading
from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Callable, Iterable

from .labs import Lab, labs_from_solutions
from .nbval_run import LIVE, LIVE_LOCK
from .processes import kill_tree
from .sandbox import Isolation, choose_isolation
from .scoring import Grade
from .snapshot import Snapshot
from .submission import Options, grade_submission


class GradingRun:
    """Everything fixed for one run: the course as it was at the start (:class:`Snapshot`), its labs, how
    submissions are isolated here, and the options (seed included: a fresh secret one unless given)."""

    def __init__(self, root: Path, options: Options | None = None, *, isolation: str = "auto",
                 problems: list[str] | None = None, save_changes: Path | None = None) -> None:
        self.snapshot = Snapshot.take(root)
        self.labs: dict[str, Lab] = labs_from_solutions(self.snapshot.solutions, problems)
        self.requested_isolation = isolation
        self.isolation: Isolation = choose_isolation(isolation)
        options = options or Options()
        if options.seed is None:
            options = replace(options, seed=secrets.randbits(32))
        self.options = options
        self.course_repairs: list[str] = []
        self.save_changes = save_changes        # where the versions of changed course files go before repair
        self._lock = threading.Lock()
        self._running: set[int] = set()

    # --- the course folder between submissions ---------------------------------------------------------

    def started(self, index: int) -> None:
        with self._lock:
            self._running.add(index)

    def finished(self, index: int, grade: Grade) -> Grade:
        """Check the course folder after submission ``index`` and repair it. No kernel can see the course
        (each runs on a root of its own), so a change is not put on any submission: it is reported and
        undone, the versions found kept in ``save_changes``."""
        with self._lock:
            self._running.discard(index)
            if self.snapshot.course_changes():
                self.course_repairs += self.snapshot.restore_course(self.save_changes)
        return grade

    # --- local threads ---------------------------------------------------------------------------------

    def grade_local(self, paths: Iterable[Path], jobs: int = 1,
                    progress: Callable[[Grade], None] | None = None) -> list[Grade]:
        """Grade ``paths`` with up to ``jobs`` at once; rows come back in the order of ``paths``."""
        paths = list(paths)
        grades: list[Grade | None] = [None] * len(paths)

        def one(i: int) -> Grade:
            self.started(i)
            g = grade_submission(paths[i], self.labs, self.snapshot, self.isolation, self.options)
            return self.finished(i, g)

        pool = ThreadPoolExecutor(max_workers=max(1, jobs))
        try:
            futures = {pool.submit(one, i): i for i in range(len(paths))}
            for fut in as_completed(futures):
                i = futures[fut]
                grades[i] = fut.result()
                if progress:
                    progress(grades[i])
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            with LIVE_LOCK:
                for proc in list(LIVE):
                    kill_tree(proc)
            raise
        pool.shutdown()
        return [g for g in grades if g is not None]

    def grade_on_cluster(self, paths: Iterable[Path], scheduler, progress: Callable[[Grade], None] | None = None,
                         security=None) -> list[Grade]:
        """Grade ``paths`` as tasks of the Dask cluster at ``scheduler`` (see :mod:`.cluster`)."""
        from .cluster import grade_on_cluster

        return grade_on_cluster(self, list(paths), scheduler, progress, security)
