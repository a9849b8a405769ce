"""The course mechanics the labs build on: learner-facing checks (print, or raise in strict mode), the
``uses`` guard, stub detection, hints, grading seeds, and the compact tracebacks learners see."""

from __future__ import annotations

import numpy as np
import pytest

import npusim as ns
from npusim import checks as check
from npusim import tracebacks
from npusim.checks import _core

pytestmark = pytest.mark.labs


def _stub():
    raise NotImplementedError("return the answer")


def test_failing_check_prints_in_a_notebook_and_raises_in_strict_mode(monkeypatch, capsys):
    monkeypatch.delenv("NPUSIM_STRICT", raising=False)
    check.peak_tflops(lambda cfg: 1.0)               # learner mode: no exception
    err = capsys.readouterr().err
    assert "FAILED" in err and "peak_tflops" in err and "expected" in err
    monkeypatch.setenv("NPUSIM_STRICT", "1")
    with pytest.raises(check.CheckFailed, match="expected"):
        check.peak_tflops(lambda cfg: 1.0)


def test_unfinished_check_is_one_line(monkeypatch, capsys):
    monkeypatch.delenv("NPUSIM_STRICT", raising=False)
    check.peak_tflops(lambda cfg: _stub())
    out = capsys.readouterr()
    assert out.out.strip() == "peak_tflops: not finished yet: return the answer"
    assert out.err == ""


def test_uses_skips_an_unfinished_cell_and_goes_on(monkeypatch, capsys):
    monkeypatch.delenv("NPUSIM_STRICT", raising=False)
    with check.uses("exercise 1"):
        _stub()
    assert "exercise 1 is not finished yet: return the answer" in capsys.readouterr().out
    with check.uses("exercise 2"):
        [][1]  # the learner's own bug: shown briefly, the notebook goes on
    err = capsys.readouterr().err
    assert "IndexError" in err and "cells below still run" in err and "Traceback" not in err


def test_uses_raises_in_strict_mode(monkeypatch):
    monkeypatch.setenv("NPUSIM_STRICT", "1")
    with pytest.raises(NotImplementedError):
        with check.uses("exercise 1"):
            _stub()


def test_finished_follows_notebook_names():
    ns_ = {"__name__": "__main__"}
    exec("class K:\n    def go(self):\n        raise NotImplementedError('x')\n"
         "def kernel():\n    K().go()\n"
         "class Done:\n    def go(self):\n        return 1\n"
         "def kernel2():\n    Done().go()\n", ns_)
    assert not check.finished(ns_["kernel"])      # the stub sits in a class the kernel uses
    assert check.finished(ns_["kernel2"])
    assert check.mine_or_reference("vector-add", ns_["kernel2"]) is ns_["kernel2"]


def test_mine_or_reference_says_so(capsys):
    from npusim.kernels.vector_add import vector_add

    assert check.mine_or_reference("vector-add", _stub) is vector_add
    assert "vector-add: not finished yet" in capsys.readouterr().out
    with pytest.raises(KeyError, match="no stand-in for 'copy-cycles'"):
        check.mine_or_reference("copy-cycles", _stub)
    with pytest.raises(TypeError, match="hint key and your object"):
        check.mine_or_reference(_stub, vector_add, "exercise 1")   # the old form names the reference itself


def test_hint_ladder(capsys):
    check.hint("vector-add")
    first = capsys.readouterr().out
    check.hint("vector-add", 3)
    last = capsys.readouterr().out
    assert first.startswith("Hint 1 of 3 for vector-add") and "stronger" in first
    assert last.startswith("Hint 3 of 3") and "stronger" not in last
    with pytest.raises(ValueError, match="levels 1 to 3"):
        check.hint("vector-add", 4)
    with pytest.raises(KeyError, match="exercises with hints"):
        check.hint("no-such-exercise")


def test_every_exercise_has_a_ladder_of_two_to_four():
    assert check.HINTS
    for key, ladder in check.HINTS.items():
        assert 2 <= len(ladder) <= 4, key
        assert all(isinstance(h, (str, check.Skeleton)) and len(str(h)) > 40 for h in ladder), key


def test_random_hidden_inputs_follow_the_grading_seed(monkeypatch):
    monkeypatch.delenv("NPUSIM_CHECK_SEED", raising=False)
    default = _core.case_rng("vector_add", 3).integers(1 << 30, size=4)
    assert np.array_equal(default, _core.case_rng("vector_add", 3).integers(1 << 30, size=4))
    monkeypatch.setenv("NPUSIM_CHECK_SEED", "12345")
    graded = _core.case_rng("vector_add", 3).integers(1 << 30, size=4)
    assert not np.array_equal(default, graded)
    # fixed adversarial inputs do not move with the seed
    fixed = _core.fixed_rng("vector_add", 3).integers(1 << 30, size=4)
    monkeypatch.setenv("NPUSIM_CHECK_SEED", "999")
    assert np.array_equal(fixed, _core.fixed_rng("vector_add", 3).integers(1 << 30, size=4))


def test_check_cases_change_with_the_seed(monkeypatch):
    from npusim.checks import lab01_vector_add as lab01

    monkeypatch.setenv("NPUSIM_CHECK_SEED", "1")
    a = lab01._add_cases()
    monkeypatch.setenv("NPUSIM_CHECK_SEED", "2")
    b = lab01._add_cases()
    assert a[:len(lab01._ADD_FIXED)] == b[:len(lab01._ADD_FIXED)]   # the fixed adversarial cases stay
    assert a[len(lab01._ADD_FIXED):] != b[len(lab01._ADD_FIXED):]   # the random ones move


def test_compact_traceback_shows_the_learners_frames_only():
    @ns.kernel
    def racy(x, y, n):
        pipe = ns.TPipe()
        q = ns.TQue(ns.TPosition.VECIN)
        pipe.init_buffer(q, 1, n * 2)
        t = q.alloc_tensor(ns.float16)
        ns.data_copy(t, x, n)
        ns.data_copy(y, t, n)  # no enque/deque: a race
        q.free_tensor(t)

    x = np.ones(64, np.float16)
    with pytest.raises(ns.RaceError) as info:
        ns.launch(racy, 1, x, np.zeros_like(x), 64)
    lines = tracebacks.render(info.value)
    text = "\n".join(lines)
    assert lines[0].startswith(f"{tracebacks.RED}RaceError")
    assert "ns.data_copy(y, t, n)" in text and "test_course_mechanics.py" in text
    assert "launch.py" not in text and "sanitizer.py" not in text
    assert "show_internals" in text
    ns.show_internals(True)
    try:
        assert tracebacks.render(info.value) is None          # IPython's full traceback
    finally:
        ns.show_internals(False)


def test_stub_renders_as_one_line():
    with pytest.raises(NotImplementedError) as info:
        _stub()
    lines = tracebacks.render(info.value)
    assert len(lines) == 1 and lines[0].startswith("not finished yet: return the answer")


def test_plain_python_errors_keep_ipythons_traceback():
    with pytest.raises(ZeroDivisionError) as info:
        1 / 0  # noqa: B018
    assert tracebacks.render(info.value) is None


def test_cell_names_as_jupyterlab_shows_them(monkeypatch):
    class Compiler:
        @staticmethod
        def format_code_name(name):
            return ("Cell", "In[7]") if name == "/tmp/ipykernel_1/123.py" else None

    class Shell:
        compile = Compiler()

    monkeypatch.setattr(tracebacks, "_ipython", lambda: Shell())
    assert tracebacks.site("/tmp/ipykernel_1/123.py", 12) == "In [7], line 12"
    assert tracebacks.site("/home/me/kernel.py", 3) == "kernel.py:3"
