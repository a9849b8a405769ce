"""The course as it was when grading started: read and hashed once per run, copied read-only for each
submission, and compared afterwards so that a submission that changed anything is caught."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

_SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints"}
_SKIP_SUFFIXES = (".pyc", ".pyo")
_HERE = Path(__file__).resolve().parent
# the kernel's start-up code: the grader's own files, whatever the graded course holds
KERNEL_SIDE = {"sitecustomize.py": "kernel_startup.py", "_npusim_grade_audit.py": "audit.py",
               "_npusim_grade_integrity.py": "integrity.py"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_tree(folder: Path, prefix: str) -> dict[str, bytes]:
    """``{prefix/relative path: bytes}`` of every file below ``folder`` (no byte code, no checkpoints)."""
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            if name.endswith(_SKIP_SUFFIXES):
                continue
            path = Path(dirpath) / name
            out[f"{prefix}/{path.relative_to(folder).as_posix()}"] = path.read_bytes()
    return out


def remove_tree(path: Path) -> None:
    """Delete ``path`` even where it was made read-only, never following a symbolic link: a link a
    submission planted is removed itself, whatever it points at (its target is never chmod-ed or entered)."""
    path = Path(path)
    if os.path.islink(path):
        os.unlink(path)
        return
    if not path.is_dir():
        return
    for dirpath, dirnames, _ in os.walk(path, followlinks=False):
        for d in [dirpath, *(os.path.join(dirpath, n) for n in dirnames)]:
            try:
                if not os.path.islink(d):
                    os.chmod(d, stat.S_IRWXU)
            except OSError:
                pass
    shutil.rmtree(path, ignore_errors=True)   # rmtree itself unlinks links and never descends into them


@dataclass
class Snapshot:
    """The graded course's ``npusim`` package and ``solutions/``, held in memory with their hashes."""

    root: Path                          # the course graded (``--root``)
    package_dir: Path                   # where ``npusim`` was read from (``root/npusim`` when it has one)
    package: dict[str, bytes]           # "npusim/..." -> bytes, plus the kernel's start-up (KERNEL_SIDE)
    solutions: dict[str, bytes]         # "03_matmul.ipynb" -> bytes
    hashes: dict[str, str] = field(default_factory=dict)

    @classmethod
    def take(cls, root: Path) -> "Snapshot":
        """Read ``root``'s ``npusim/`` (else the installed package's) and ``solutions/*.ipynb``."""
        root = root.resolve()
        package_dir = root / "npusim"
        if not (package_dir / "__init__.py").is_file():
            import npusim

            package_dir = Path(npusim.__file__).resolve().parent
        package = _read_tree(package_dir, "npusim")
        package.update({name: (_HERE / source).read_bytes() for name, source in KERNEL_SIDE.items()})
        solutions = {p.name: p.read_bytes() for p in sorted((root / "solutions").glob("*.ipynb"))}
        snap = cls(root, package_dir, package, solutions)
        snap.hashes = {k: _sha(v) for k, v in package.items()}
        return snap

    def for_workers(self) -> "Snapshot":
        """This snapshot without ``solutions/`` (what a Dask worker gets: it grades by check id)."""
        return Snapshot(self.root, self.package_dir, self.package, {}, self.hashes)

    @property
    def digest(self) -> str:
        """One hash of the whole course (package and solutions), for the run record."""
        h = hashlib.sha256()
        for name, data in sorted([*self.package.items(), *(("solutions/" + k, v) for k, v in self.solutions.items())]):
            h.update(name.encode() + b"\0" + _sha(data).encode() + b"\n")
        return h.hexdigest()

    def write(self, dest: Path) -> Path:
        """The package (and ``sitecustomize.py``) under ``dest``, read-only: files 444, folders 555."""
        for name, data in self.package.items():
            path = dest / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o444)
        for dirpath, dirnames, _ in os.walk(dest):
            for d in dirnames:
                os.chmod(os.path.join(dirpath, d), 0o555)
        dest.chmod(0o555)
        return dest

    def changes(self, dest: Path) -> list[str]:
        """What differs in a copy written by :meth:`write`: ``changed X``, ``deleted X``, ``added X``."""
        found = []
        for name, digest in self.hashes.items():
            path = dest / name
            try:
                if _sha(path.read_bytes()) != digest:
                    found.append(f"changed {name}")
            except OSError:
                found.append(f"deleted {name}")
        for dirpath, dirnames, filenames in os.walk(dest):
            for n in filenames:
                name = (Path(dirpath) / n).relative_to(dest).as_posix()
                if name not in self.hashes:
                    found.append(f"added {name}")
        return found

    def _course_files(self) -> dict[str, Path]:
        files = {f"solutions/{k}": self.root / "solutions" / k for k in self.solutions}
        files.update({k: self.package_dir / k[len("npusim/"):] for k in self.package if k.startswith("npusim/")})
        return files

    def course_changes(self) -> list[str]:
        """What differs between the course folder now and this snapshot (files added to ``npusim/`` or
        ``solutions/`` included)."""
        found = []
        expected = {**{k: _sha(v) for k, v in self.package.items()},
                    **{f"solutions/{k}": _sha(v) for k, v in self.solutions.items()}}
        for name, path in self._course_files().items():
            try:
                if _sha(path.read_bytes()) != expected[name]:
                    found.append(f"changed {name}")
            except OSError:
                found.append(f"deleted {name}")
        now = set(_read_tree(self.package_dir, "npusim")) if self.package_dir.is_dir() else set()
        now |= {f"solutions/{p.name}" for p in (self.root / "solutions").glob("*.ipynb")}
        found += [f"added {name}" for name in sorted(now - set(expected))]
        return found

    def restore_course(self, save_to: Path | None = None) -> list[str]:
        """Put the course folder back as in the snapshot (rewrite changed and deleted files, remove added
        ones), first copying each version found to ``save_to`` (an edit made during grading is not lost);
        returns what was done."""
        done = []
        data = {**self.package, **{f"solutions/{k}": v for k, v in self.solutions.items()}}
        files = self._course_files()
        for change in self.course_changes():
            verb, name = change.split(" ", 1)
            path = files.get(name) or (self.package_dir / name[len("npusim/"):] if name.startswith("npusim/")
                                       else self.root / name)
            try:
                if save_to is not None and path.is_file():
                    (save_to / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, save_to / name)
                if verb == "added":
                    path.unlink()
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    if path.exists():
                        path.chmod(0o644)
                    path.write_bytes(data[name])
                done.append(f"{change}: restored")
            except OSError as e:
                done.append(f"{change}: could not restore ({e.strerror or e})")
        return done
