"""``npusim grade``: mark learner notebooks against the course's check cells, each submission isolated.

For each grading run the grader reads the course once (:mod:`.snapshot`: ``npusim/`` with its checks, and
``solutions/``) and hashes it. For each submission it

1. reads the file (never writes it) and tells its lab from its cell ids, else its file name
   (:mod:`.submissions`);
2. restores every check cell to the canonical one, after its exercise, whether edited, moved or deleted,
   and flags forged ones (:mod:`.restore`);
3. runs that copy under nbval on the grader's side (:mod:`.nbval_run`, :mod:`.plugin`), with only the
   notebook's kernel in the submission's sandbox (:mod:`.sandbox`, :mod:`.jail`): its own network, PID
   and mount namespaces, a new root holding the system, Python and a read-only copy of the package (no
   solutions, no course, no other submission), its own user id when the grader is root, resource limits;
4. verifies the copy's hashes, reads what the audit hook (:mod:`.audit`) sent to the grader, and what the
   kernel said after each cell about the checks and the seed (:mod:`.integrity`): ``tampered``,
   ``forged`` from the cell named;
5. scores each check from its cell's result and ``PASSED`` line (:mod:`.scoring`).

Submissions run on local threads (``--jobs``) or as Dask tasks over TLS (:mod:`.cluster`, ``--scheduler``);
the outputs are the gradebook, a per-learner summary (with copying flagged, :mod:`.similarity`), feedback
files and a run record (:mod:`.gradebook`).
"""

from .engine import GradingRun
from .gradebook import (csv_cell, feedback_markdown, safe_filename, summary_rows, write_feedback,
                        write_gradebook, write_summary)
from .labs import CheckSpec, Lab, default_root, labs_from_solutions, load_labs
from .nbval_run import CellRun, RunResult
from .restore import Restored, restore_checks
from .sandbox import Isolation, Limits, choose_isolation
from .scoring import CheckResult, Grade, score
from .snapshot import Snapshot
from .submission import DEFAULT_CELL_TIMEOUT, Options, default_notebook_timeout, grade_submission
from .submissions import expand, lab_from_ids, lab_from_name, learner_name

__all__ = [
    "GradingRun", "Options", "grade_submission", "default_notebook_timeout", "DEFAULT_CELL_TIMEOUT",
    "Snapshot", "Isolation", "Limits", "choose_isolation", "Lab", "CheckSpec", "load_labs",
    "labs_from_solutions", "default_root", "restore_checks", "Restored", "CellRun", "RunResult", "score",
    "CheckResult", "Grade", "expand", "lab_from_ids", "lab_from_name", "learner_name", "write_gradebook",
    "write_feedback", "write_summary", "summary_rows", "feedback_markdown", "csv_cell", "safe_filename",
]
