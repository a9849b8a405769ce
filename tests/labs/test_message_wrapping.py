"""Messages a learner reads are wrapped at 100 characters on word boundaries, never inside a number:
check failures (a sample of the wrong-solution corpus, as a notebook prints them), simulator errors (the
sanitizer's, shown by npusim.tracebacks) and usage errors."""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pytest

import npusim as ns
from npusim import tracebacks
from npusim.checks import CheckFailed
from npusim.checks._core import show_failure
from npusim.wrap import WIDTH, visible_len, wrap

from labcorpus import harness, lab00, lab01  # noqa: E402  (tests/labs is on sys.path)

pytestmark = pytest.mark.labs
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def assert_wrapped(original: str, shown: str) -> None:
    """Every line of ``shown`` fits :data:`WIDTH` (unless it is one word), and ``shown`` has the words of
    ``original`` in order, each whole: a break is only ever where ``original`` had a space."""
    for line in shown.split("\n"):
        assert visible_len(line) <= WIDTH or " " not in line.strip(), line
    words = lambda s: _ANSI.sub("", s).split()  # noqa: E731
    assert words(shown) == words(original)


def test_wrap_breaks_at_spaces_only_and_keeps_numbers_whole():
    msg = ("the kernel wrote 233 element(s) past the end of y (a GM tensor of 65,536 fp16 elements, offset "
           "1,048,576 B, 0.167 FLOP/B): the last tile must copy min(tile, total - offset) elements")
    out = wrap(msg)
    assert len(out.split("\n")) == 2 and out.split("\n")[1].startswith("  ")
    assert_wrapped(msg, out)
    assert "233 element(s)" in out and "1,048,576" in out
    assert wrap("short") == "short"
    assert wrap("  x" * 60).split("\n")[1].startswith("    ")   # keeps the line's indentation, plus two


def test_a_colour_escape_does_not_count_and_stays_on_the_first_line():
    msg = f"{tracebacks.RED}FAILED{tracebacks.RESET} check-x: " + "word " * 40
    out = wrap(msg)
    assert out.startswith(tracebacks.RED + "FAILED" + tracebacks.RESET)
    assert visible_len(out.split("\n")[0]) <= WIDTH


SAMPLE = [lab00.WRONG[0], lab00.WRONG[-1], *lab01.WRONG[:4]]


@pytest.mark.parametrize("mod, wrong", [(lab00 if w in lab00.WRONG else lab01, w) for w in SAMPLE],
                         ids=[w.name for w in SAMPLE])
def test_check_failures_print_wrapped(mod, wrong):
    with pytest.raises(CheckFailed) as info:
        harness.run_check(mod.LAB, mod.CHECKS[wrong.check], wrong.check, wrong)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
        show_failure(info.value)
    assert_wrapped(f"FAILED {info.value.check}: {info.value.message}", err.getvalue().rstrip("\n"))
    assert_wrapped(f"CheckFailed: {info.value}", "\n".join(info.value._render_traceback_()))


def test_simulator_and_usage_errors_are_shown_wrapped():
    @ns.kernel
    def overflow(x, y, n: int):
        pipe = ns.TPipe()
        q = ns.TQue(ns.TPosition.VECIN, 1)
        pipe.init_buffer(q, 1, 4096 * 1024)    # far more than the Unified Buffer holds

    shown = []
    for call in (lambda: ns.launch(overflow, 1, np.zeros(64, np.float16), np.zeros(64, np.float16), 64),
                 lambda: ns.get_config("no-such-preset-" + "x" * 20)):
        try:
            call()
        except Exception as e:  # noqa: BLE001 - any error the learner can meet
            lines = tracebacks.compact(e)
            head = f"{type(e).__name__}: {e}"
            n = len(wrap(head).split("\n"))      # the message's lines, then the learner's frames
            assert_wrapped(head, "\n".join(lines[:n]))
            assert all(visible_len(line) <= WIDTH for line in lines)
            shown.append(lines)
    assert len(shown) == 2


def test_a_failing_check_in_ipython_is_an_error_shown_by_its_own_handler(capsys):
    """In a kernel a failing check must stay an error (nbval and the grader see it) and render itself; a
    handler that fails would be unregistered by IPython and the cell reported as passing."""
    from IPython.core.interactiveshell import InteractiveShell

    from npusim import tracebacks

    shell = InteractiveShell.instance()
    try:
        assert tracebacks.install()
        res = shell.run_cell("from npusim import checks as check\ncheck.fold_bn(lambda *a: 1 / 0)")
        shown = capsys.readouterr()
    finally:
        InteractiveShell.clear_instance()
    assert type(res.error_in_exec).__name__ == "CheckFailed"
    assert "Custom TB Handler failed" not in shown.out + shown.err
    assert "[fold_bn]" in shown.out + shown.err


def test_the_stand_in_line_is_wrapped(capsys):
    """``mine_or_reference``'s "not finished yet" line (125 characters for lab 06's fused-pipeline) broke
    inside "yours" in the browser."""
    from npusim import checks as check
    from npusim.wrap import WIDTH

    def my_kernel():
        raise NotImplementedError

    check.mine_or_reference("fused-pipeline", my_kernel)
    out = capsys.readouterr().out
    assert "not finished yet" in out and "yours)." in out
    assert all(len(line) <= WIDTH for line in out.splitlines()) and len(out.splitlines()) == 2
