"""Figures of lab 08: the three layers, the transposed convolution, training curves, step-time
breakdown, fp16 gradient histograms, and the memory saved for backward. Each returns a matplotlib
``Figure`` built without pyplot (it shows inline in a notebook and leaks nothing), like
:mod:`npusim.views.charts`."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from .. import chartstyle as palette
from ..views.charts import DPI  # also lets a bare Figure display inline in IPython
from .kernels import Recording, dilate_pad, grad_input_plan
from .memory import SavedTensorMeter
from .training import FP16_NORMAL, FP16_TINY, GradientReport, TrainRun, scale_text
from ..chartstyle import readable

_COLOURS = palette.SERIES_COLOURS[1:] + palette.SERIES_COLOURS[:1]   # one per layer or run, in order

_RANGE = palette.RANGE_COLOURS


def _figure(w: float, h: float) -> Figure:
    return Figure(figsize=(w, h), dpi=DPI)


def three_layers() -> Figure:
    """The three layers between a PyTorch model and the AI core, here and on a real Ascend stack."""
    fig = _figure(9.5, 4.2)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 5.4)
    ax.axis("off")
    rows = [
        ("model", "nn.Module, autograd, optimiser", "y = model(x); loss.backward()", "PyTorch", "#eeeeee"),
        ("framework adapter", "npusim.torch: torch.library custom op\n+ fake (shapes) + register_autograd",
         "torch.ops.npusim.conv2d", "torch_npu / op-plugin\n(EXEC_NPU_CMD(aclnnXxx, ...))", "#dbe9f6"),
        ("wrapping layer", "npusim.ops: OpDef, validate, infer_shape,\ntiling (+ cache), launch",
         "ops.get_workspace_size / execute", "aclnn two-stage API\n(GetWorkspaceSize + aclnnXxx)", "#fde9d9"),
        ("kernel", "npusim kernels on the simulated AI core\n(Cube, Vector, MTE, queues)",
         "launch(kernel, block_dim, ...)", "Ascend C kernel\n<<<blockDim>>> on AI cores", "#e2f0d9"),
    ]
    for i, (name, here, call, real, colour) in enumerate(rows):
        y0 = 4.1 - i * 1.3
        ax.add_patch(FancyBboxPatch((0.2, y0), 6.1, 1.0, boxstyle="round,pad=0.02", fc=colour, ec="#555555"))
        ax.text(0.35, y0 + 0.72, name, fontsize=11, weight="bold", va="center")
        ax.text(0.35, y0 + 0.32, here, fontsize=8.5, va="center")
        ax.text(6.15, y0 + 0.72, call, fontsize=8, va="center", ha="right", family="monospace", color="#333333")
        ax.add_patch(FancyBboxPatch((6.7, y0), 3.1, 1.0, boxstyle="round,pad=0.02", fc="white", ec="#999999",
                                    ls="--"))
        ax.text(8.25, y0 + 0.5, real, fontsize=8.5, va="center", ha="center", color="#444444")
        if i:
            ax.add_patch(FancyArrowPatch((3.2, y0 + 1.28), (3.2, y0 + 1.02), arrowstyle="-|>",
                                         mutation_scale=12, color="#555555"))
    ax.text(3.25, 5.25, "here (npusim)", ha="center", fontsize=10, style="italic")
    ax.text(8.25, 5.25, "on a real Ascend stack", ha="center", fontsize=10, style="italic")
    return readable(fig)


def transposed_conv(h: int = 5, k: int = 3, stride: int = 2, padding: int = 1, dilation: int = 1) -> Figure:
    """grad_input as a convolution: the (Ho x Wo) grad with stride-1 zeros inserted and padded, over which
    the flipped kernel slides with stride 1 to give an H x W result."""
    ho = (h + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    g = np.arange(1, ho * ho + 1, dtype=np.float32).reshape(1, 1, ho, ho)
    pads, _ = grad_input_plan(g.shape, (1, 1, k, k), (h, h), stride, padding, dilation)
    big = dilate_pad(g, stride, pads)[0, 0]
    fig = _figure(8.5, 3.9)
    gs = fig.add_gridspec(1, 2, width_ratios=[g.shape[3] + 1, big.shape[1] + 1])
    a1, a2 = fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[0, 1])
    for ax, img, title in ((a1, g[0, 0], f"grad: {ho}x{ho} (Ho x Wo)"),
                           (a2, big, f"zeros inserted (stride {stride}), padded {pads[0]} / {pads[1]}: "
                                     f"{big.shape[0]}x{big.shape[1]}")):
        ax.imshow(img > 0, cmap="Blues", vmin=0, vmax=2.5)
        for (r, c), v in np.ndenumerate(img):
            ax.text(c, r, f"{int(v)}" if v else "0", ha="center", va="center", fontsize=8,
                    color="black" if v else "#aaaaaa")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(title, fontsize=9)
    span = dilation * (k - 1) + 1
    a2.add_patch(Rectangle((-0.5, -0.5), span, span, fill=False, ec="#d62728", lw=2))
    a2.set_xlabel(f"red: the flipped {k}x{k} kernel, sliding with stride 1 -> {h}x{h} outputs", color="#d62728",
                  fontsize=8)
    fig.suptitle(f"grad_input of a {k}x{k} conv (stride {stride}, padding {padding}) on a {h}x{h} input "
                 f"is a stride-1 convolution", fontsize=10)
    fig.tight_layout()
    return readable(fig)


def loss_curves(runs: Sequence[TrainRun], title: str = "training on the simulated core") -> Figure:
    """Loss per step of each run (skipped steps marked x), and the share of gradient values an fp16 cast
    flushed to zero."""
    fig = _figure(9.5, 3.4)
    a1, a2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for i, run in enumerate(runs):
        c = _COLOURS[i % len(_COLOURS)]
        steps = np.arange(1, len(run.losses) + 1)
        a1.plot(steps, run.losses, "-", color=c, label=run.label, lw=1.6, alpha=0.85, gid="loss")
        bad = [s for s, k in zip(steps, run.skipped) if k]
        if bad:
            a1.plot(bad, [run.losses[s - 1] for s in bad], "x", color=c, ms=8)
        a2.plot(steps, np.array(run.flushed) * 100, "o-", color=c, ms=3, label=run.label, gid="flushed")
    lo = min((min(r.losses) for r in runs if r.losses), default=1.0)
    hi = max((max(r.losses) for r in runs if r.losses), default=1.0)
    if lo > 0 and hi / lo > 100:
        a1.set_yscale("log")
    a1.set_xlabel("step")
    a1.set_ylabel("cross-entropy loss")
    a1.set_title(title + " (x = step skipped: inf/NaN gradient)", fontsize=9)
    a1.legend(fontsize="small", frameon=False)
    a2.set_xlabel("step")
    for ax in (a1, a2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    a2.set_ylabel("% of non-zero grads flushed to 0")
    a2.set_title("gradients lost in the cast to fp16", fontsize=9)
    # fixed margins, not tight_layout: lab 08's explorer redraws this, and tight_layout draws it twice
    fig.subplots_adjust(left=0.07, right=0.985, bottom=0.15, top=0.9, wspace=0.25)
    return readable(fig)


def step_breakdown(rec: Recording, title: str = "one training step on the simulated core") -> Figure:
    """Simulated device time of one step by role (forward and the backward pieces), split into the
    operator's kernel and its layout transforms."""
    roles = list(rec.by_role())
    main = {r: 0.0 for r in roles}
    other = {r: 0.0 for r in roles}
    for x in rec.launches:
        (main if x.kernel == x.op else other)[x.role] += x.device_us
    fig = _figure(8.0, 0.45 * len(roles) + 1.5)
    ax = fig.add_subplot(1, 1, 1)
    ypos = np.arange(len(roles))[::-1]
    ax.barh(ypos, [main[r] for r in roles], color=palette.series(1), label="operator kernel", gid="kernel_us")
    ax.barh(ypos, [other[r] for r in roles], left=[main[r] for r in roles], color=palette.series(2),
            label="layout transforms", gid="transform_us")
    ax.set_yticks(ypos, roles)
    ax.set_xlabel("simulated device time (us)")
    fw, bw = rec.forward_us(), rec.backward_us()
    ax.set_title(f"{title}: forward {fw:.1f} us, backward {bw:.1f} us", fontsize=9)
    ax.legend(fontsize="small", frameon=False)
    # fixed margins in inches (see loss_curves); the left one fits the longest role (about 0.085 in a letter)
    width, height = fig.get_size_inches()
    left = (0.25 + 0.085 * max(map(len, roles), default=4)) / width
    fig.subplots_adjust(left=left, right=0.97, bottom=0.55 / height, top=1 - 0.35 / height)
    return readable(fig)


def gradient_histogram(report: GradientReport) -> Figure:
    """log2 |gradient x scale| at each simulated layer's output (fp32 gradients), against fp16's range:
    below 2^-25 a value rounds to 0, below 2^-14 it is subnormal (fewer bits). Titles give, per layer, the
    share of non-zero values the cast to fp16 flushes to 0."""
    from matplotlib.patches import Patch
    scales = sorted(report.flushed)
    fig = _figure(3.3 * len(scales) + 0.5, 3.5)
    axes = [fig.add_subplot(1, len(scales), i + 1) for i in range(len(scales))]
    bins = np.arange(-60, 12, 1.0)
    for ax, s in zip(axes, scales):
        for i, (name, g) in enumerate(report.grads.items()):
            a = g.abs().flatten()
            a = a[a > 0].double() * s
            ax.hist(np.log2(a.numpy()), bins=bins, histtype="step", color=_COLOURS[i], lw=1.5, label=f"layer {name}",
                    gid=f"hist_{name}")
        ax.axvspan(bins[0], np.log2(FP16_TINY) - 1, color=_RANGE["fp16: rounds to 0"], alpha=0.12)
        ax.axvspan(np.log2(FP16_TINY) - 1, np.log2(FP16_NORMAL), color=_RANGE["fp16: subnormal"], alpha=0.3)
        ax.set_xlabel(f"log2 |grad x {scale_text(s)}|")
        flushed = ", ".join(f"{n} {v:.0%}" for n, v in report.flushed[s].items())
        ax.set_title(f"loss scale {scale_text(s)}\nflushed to 0: {flushed}", fontsize=8.5)
    handles, labels = axes[0].get_legend_handles_labels()
    handles += [Patch(color=_RANGE["fp16: rounds to 0"], alpha=0.25), Patch(color=_RANGE["fp16: subnormal"], alpha=0.5)]
    labels += ["fp16: rounds to 0", "fp16: subnormal"]
    # below the axes: inside, it would cover the shaded fp16 ranges
    fig.legend(handles, labels, fontsize="x-small", frameon=False, loc="lower center", ncols=len(labels))
    axes[0].set_ylabel("gradient values at layer outputs")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return readable(fig)


def saved_tensors(meter: SavedTensorMeter, title: str = "memory held for backward") -> Figure:
    """Unique bytes held for backward after each save/free event (forward rising, backward falling), and
    the bytes each layer added."""
    fig = _figure(9.5, 3.4)
    a1, a2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    ev = meter.events
    x = np.arange(len(ev) + 1)
    live = [0] + [e.live_bytes for e in ev]
    a1.step(x, np.array(live) / 1024, where="post", color=palette.series(1), gid="live_bytes")
    first_bw = next((e.index for e in ev if e.phase != "forward"), None)
    if first_bw is not None:
        a1.axvspan(first_bw + 0.5, len(ev), color=_RANGE["backward"], alpha=0.5)
        a1.text(first_bw + 1, max(live) / 1024 * 0.95, "backward", color="#333333", fontsize=9, va="top")
    a1.set_xlabel("save / free event")
    a1.set_ylabel("KB held")
    a1.set_title(f"{title}: peak {meter.peak_bytes / 1024:.1f} KB, now {meter.live_bytes} B "
                 f"({meter.live_count} tensors)", fontsize=9)
    layers = meter.by_layer()
    names = list(layers)
    a2.barh(np.arange(len(names))[::-1], [layers[n] / 1024 for n in names], color=palette.series(3), gid="layer_bytes")
    a2.set_yticks(np.arange(len(names))[::-1], names, fontsize=8)
    a2.set_xlabel("KB saved for backward (each tensor counted once)")
    a2.set_title("by layer", fontsize=9)
    fig.tight_layout()
    return readable(fig)
