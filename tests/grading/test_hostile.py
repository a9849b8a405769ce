"""The hostile class (:mod:`hostile`) graded in one call with ``--jobs 2`` and once on a local Dask cluster
over TLS: exact marks and statuses, no attack gets through, the canary folders are untouched, nothing is
left running; and two graders with different temporary folders at once, one in copy isolation beside a
tamperer."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from fabricate import ROOT, write
from hostile import EXPECTED, LAB, SOLVED, _after, _lab, canary, corpus, course, state
from npusim.cli import main as cli
from npusim.course.grading.throughput import cluster_security, make_certificates

pytestmark = [pytest.mark.grading, pytest.mark.slow,
              pytest.mark.skipif(not (hasattr(os, "geteuid") and os.geteuid() == 0),
                                 reason="the sandbox's user ids need root (CI and this machine run as root)")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def left_behind(tmp: Path) -> list[int]:
    """Processes whose environment names a sandbox under ``tmp`` (``HOME=tmp/npusim-grade-...``)."""
    marker = f"{tmp}{os.sep}npusim-grade-".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if marker in (entry / "environ").read_bytes() and int(entry.name) != os.getpid():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    root = course(base / "course")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    ctx = {"course": root, "subs": base / "submissions", "canary": canary(base / "canary"),
           "canary2": canary(base / "canary2"), "checkout": ROOT, "port": listener.getsockname()[1],
           "scheduler": _free_port()}
    paths = corpus(root, ctx["subs"], ctx)
    (base / "tmp").mkdir()
    yield {**ctx, "base": base, "paths": paths, "tmp": base / "tmp",
           "canaries": {p: state(p) for p in (ctx["canary"], ctx["canary2"])}}
    listener.close()


def grade(setting, name: str, paths, *extra: str, tmp: Path | None = None) -> dict:
    out = setting["base"] / name
    buf, err = io.StringIO(), io.StringIO()
    old, tempfile.tempdir = tempfile.tempdir, str(tmp or setting["tmp"])
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
            code = cli(["grade", *map(str, paths), "--out-dir", str(out), "--root", str(setting["course"]),
                        "--timeout", "60", *extra])
    finally:
        tempfile.tempdir = old
    print(buf.getvalue(), err.getvalue())
    rows = {r["learner"]: r for r in csv.DictReader((out / "gradebook.csv").open(encoding="utf-8"))}
    return {"code": code, "rows": rows, "out": out, "stdout": buf.getvalue(), "stderr": err.getvalue()}


def assert_class(result, setting, expected=EXPECTED):
    assert result["code"] == 0, result["stderr"]
    rows = result["rows"]
    assert sorted(rows) == sorted(expected)
    for learner, (double, triple, status, flags) in expected.items():
        row = rows[learner]
        got = (int(row["check-double"]), int(row["check-triple"]), row["status"])
        assert got == (double, triple, status), (learner, row)
        for flag in flags:
            assert flag in row["flags"], (learner, flag, row["flags"])
    for path, before in setting["canaries"].items():
        assert state(path) == before, f"the canary {path} changed"
    assert left_behind(setting["tmp"]) == [], "a process of a submission outlived the grading"
    assert [p.name for p in setting["tmp"].iterdir()] == [], "sandboxes left behind"


@pytest.fixture(scope="module")
def local(setting):
    """The whole class in one call, two at a time, keeping the raw results (``--keep``)."""
    return grade(setting, "local", setting["paths"].values(), "--jobs", "2", "--seed", "7",
                 "--keep", str(setting["base"] / "kept"))


def test_every_mark_and_status_is_exact(local, setting):
    assert_class(local, setting)


def test_only_copies_are_flagged_and_the_pair_is_named(local):
    rows = local["rows"]
    for learner in ("bob", "nina", "sid", "abe"):
        assert "similar" not in rows[learner]["flags"], rows[learner]
    for learner in ("alice", "dora", "hank"):      # the reference itself: flagged as that, not as a pair
        flags = rows[learner]["flags"]
        assert flags.count("the reference answer") == 2 and "alice (" not in flags and "dora (" not in flags
    assert "the reference" not in rows["pat"]["flags"] and "similar 97_tru-double" not in rows["ivy"]["flags"]
    summary = (local["out"] / "summary.csv").read_text(encoding="utf-8")
    assert "similar 97_tru-double: 100% quinn" in summary


def test_forging_is_named_and_the_marks_before_it_are_kept(local):
    hank = (local["out"] / "feedback" / "hank.md").read_text(encoding="utf-8")
    assert "withheld: the checks or their seed were changed from inside the notebook at In [4]" in hank
    assert "PASSED trust_double" in hank, "the check before the forging cell keeps its mark"
    assert "after code cell 3 (In [4], id public-seed" in local["rows"]["hank"]["reason"]


def test_feedback_names_the_real_cell(local):
    ivy = (local["out"] / "feedback" / "ivy.md").read_text(encoding="utf-8")
    assert "ZeroDivisionError" in ivy and "In [2], line 2" in ivy, ivy


def test_the_audit_record_is_the_graders(local):
    reason = local["rows"]["abe"]["reason"]
    assert "course:npusim/checks/lab97_trust.py" in reason and "write npusim/checks/lab97_trust.py" in reason


def test_summary_max_counts_the_labs_handed_in(local):
    by = {r["learner"]: r for r in csv.DictReader((local["out"] / "summary.csv").open(encoding="utf-8"))}
    assert (by["alice"]["total"], by["alice"]["max"]) == ("2", "2")


def test_kept_results_are_the_graders_files_only(local, setting):
    kept = sorted(p.name for p in (setting["base"] / "kept" / f"sid_{LAB}").iterdir())
    assert "junit.xml" in kept and "cells.jsonl" in kept and not any("trap" in k for k in kept)


def test_a_tls_dask_cluster_gives_the_same_marks(setting, local):
    from distributed import LocalCluster

    tls = make_certificates(setting["base"] / "tls")
    sec = cluster_security(tls)
    os.environ["TMPDIR"] = str(setting["tmp"])      # the workers' sandboxes go there too
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, protocol="tls", security=sec,
                          scheduler_port=setting["scheduler"], dashboard_address=None) as cluster:
            address = cluster.scheduler_address
            assert address.startswith("tls://")
            result = grade(setting, "dask", setting["paths"].values(), "--scheduler", address, "--seed", "7",
                           "--tls-ca-file", tls["ca"], "--tls-cert", tls["cert"], "--tls-key", tls["key"])
    finally:
        del os.environ["TMPDIR"]
    assert_class(result, setting)
    keep = ["check-double", "check-triple", "status", "flags"]
    assert ({k: [r[c] for c in keep] for k, r in result["rows"].items()}
            == {k: [r[c] for c in keep] for k, r in local["rows"].items()})


def test_a_plain_tcp_scheduler_is_refused(setting, capsys):
    assert cli(["grade", str(setting["paths"]["alice"]), "--scheduler", "tcp://127.0.0.1:8786",
                "--root", str(setting["course"]), "--out-dir", str(setting["base"] / "refused")]) == 2
    assert "needs a tls:// address" in capsys.readouterr().err


def test_two_graders_with_different_temporary_folders(setting):
    """Two graders at once, each with its own TMPDIR (so nothing but /run/npusim-grade is shared): one in
    copy isolation grading an honest submission beside a tamperer (the bystander keeps its marks), the
    other as root grading two honest ones. Neither disturbs the other."""
    root, subs = setting["course"], setting["base"] / "pair"
    subs.mkdir()
    tamper = _after(_lab(root), "97_tru-double",
                    "import os, sys\npath = os.path.dirname(sys.modules['npusim'].__file__) + '/checks/lab97_trust.py'\n"
                    "try:\n    os.chmod(path, 0o644)\n    open(path, 'a').write('\\n')\nexcept OSError as e:\n"
                    "    print('refused:', e)\n", "attack-lib")
    a = [write(_lab(root, SOLVED), subs / f"amy_{LAB}.ipynb"), write(tamper, subs / f"tom_{LAB}.ipynb")]
    b = [write(_lab(root, SOLVED), subs / f"ben_{LAB}.ipynb"), write(_lab(root, SOLVED), subs / f"bea_{LAB}.ipynb")]
    tmps = [setting["base"] / "tmp-a", setting["base"] / "tmp-b"]
    for t in tmps:
        t.mkdir()
    results = {}

    def one(key, paths, tmp, *extra):
        env = {**os.environ, "TMPDIR": str(tmp)}
        out = setting["base"] / f"pair-{key}"
        subprocess.run([sys.executable, "-m", "npusim.cli", "grade", *map(str, paths), "--root", str(root),
                        "--out-dir", str(out), "--jobs", "2", "--timeout", "60", *extra],
                       env=env, capture_output=True, check=True)
        results[key] = {r["learner"]: r for r in csv.DictReader((out / "gradebook.csv").open(encoding="utf-8"))}

    threads = [threading.Thread(target=one, args=("a", a, tmps[0], "--isolation", "copy")),
               threading.Thread(target=one, args=("b", b, tmps[1]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (results["a"]["amy"]["total"], results["a"]["amy"]["status"]) == ("2", "ok"), results["a"]["amy"]
    assert results["a"]["tom"]["status"] == "tampered" and results["a"]["tom"]["total"] == "0"
    assert [(r["total"], r["status"]) for r in results["b"].values()] == [("2", "ok"), ("2", "ok")]
    for t in tmps:
        assert left_behind(t) == [] and list(t.iterdir()) == []
    assert json.loads((setting["base"] / "pair-a" / "run.json").read_text())["isolation"].startswith(
        "each submission's kernel as the grader's user")
