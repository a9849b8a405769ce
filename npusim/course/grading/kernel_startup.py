"""The kernel's ``sitecustomize``: written into each submission's copy of the package, run by Python at
start-up in the kernel and in any Python the learner's code starts, before any learner code. It loads,
by path and standard library only, the audit hook (``audit.py``) and the forging watch (``integrity.py``);
the grader reaches :func:`verdict` through ``sys.modules['sitecustomize']``."""

import importlib.util
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "sitecustomize":
    _load("_npusim_grade_audit").install_from_env()
    _integrity = _load("_npusim_grade_integrity")
    _integrity.install()
    verdict = _integrity.verdict
