"""The sandbox's parts without a grading run: the audit record reaching the grader, clean-up that never
follows a link, the uid lease's one root-owned folder, code similarity, and the in-kernel forging watch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from fabricate import ROOT

pytestmark = pytest.mark.grading
GRADING = ROOT / "npusim" / "course" / "grading"


def test_the_audit_hook_sends_attempts_on_protected_folders_to_the_grader(tmp_path):
    from npusim.course.grading.sandbox import AuditReceiver

    guarded = tmp_path / "guarded"
    guarded.mkdir()
    (guarded / "f.py").write_text("x")
    receiver = AuditReceiver(tmp_path / "audit.sock")
    code = (f"import os, shutil, subprocess\n"
            f"open({str(guarded / 'new.py')!r}, 'w').close()\n"
            f"os.rename({str(guarded / 'f.py')!r}, {str(guarded / 'g.py')!r})\n"
            f"open({str(guarded / 'g.py')!r}).read()\n"          # reading is no attempt
            f"open({str(tmp_path / 'elsewhere.txt')!r}, 'w').close()\n"
            f"subprocess.run(['true', {str(guarded)!r}])\n")
    spec = {"socket": str(receiver.path), "protect": {str(guarded): "g:"}, "watch": [str(guarded)]}
    subprocess.run([sys.executable, "-c", f"exec(open({str(GRADING / 'audit.py')!r}).read()); install_from_env()\n{code}"],
                   env={**os.environ, "NPUSIM_GRADE_AUDIT": json.dumps(spec)}, check=True)
    time.sleep(0.5)
    got = receiver.close()
    assert got[:3] == ["write g:new.py", "rename g:f.py", "rename g:g.py"], got
    assert got[3].startswith("run a command on g:") and "true" in got[3] and len(got) == 4


def test_clean_up_never_follows_a_link(tmp_path):
    """Links to a canary folder: removing the folder holding them removes the links, never the canary's
    files, never its mode."""
    from npusim.course.grading.snapshot import remove_tree

    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "keep.txt").write_text("x")
    canary.chmod(0o751)
    box = tmp_path / "box"
    (box / "deep").mkdir(parents=True)
    (box / "deep" / "link").symlink_to(canary)
    (box / "link").symlink_to(canary)
    (box / "deep").chmod(0o500)
    remove_tree(box)
    assert not box.exists() and (canary / "keep.txt").read_text() == "x"
    assert oct(canary.stat().st_mode & 0o777) == "0o751"
    link = tmp_path / "link-only"
    link.symlink_to(canary)
    remove_tree(link)
    assert not link.exists() and canary.is_dir() and oct(canary.stat().st_mode & 0o777) == "0o751"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="the lease folder is root's")
def test_the_uid_lease_lives_in_one_root_owned_folder(tmp_path):
    from npusim.course.grading.sandbox import LEASES, UidLease, lease_folder

    assert str(LEASES) == "/run/npusim-grade", "one place, whatever TMPDIR a grader has"
    a, b = UidLease(tmp_path / "leases"), UidLease(tmp_path / "leases")
    assert a.uid != b.uid
    a.release()
    b.release()
    bad = tmp_path / "bad"
    bad.mkdir()
    bad.chmod(0o777)
    with pytest.raises(RuntimeError, match="mode 700"):
        lease_folder(bad)
    (tmp_path / "link").symlink_to(tmp_path / "leases")
    with pytest.raises(RuntimeError, match="must be a folder owned by root"):
        lease_folder(tmp_path / "link")


def test_similarity_sees_through_renaming_but_not_different_code():
    from npusim.course.grading.similarity import fingerprint, similarity

    a = "def f(xs):\n    # mine\n    out = []\n    for x in xs:\n        out.append(x * 2)\n    return out\n"
    b = 'def g(values):\n    """doc"""\n    acc = []\n    for v in values:\n        acc.append(v * 2)\n    return acc\n'
    c = "def f(xs):\n    return [2 * x for x in xs]\n"
    assert similarity(fingerprint(a), fingerprint(b)) == 1.0
    assert similarity(fingerprint(a), fingerprint(c)) < 0.8
    assert fingerprint("%timeit f()") == []


def test_the_forging_watch_notices_replaced_checks_and_seeds():
    """integrity.py in a fresh Python: a clean import gives no verdict; a replaced check, a replaced code
    object and a changed seed each give one naming it."""
    code = (f"import importlib.util, os, sys\n"
            f"spec = importlib.util.spec_from_file_location('w', {str(GRADING / 'integrity.py')!r})\n"
            f"w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w); w.install()\n"
            f"import npusim.checks as c\n"
            f"print(repr(w.verdict()))\n"
            f"case = sys.argv[1]\n"
            f"if case == 'attr': setattr(c, 'peak_' + 'tflops', lambda *a: None)\n"
            f"if case == 'code': c._core.passed.__code__ = (lambda check, detail: None).__code__\n"
            f"if case == 'seed': os.environ['NPUSIM_CHECK_SEED'] = '0'\n"
            f"w._STATE['first'] = ''\n"
            f"print(w.verdict())\n")
    env = {**os.environ, "NPUSIM_CHECK_SEED": "5", "OPENBLAS_NUM_THREADS": "1"}
    got = {case: subprocess.run([sys.executable, "-c", code, case], env=env, capture_output=True, text=True,
                                check=True).stdout.splitlines()[-2:] for case in ("none", "attr", "code", "seed")}
    assert all(lines[0] == "''" for lines in got.values()), got
    assert got["none"][1] == ""
    assert "npusim.checks.peak_tflops was replaced" in got["attr"][1]
    assert "the code of npusim.checks._core.passed was replaced" in got["code"][1]
    assert got["seed"][1] == "NPUSIM_CHECK_SEED was changed"


def test_workers_never_get_the_solutions(tmp_path):
    """What a Dask worker is sent: the package, no solutions; a task given solutions refuses to run."""
    from npusim.course.grading.cluster import grade_task
    from npusim.course.grading.snapshot import Snapshot
    from npusim.course.grading.submission import Options

    snap = Snapshot.take(ROOT)
    assert snap.solutions and snap.for_workers().solutions == {}
    assert snap.for_workers().package is snap.package
    with pytest.raises(RuntimeError, match="solutions"):
        grade_task("x.ipynb", b"{}", snap, {}, "auto", Options())


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="a PID namespace needs root")
def test_a_namespace_is_ended_only_while_its_recorded_first_process_lives():
    """A PID namespace's number is reused once it is gone: the clean-up of one submission must not end a
    later namespace that got the same number (another job's, another grader's). A record whose first
    process is not the one that lives there is not acted on; the right record ends the namespace."""
    from npusim.course.grading.processes import children_of, end_namespace, start_time

    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while not (first := children_of(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        first = first[0]
        ns, started = os.readlink(f"/proc/{first}/ns/pid"), start_time(first)
        assert ns != os.readlink("/proc/self/ns/pid") and started is not None
        end_namespace(ns, first, started + 1)           # a stale record: another process, same numbers
        time.sleep(0.2)
        assert proc.poll() is None and start_time(first) == started, "a stale record ended a namespace"
        end_namespace(ns, first, started)
        assert proc.wait(timeout=10) is not None and start_time(first) is None
    finally:
        proc.kill()
        proc.wait()
