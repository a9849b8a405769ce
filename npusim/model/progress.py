"""Progress of a long model run: :class:`npusim.progress.Progress` (kept here under its old name)."""

from __future__ import annotations

from ..progress import Progress  # noqa: F401
