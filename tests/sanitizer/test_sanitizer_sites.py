"""The parts of every report: the learner's line (a notebook cell as JupyterLab shows it), a hint on every
error of the kernel API, and what initcheck counts as written."""

from __future__ import annotations

import ast
import os
import pathlib
import warnings

import numpy as np
import pytest

import npusim as ns

pytestmark = pytest.mark.sanitizer

P = ns.TPosition
H = ns.HardEvent
PKG = pathlib.Path(ns.__file__).parent


# ---------------------------------------------------------------------------------------------------------
# every error the kernel API raises has a hint
# ---------------------------------------------------------------------------------------------------------
KERNEL_API = sorted(PKG.glob("instructions/*.py")) + [PKG / f for f in (
    "memory.py", "tensor.py", "core.py", "pipes.py", "launch.py", "dtypes.py", "sanitizer.py", "initcheck.py")]


def test_every_error_the_kernel_api_raises_passes_a_hint():
    missing = []
    for path in KERNEL_API:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.id if isinstance(fn, ast.Name) else getattr(fn, "attr", "")
                if name.endswith("Error") and not any(k.arg == "hint" for k in node.keywords):
                    missing.append(f"{path.name}:{node.lineno} {name}")
    assert not missing, "errors without hint=: " + ", ".join(missing)
    assert len(KERNEL_API) > 10


def test_a_usage_error_in_a_kernel_carries_the_kernels_line_and_attributes():
    @ns.kernel
    def k(x):
        ns.data_copy(x, x, 16)  # GM -> GM

    line = k.__code__.co_firstlineno + 2
    with pytest.raises(ns.UsageError) as e:
        ns.launch(k, 1, np.zeros(16, np.float16))
    err = e.value
    assert err.where == f"{os.path.basename(__file__)}:{line}"
    assert "through UB" in err.hint and str(err).endswith(f"\n  at {err.where}\n  hint: {err.hint}")
    assert err.message.startswith("data_copy cannot move GM -> GM") and err.facts == {}
    # outside a kernel there is no kernel line
    assert ns.UsageError("x").where == ""


# ---------------------------------------------------------------------------------------------------------
# notebook cells: "In [7], line 3"
# ---------------------------------------------------------------------------------------------------------
class _Compiler:
    def __init__(self, cells: dict[str, int]):
        self.cells = cells

    def format_code_name(self, name):  # IPython's CachingCompiler.format_code_name
        if name in self.cells:
            return "Cell", f"In[{self.cells[name]}]"
        return None


class _Shell:
    def __init__(self, cells):
        self.compile = _Compiler(cells)


CELL = """\
def kernel(y):
    pipe = ns.TPipe()
    buf = ns.TBuf()
    pipe.init_buffer(buf, 64)
    ns.data_copy(y, buf.get(ns.float16), 32)
"""


def _cell_kernel(fname: str):
    scope = {"ns": ns}
    exec(compile(CELL, fname, "exec"), scope)
    return scope["kernel"]


LONG_CELL = "def kernel(y):\n    pipe = ns.TPipe()\n    buf = ns.TBuf()\n    pipe.init_buffer(buf, 64)\n" + "".join(
    f"    v{i} = {i}\n" for i in range(60)) + "    ns.data_copy(y, buf.get(ns.float16), 32)\n"


def test_the_line_deep_in_a_long_kernel_is_its_own_in_every_copy_of_the_code():
    # far into a long function the site comes from a memo per code object: two compilations of one text
    # under different names are equal code objects, and each keeps its own file; the line is right
    for fname in ("/tmp/first_copy.py", "/tmp/second_copy.py", "/tmp/first_copy.py"):
        scope = {"ns": ns}
        exec(compile(LONG_CELL, fname, "exec"), scope)
        for _ in range(2):   # the second launch reads the memo
            with pytest.raises(ns.UninitializedReadError) as e:
                ns.launch(scope["kernel"], 1, np.zeros(32, np.float16))
            assert e.value.where == f"{os.path.basename(fname)}:65"


def test_a_notebook_cell_is_named_as_jupyterlab_shows_it(monkeypatch):
    IPython = pytest.importorskip("IPython")
    fname = "/tmp/ipykernel_4242/3065602686.py"
    monkeypatch.setattr(IPython, "get_ipython", lambda: _Shell({fname: 7}))
    with pytest.raises(ns.UninitializedReadError) as e:
        ns.launch(_cell_kernel(fname), 1, np.zeros(32, np.float16))
    assert e.value.where == "In [7], line 5"
    assert "(data_copy) at In [7], line 5" in str(e.value)
    # a file IPython did not compile keeps its file name; outside IPython likewise
    other = "/tmp/some_module.py"
    with pytest.raises(ns.UninitializedReadError) as e:
        ns.launch(_cell_kernel(other), 1, np.zeros(32, np.float16))
    assert e.value.where == "some_module.py:5"
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    with pytest.raises(ns.UninitializedReadError) as e:
        ns.launch(_cell_kernel(fname), 1, np.zeros(32, np.float16))
    assert e.value.where == "3065602686.py:5"


@pytest.mark.slow
def test_in_a_real_kernel_the_error_names_the_cell(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    from npusim.course.runner import run_notebook

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import numpy as np\nimport npusim as ns"),
                nbformat.v4.new_code_cell(CELL + "ns.launch(kernel, 1, np.zeros(32, np.float16))")]
    path = tmp_path / "cell.ipynb"
    nbformat.write(nb, path)
    results = run_notebook(path, timeout=120)
    assert results[0].status == "ok", results[0].traceback
    assert results[1].ename == "UninitializedReadError", results[1].traceback
    assert "at In [2], line 5" in results[1].evalue


# ---------------------------------------------------------------------------------------------------------
# initcheck: what counts as written
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def half_written(y, written: int, read: int, repeat: int = 1):
    pipe = ns.TPipe()
    buf = ns.TBuf()
    pipe.init_buffer(buf, 2 * max(written, read))
    t = buf.get(ns.float16)
    if written:
        ns.duplicate(t, 1.0, written)
    for _ in range(repeat):
        ns.set_flag(H.V_MTE3, 0)
        ns.wait_flag(H.V_MTE3, 0)
        ns.data_copy(y, t, read)
        ns.set_flag(H.MTE3_V, 0)
        ns.wait_flag(H.MTE3_V, 0)


def test_the_report_gives_the_first_unwritten_run_and_how_many_bytes():
    with pytest.raises(ns.UninitializedReadError) as e:
        ns.launch(half_written, 1, np.zeros(64, np.float16), 32, 64)
    err = e.value
    assert err.facts["address"] == (64, 128) and err.facts["unwritten"] == 64
    assert "bytes [0x40, 0x80)" in str(err) and "64 of the 128 B it reads" in str(err)
    assert "VECCALC buffer 'buf'" in str(err) and err.facts["pipe"] == ns.Pipe.MTE3
    ns.launch(half_written, 1, np.zeros(64, np.float16), 64, 64)


def test_warn_mode_reports_an_unwritten_range_once_and_off_mode_skips_it():
    with pytest.warns(ns.SanitizerWarning) as w:
        res = ns.launch(half_written, 1, np.zeros(64, np.float16), 0, 64, 5, sanitize="warn")
    assert [str(r.message).split(":")[0] for r in w] == ["UninitializedReadError"]
    assert np.isnan(res["y"]).all()  # what the hardware would copy: whatever UB held (NaN here)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ns.launch(half_written, 1, np.zeros(64, np.float16), 0, 64, sanitize="off")
    assert np.isnan(res["y"]).all()


@ns.kernel
def gapped_copy(x, y, gap):
    """Two 32 B blocks into UB ``gap`` 32 B units apart, then the whole span out."""
    pipe = ns.TPipe()
    buf = ns.TBuf()
    pipe.init_buffer(buf, 256)
    t = buf.get(ns.float16)
    ns.data_copy(t, x, ns.DataCopyParams(block_count=2, block_len=1, dst_stride=gap))
    ns.set_flag(H.MTE2_MTE3, 0)
    ns.wait_flag(H.MTE2_MTE3, 0)
    ns.data_copy(y, t, 16 * (2 + gap))


def test_a_strided_write_leaves_its_gaps_unwritten():
    x = np.arange(64, dtype=np.float16)
    res = ns.launch(gapped_copy, 1, x, np.zeros(32, np.float16), 0)
    np.testing.assert_array_equal(res["y"], x[:32])
    with pytest.raises(ns.UninitializedReadError) as e:
        ns.launch(gapped_copy, 1, x, np.zeros(48, np.float16), 1)
    assert e.value.facts["address"] == (32, 64) and e.value.facts["unwritten"] == 32


@ns.kernel
def reuse_buffer(x, y):
    """A second tensor from the same buffer reads the first tile's bytes: stale, but written."""
    pipe = ns.TPipe()
    q = ns.TQueBind(P.VECIN, P.VECOUT)
    pipe.init_buffer(q, 1, 64)
    t = q.alloc_tensor(ns.float16)
    ns.data_copy(t, x, 32)
    q.enque(t)
    q.free_tensor(q.deque())
    t = q.alloc_tensor(ns.float16)
    q.enque(t)
    t = q.deque()
    ns.data_copy(y, t, 32)
    q.free_tensor(t)


def test_what_initialised_means_for_reused_buffers_and_gm():
    x = np.arange(32, dtype=np.float16)
    res = ns.launch(reuse_buffer, 1, x, np.zeros(32, np.float16))
    np.testing.assert_array_equal(res["y"], x)  # the old tile, as on hardware
    # GM: every byte of a launch argument counts as written (an np.empty output included)
    res = ns.launch(reuse_buffer, 1, np.empty(32, np.float16), np.zeros(32, np.float16))
    assert res["y"].shape == (32,)


def test_the_cost_of_initcheck_is_in_the_benchmark():
    from npusim import bench

    cases = bench.load()
    assert "initcheck" in cases
    line = cases["initcheck"](1)
    assert set(line["kernels"]) >= {"vector_add", "matmul"}
    for fig in line["kernels"].values():
        assert fig["with_s"] > 0 and fig["without_s"] > 0 and fig["cost"] == pytest.approx(
            fig["with_s"] / fig["without_s"] - 1, abs=0.01)
