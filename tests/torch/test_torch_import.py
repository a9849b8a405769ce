"""Without PyTorch, npusim (checks included) still works and `import npusim.torch` says how to install it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.lab08

NO_TORCH = "import sys; sys.modules['torch'] = None  # makes `import torch` raise ImportError\n"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_TORCH + textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60)


def test_rest_of_npusim_works_without_torch():
    r = _run("""
        import numpy as np
        import npusim, npusim.ops, npusim.checks, npusim.conv
        y = npusim.ops.call("relu", np.array([-1.0, 2.0], np.float32)).out
        assert y.tolist() == [0.0, 2.0]
        assert hasattr(npusim.checks, "matmul_backward")   # lab 08's checks load without torch
        assert "torch" not in [m for m in sys.modules if sys.modules[m] is not None]
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_import_npusim_torch_without_torch_gives_one_clear_message():
    r = _run("""
        try:
            import npusim.torch
        except ImportError as e:
            print(type(e).__name__, isinstance(e, ImportError), e.__cause__ is None, e.__suppress_context__)
            print(e)
    """)
    assert r.returncode == 0, r.stderr
    first, message = r.stdout.split("\n", 1)
    assert first == "TorchNotInstalledError True True True"
    assert "pip install torch==2.13.0" in message and "[torch]" in message
    # uncaught: exactly one traceback, no "During handling of the above exception" chain
    r = _run("import npusim.torch")
    assert r.returncode == 1
    assert r.stderr.count("Traceback") == 1 and "During handling" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("npusim.torch.TorchNotInstalledError: npusim.torch needs PyTorch")
