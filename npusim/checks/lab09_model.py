"""Checks of lab 09 (the whole model), reading the profile: which ops cause the PCIe copies and what share
the launches take (exercise 1), and how cheap a launch must be for the model to be compute bound
(exercise 5). The graph passes' checks are in :mod:`.lab09_passes`.

Both run the learner's functions on the lab's kind of profile and on hidden ones the lab never shows
(other models, placements, batches and launch costs), so a hard-coded answer fails.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

import numpy as np

from ._core import CheckFailed, as_int, call_learner, passed
from ._flow import Skeleton

__all__ = ["read_profile", "launch_budget"]

_SETUP = "import numpy as np\nfrom npusim import checks as check\nfrom npusim import model as nm"
"""What a lab 09 skeleton needs outside the notebook: the lab's imports."""

HINTS = {
    "read-profile": (
        "Every copy is an event of the profile, and every event says which node it belongs to and which tensor "
        "it moves. Who *causes* a copy: the op that needs a tensor on the host, or the op whose output has to "
        "go back to the device? The breakdown (section 3's table) splits the model time by what ran.",
        "profile.events holds every copy (its kind says which way) with the node that needed it (e.node) and "
        "the tensor it moved (e.tensor, named after the node that produced it). For each copy decide which "
        "of the two names is the host op that caused it, then count by that node's op type "
        "(profile.graph.node(name).op). launch_share: the launches' part of the breakdown over the model time.",
        Skeleton(
            "def copies_by_op(profile):\n"
            "    counts = {}\n"
            "    for e in profile.events:\n"
            "        if e.kind in ('h2d', 'd2h'):\n"
            "            op = profile.graph.node(___).op     # the host op that caused this copy\n"
            "            counts[op] = counts.get(op, 0) + 1\n"
            "    return counts\n"
            "\n"
            "\n"
            "def launch_share(profile):\n"
            "    return ___\n",
            call="check.read_profile(copies_by_op, launch_share)", setup=_SETUP),
    ),
    "launch-budget": (
        "profile.with_system(...) re-times the same inference for another launch overhead without simulating "
        "a kernel again. The device share can only shrink as launches get dearer: search for the point where "
        "it crosses one half.",
        "A search on the launch overhead between a bound where the device is busy at least half the time and "
        "one where it is not (is 20 us always high enough?). Narrow it until the answer is as precise as the "
        "exercise asks. Which answer do you return when even the cheapest launch leaves the device idle "
        "most of the time?",
        Skeleton(
            "def compute_bound_launch_us(profile):\n"
            "    def busy(us):\n"
            "        return profile.with_system(profile.system.with_launch_overhead(us)).device_busy_ratio\n"
            "\n"
            "    if busy(0.1) < 0.5:\n"
            "        return 0.0\n"
            "    hi = 20.0\n"
            "    while busy(hi) >= 0.5:\n"
            "        hi *= 2\n"
            "    lo = ___                      # an overhead where the device is surely busy enough\n"
            "    for _ in range(40):           # each round halves the bracket\n"
            "        mid = (lo + hi) / 2\n"
            "        if ___:\n"
            "            lo = mid\n"
            "        else:\n"
            "            hi = mid\n"
            "    return lo\n",
            call="check.launch_budget(compute_bound_launch_us)", setup=_SETUP),
    ),
}

#: The device share that makes a model compute bound here, the smallest launch overhead the search starts
#: from, and the relative accuracy asked for.
BUSY_TARGET, MIN_LAUNCH_US, LAUNCH_RTOL = 0.5, 0.1, 0.01  # the lab asks for the budget to within 1 %


# --- the hidden profiles ----------------------------------------------------------------------------------

_HIDDEN = ("CNN 3-8-16 as captured, batch 2",
           "CNN with BatchNorm folded, pooling and flatten still on the host, batch 2",
           "CNN after all passes, batch 2",
           "ResNet (2 stages, width 8) as captured, 5 us launches, batch 1",
           "ResNet (2 stages, width 8) after all passes, batch 4")


@lru_cache(maxsize=None)
def _hidden_profile(what: str):
    """One hidden profile of exercise 1, built on first use."""
    from ..model import fuse_conv_bn_relu, images, offload, optimize, resnet, run_model, small_cnn

    cnn = small_cnn(channels=(8, 16), image=16, seed=5, softmax=False)
    res = resnet((1, 1), width=8, classes=10, seed=6)
    x16, x32, x4 = images(2, 16, seed=3), images(1, 32, seed=4), images(4, 32, seed=7)
    if what == _HIDDEN[0]:
        return run_model(cnn, x16, progress=False)
    if what == _HIDDEN[1]:
        return run_model(fuse_conv_bn_relu(cnn), x16, progress=False)
    if what == _HIDDEN[2]:
        return run_model(optimize(cnn, input_shape=x16.shape), x16, progress=False)
    if what == _HIDDEN[3]:
        before = run_model(res, x32, progress=False)
        return before.with_system(before.system.with_launch_overhead(5.0))
    return run_model(offload(fuse_conv_bn_relu(res), input_shape=x4.shape), x4, progress=False)


def _unfinished(name: str, fn: Callable) -> None:
    """Raise NotFinished for a stub before any hidden profile is simulated (a stub raises whatever it gets)."""
    from ._flow import finished

    if not finished(fn):
        call_learner(name, fn, None)


# --- exercise 1: read the profile --------------------------------------------------------------------------

def copies_by_op(profile) -> dict[str, int]:
    """The reference: PCIe copies per op type that causes them (a download: the host op reading it; an
    upload: the op that produced the tensor; the batch counts as ``input``, the result as ``output``)."""
    counts: dict[str, int] = {}
    for e in profile.events:
        if e.kind not in ("h2d", "d2h"):
            continue
        op = profile.graph.node(e.node if e.kind == "d2h" else e.tensor).op
        counts[op] = counts.get(op, 0) + 1
    return counts


def launch_share(profile) -> float:
    """The reference: the launch part of the breakdown over the model time."""
    return profile.breakdown_us["launch"] / profile.model_time_us


def _by(profile, key: Callable) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in profile.events:
        if e.kind in ("h2d", "d2h"):
            k = key(e)
            if k is not None:
                counts[k] = counts.get(k, 0) + 1
    return counts


def _count_causes(profile, got: dict) -> str:
    """Likely causes of a wrong count, from which known mistakes give exactly ``got``."""
    g = profile.graph
    known = [
        (_by(profile, lambda e: g.node(e.node).op if e.kind == "d2h" else None),
         "Only the downloads are counted: a host op's output goes back up to the device too (an 'h2d' event "
         "whose tensor is that op's output)."),
        (_by(profile, lambda e: g.node(e.node).op),
         "Every copy is counted for e.node, the op that needed it. An upload is needed by the device op that "
         "reads the tensor but caused by the host op that produced it: count an upload for e.tensor's op."),
        (_by(profile, lambda e: e.node if e.kind == "d2h" else e.tensor),
         "The keys are node names; the question is per op type (profile.graph.node(name).op: 'batchnorm', "
         "'maxpool', ...)."),
        (_by(profile, lambda e: g.node(e.tensor).op if e.kind == "h2d" else None),
         "Only the uploads are counted: the download of each host op's input is a copy too ('d2h')."),
    ]
    for counts, why in known:
        if counts == got:
            return " " + why
    total = profile.uploads + profile.downloads
    if sum(got.values()) != total:
        return (f" Your counts add up to {sum(got.values())}, but the profile has {total} copies "
                f"({profile.uploads} up, {profile.downloads} down): only the 'h2d' and 'd2h' events are copies, "
                f"each counted once.")
    return " Look at: which op causes each copy (a download: e.node's op; an upload: e.tensor's op)."


def _check_counts(name: str, fn, what: str, profile) -> None:
    want = copies_by_op(profile)
    got = call_learner(name, fn, profile, case={"profile": what})
    if not isinstance(got, dict):
        raise CheckFailed(name, f"copies_by_op must return a dict (op type -> number of copies), got "
                                f"{type(got).__name__}")
    got = {k: as_int(name, v, f"the count of {k!r}") for k, v in got.items()}
    if got != want:
        diff = ", ".join(f"{k}: expected {want.get(k, 0)}, got {got.get(k, 0)}"
                         for k in sorted(set(want) | set(got), key=str) if want.get(k, 0) != got.get(k, 0))
        raise CheckFailed(name, f"on the hidden profile [{what}] the copies per op differ ({diff})."
                          + _count_causes(profile, got))


def _check_share(name: str, fn, what: str, profile) -> None:
    want = launch_share(profile)
    got = call_learner(name, fn, profile, case={"profile": what})
    if isinstance(got, bool) or not isinstance(got, (int, float, np.floating, np.integer)):
        raise CheckFailed(name, f"launch_share must return a number (a fraction of the model time), got "
                                f"{type(got).__name__}")
    got = float(got)
    if abs(got - want) <= 1e-6 + 1e-6 * want:
        return
    t = profile.model_time_us
    why = " Look at: profile.breakdown_us['launch'] / profile.model_time_us."
    if want and abs(got - 100 * want) <= 1e-4 * 100 * want:
        why = " That is a percentage: return the fraction (0.25 for 25 %)."
    elif abs(got - profile.launch_us / t) <= 1e-6 * max(1.0, got):
        why = (f" That is every launch's time ({profile.launch_us:,.0f} us) over the model time; launches the "
               f"host makes while a kernel runs cost the model nothing. The breakdown's 'launch' part "
               f"({profile.breakdown_us['launch']:,.0f} us) counts only the time nothing else runs.")
    elif abs(got - profile.breakdown_us["launch"]) <= 1e-6 * max(1.0, got):
        why = " That is the time in microseconds: divide by the model time for its share."
    raise CheckFailed(name, f"on the hidden profile [{what}] launches take {want:.4f} of the model time, you "
                            f"said {got:.6g}." + why)


def read_profile(copies_by_op_fn: Callable, launch_share_fn: Callable) -> None:
    """Lab 09, exercise 1: ``copies_by_op_fn(profile) -> {op type: copies it causes}`` and
    ``launch_share_fn(profile) -> float`` (the launch part of the breakdown over the model time), on five
    hidden profiles (other models, placements, batches, launch costs)."""
    __tracebackhide__ = True
    name = "read_profile"
    for fn in (copies_by_op_fn, launch_share_fn):
        _unfinished(name, fn)
    for what in _HIDDEN:
        _check_counts(name, copies_by_op_fn, what, _hidden_profile(what))
    for what in _HIDDEN:
        _check_share(name, launch_share_fn, what, _hidden_profile(what))
    passed(name, f"copies per op and the launch share right on {len(_HIDDEN)} hidden profiles")


# --- exercise 5: the launch budget --------------------------------------------------------------------------

def _busy(profile, us: float) -> float:
    return profile.with_system(profile.system.with_launch_overhead(us)).device_busy_ratio


def compute_bound_launch_us(profile) -> float:
    """The reference: the largest launch overhead (us) at which ``device_busy_ratio >= 0.5``, to 0.1 %
    (0.0 if not even 0.1 us gets there)."""
    if _busy(profile, MIN_LAUNCH_US) < BUSY_TARGET:
        return 0.0
    lo, hi = MIN_LAUNCH_US, 20.0
    while _busy(profile, hi) >= BUSY_TARGET:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-3 * lo:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _busy(profile, mid) >= BUSY_TARGET else (lo, mid)
    return lo


def _deep_convs():
    """Two 512-channel 3x3 convs (ReLU fused) on 7 x 7 and a global average pool: few launches, long kernels."""
    from ..model.graph import Graph, Node
    from ..model.opset import default_placement

    rng = np.random.default_rng(8)
    conv = {"stride": 1, "padding": 1, "dilation": 1, "relu": True}
    nodes = [Node("x", "input")]
    for name, src in (("c1", "x"), ("c2", "c1")):
        nodes.append(Node(name, "conv2d", [src], dict(conv),
                          {"w": (rng.standard_normal((512, 512, 3, 3)) / 48).astype(np.float32),
                           "b": np.zeros(512, np.float32)}))
    nodes += [Node("pool", "avgpool", ["c2"]), Node("output", "output", ["pool"])]
    g = default_placement(Graph(nodes, "deep_convs"))
    g.node("pool").placement = "device"  # the average pool has a device kernel; its default is the host
    return g


_BUDGET = ("ResNet (2 stages, width 64) after all passes, 96 x 96, batch 2",
           "two 512-channel 3x3 convs on 7 x 7 and an average pool, all on the device of a one-core NPU",
           _HIDDEN[0])


@lru_cache(maxsize=None)
def _budget_profile(what: str):
    """One hidden profile of exercise 5: a budget below 20 us, one above it, and none at all."""
    from ..model import images, optimize, resnet, run_model

    if what == _BUDGET[0]:
        x = images(2, 96, seed=8)
        # width 64 at 96 x 96: its convs on all 24 cores stay long enough for a budget above 0 (at 64 x 64
        # the staged convs and the row-wise max pool leave the device busy less than half the time)
        return run_model(optimize(resnet((1, 1), width=64, classes=10, seed=6), input_shape=x.shape), x,
                         progress=False)
    if what == _BUDGET[1]:
        from ..config import a2
        from ..model import SystemConfig

        # one core: the convs run long enough for launches above 20 us to hide (on 24 cores they do not)
        x = np.random.default_rng(9).uniform(-1, 1, (1, 512, 7, 7)).astype(np.float16)
        return run_model(_deep_convs(), x, SystemConfig(hardware=a2.replace(name="a2-one-core", num_cores=1)),
                         progress=False)
    return _hidden_profile(what)


def launch_budget(fn: Callable) -> None:
    """Lab 09, exercise 5: ``fn(profile) -> float``, the largest launch overhead (us) at which the device
    computes at least half of the model time, within 1 % (0.0 when not even 0.1 us launches get there), on
    hidden profiles whose answers lie below 20 us, above it, and nowhere."""
    __tracebackhide__ = True
    name = "launch_budget"
    _unfinished(name, fn)
    for what in _BUDGET:
        prof = _budget_profile(what)
        want = compute_bound_launch_us(prof)
        got = call_learner(name, fn, prof, case={"profile": what})
        if isinstance(got, bool) or not isinstance(got, (int, float, np.floating, np.integer)):
            raise CheckFailed(name, f"return the launch overhead in us (a number), got {type(got).__name__}")
        got = float(got)
        if want == 0.0:
            if got != 0.0:
                raise CheckFailed(name, f"on the hidden profile [{what}] the device computes only "
                                        f"{_busy(prof, MIN_LAUNCH_US):.1%} of the time even with 0.1 us launches "
                                        f"(copies and host ops take the rest): expected 0.0, got {got:.4g}.")
            continue
        if abs(got - want) <= LAUNCH_RTOL * want:
            continue
        naive = prof.device_compute_us / prof.launches
        why = ""
        if abs(got - naive) <= 1e-6 * naive:
            why = (" That is the average kernel time (device compute / launches): kernels are not all alike, and "
                   "copies count too. Measure the share with profile.with_system(...) instead.")
        elif want > 20.0 and got <= 20.0 + 1e-9:
            why = " The answer is above 20 us here: raise the upper bound until the share drops below one half."
        elif 0 < got < 1 and abs(got - _busy(prof, want)) < 0.05:
            why = " That is a share; the question is the launch overhead in us."
        elif abs(got - want) <= 0.1 * want:
            why = (f" That is {abs(got - want) / want:.1%} {'below' if got < want else 'above'} it, and the answer "
                   f"must be within {LAUNCH_RTOL:.0%}: keep narrowing the search until its two bounds are that "
                   f"close.")
        raise CheckFailed(name, f"on the hidden profile [{what}] the device is busy >= 50 % up to {want:.3f} us "
                                f"per launch; you said {got:.4g} us (there the device is busy "
                                f"{_busy(prof, max(got, MIN_LAUNCH_US)):.1%}).{why}")
    passed(name, f"the launch budget within {LAUNCH_RTOL:.0%} on {len(_BUDGET)} hidden profiles (below 20 us, "
                 f"above it, and none)")
