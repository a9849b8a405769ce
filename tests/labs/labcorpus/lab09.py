"""Wrong solutions of lab 09 (the whole model): reading the profile, BatchNorm folding, the fusion pass, the
placement pass, the launch budget."""

from .harness import Wrong

LAB = "09_model"
SETUP = ["09_mod-356a192b"]
FOLD = ["09_mod-fa35e192"]
CHECKS = {
    "check-read-profile": SETUP + ["09_mod-read"],
    "check-fold-bn": SETUP + FOLD,
    "check-graph-pass": SETUP + FOLD + ["09_mod-0716d970"],
    "check-placement": SETUP + ["09_mod-place"],
    "check-launch-budget": SETUP + ["09_mod-budget"],
}
WHO = 'op = profile.graph.node(e.node if e.kind == "d2h" else e.tensor).op'
SHARE = 'return profile.breakdown_us["launch"] / profile.model_time_us'
BIAS = "b = np.zeros_like(mean) if b is None else b"
FOLD_RET = "return (w * s[:, None, None, None]).astype(np.float32), ((b - mean) * s + beta).astype(np.float32)"
RELU_IF = 'if len(users) == 1 and users[0].op == "relu" and not conv.attrs.get("relu"):'
PLACE = 'node.placement = "device" if ok else "host"'
OK = "ok = nm.OPS[node.op].on_device(node, [shapes[i] for i in node.inputs], [dtypes[i] for i in node.inputs])"

WRONG = [
    # exercise 1: read the profile
    Wrong("downloads-only", "check-read-profile", "only the downloads",
          edits=(('if e.kind in ("h2d", "d2h"):', 'if e.kind == "d2h":'),),
          why="counts the downloads only: a host op's output going back up is a copy too"),
    Wrong("copy-for-the-reader", "check-read-profile", "caused by the host op that produced it",
          edits=((WHO, "op = profile.graph.node(e.node).op"),),
          why="attributes an upload to the device op that needed it, not to the host op that made the tensor"),
    Wrong("node-names", "check-read-profile", "node names",
          edits=((WHO, 'op = e.node if e.kind == "d2h" else e.tensor'),), why="counts per node, not per op type"),
    Wrong("uploads-only", "check-read-profile", "only the uploads",
          edits=(('if e.kind in ("h2d", "d2h"):', 'if e.kind == "h2d":'),), why="counts the uploads only"),
    Wrong("hard-coded-counts", "check-read-profile", "copies per op differ",
          cells={"09_mod-read": 'def copies_by_op(profile):\n    return {"batchnorm": 40, "maxpool": 2, "input": 1, '
                                '"avgpool": 1, "flatten": 1, "output": 1}\n\n\ndef launch_share(profile):\n'
                                '    return 0.35\n'},
          why="the lab's own answers typed in"),
    Wrong("every-launch", "check-read-profile", "while a kernel runs cost the model nothing",
          edits=((SHARE, "return profile.launch_us / profile.model_time_us"),),
          why="counts every launch, also those hidden behind a running kernel"),
    Wrong("launch-percent", "check-read-profile", "percentage",
          edits=((SHARE, SHARE + " * 100"),), why="a percentage instead of a fraction"),
    Wrong("launch-microseconds", "check-read-profile", "in microseconds",
          edits=((SHARE, 'return profile.breakdown_us["launch"]'),), why="the time, not its share"),
    # exercise 2: fold BatchNorm
    Wrong("fold-float64", "check-fold-bn", "dtype float64, expected float32",
          edits=(("s = gamma / np.sqrt(var + eps)", "s = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)"),
                 (FOLD_RET, "return w * s[:, None, None, None], (b - mean) * s + beta")),
          why="computes in float64 for precision and returns float64 where float32 is specified"),
    Wrong("fold-input-axis", "check-fold-bn", "(Cout, 1, 1, 1)",
          edits=(("w * s[:, None, None, None]", "w * s[None, :, None, None]"),),
          why="scales along the input channels"),
    Wrong("fold-input-axis-square", "check-fold-bn", "INPUT channels",
          edits=(("w * s[:, None, None, None]", "w * s[None, :w.shape[1], None, None] if w.shape[0] == w.shape[1] "
                                               "else w * s[:, None, None, None]"),),
          why="scales along the input channels (on a square conv, where it does not crash)"),
    Wrong("fold-no-sqrt", "check-fold-bn", "divides by sqrt(var + eps)",
          edits=(("s = gamma / np.sqrt(var + eps)", "s = gamma / (var + eps)"),), why="divides by the variance"),
    Wrong("fold-no-eps", "check-fold-bn", "eps is missing",
          edits=(("s = gamma / np.sqrt(var + eps)", "s = gamma / np.sqrt(var)"),), why="forgets eps"),
    Wrong("fold-no-mean", "check-fold-bn", "forgets the mean",
          edits=(("((b - mean) * s + beta)", "(b * s + beta)"),), why="forgets to subtract the mean"),
    Wrong("fold-drops-bias", "check-fold-bn", "own bias b is dropped",
          edits=((BIAS, "b = np.zeros_like(mean)"),), why="ignores the conv's own bias"),
    Wrong("fold-none-bias", "check-fold-bn", "b may be None",
          edits=((BIAS, "pass"),), why="crashes on a conv without bias"),
    # exercise 3: the fusion pass
    Wrong("relu-only-after-bn", "check-graph-pass", "bare conv -> relu is fused too",
          edits=(("            conv.fused.append(bn.name)\n        users = g.users(conv.name)\n        " + RELU_IF,
                  "            conv.fused.append(bn.name)\n            users = g.users(conv.name)\n        "
                  "else:\n            users = []\n        " + RELU_IF),),
          why="fuses a ReLU only after a folded BatchNorm and leaves a bare conv -> ReLU"),
    Wrong("relu-one-of-users", "check-graph-pass", "only user",
          edits=((RELU_IF, 'users = [u for u in users if u.op == "relu"]\n        '
                           'if users and not conv.attrs.get("relu"):'),),
          why="fuses a ReLU that is only one of the conv's users"),
    Wrong("bn-one-of-users", "check-graph-pass", "must stay",
          edits=(('if len(users) == 1 and users[0].op == "batchnorm":\n            bn = users[0]',
                  'bns = [u for u in users if u.op == "batchnorm"]\n        if bns:\n            bn = bns[0]'),),
          why="folds a BatchNorm although the conv's output also feeds another op"),
    Wrong("mutates-input", "check-graph-pass", "changed the graph it was given",
          edits=(("    g = graph.copy()\n", "    g = graph\n"),), why="rewrites the caller's graph"),
    Wrong("relu-not-applied", "check-graph-pass", "relu=false, expected true",
          edits=(('            conv.attrs["relu"] = True\n', ""),),
          why="removes the ReLU node but never tells the conv to apply it"),
    Wrong("bn-not-bypassed", "check-graph-pass", "still in the graph",
          edits=(("            g.bypass(bn.name)\n", ""),), why="folds the statistics but leaves the BatchNorm node"),
    Wrong("pass-eps-zero", "check-graph-pass", ("eps = 0", "bn.attrs['eps']"),
          edits=(('bn.attrs["eps"])))', '0.0)))'),), why="folds every BatchNorm with eps = 0"),
    Wrong("pass-eps-default", "check-graph-pass", ("eps = 1e-05", "bn.attrs['eps']"),
          edits=(('bn.attrs["eps"])))', '1e-5)))'),), why="folds every BatchNorm with PyTorch's default eps"),
    Wrong("no-relu-fusion", "check-graph-pass", "is not fused",
          edits=((RELU_IF, "if False:"),), why="only folds BatchNorm"),
    # exercise 4: the placement pass
    Wrong("all-on-device", "check-placement", "no kernel for this op at all",
          edits=((PLACE, 'node.placement = "device"'),), why="puts every node on the device"),
    Wrong("ignores-shapes", "check-placement", "does not run these shapes",
          edits=((OK, "ok = nm.OPS[node.op].device is not None"),),
          why="asks whether a device kernel exists, not whether it runs these shapes"),
    Wrong("fixed-list", "check-placement", "fixed list",
          edits=((OK, 'ok = node.op in ("conv2d", "relu", "add", "linear", "maxpool", "flatten") and '
                      'nm.OPS[node.op].on_device(node, [shapes[i] for i in node.inputs], '
                      '[dtypes[i] for i in node.inputs])'),),
          why="moves the ops of a fixed list (and forgets the average pool)"),
    Wrong("never-back-to-host", "check-placement", "where the graph had it",
          edits=((PLACE, 'node.placement = "device" if ok else node.placement'),),
          why="moves ops to the device but leaves an op the device cannot run where it was"),
    Wrong("placement-mutates", "check-placement", "changed the graph it was given",
          edits=(("    g = graph.copy()\n    shapes", "    g = graph\n    shapes"),), why="rewrites the caller's graph"),
    Wrong("placement-no-return", "check-placement", "got NoneType",
          edits=(("    return g\n", ""),), why="forgets to return the graph"),
    # exercise 5: the launch budget
    Wrong("budget-average-kernel", "check-launch-budget", "average kernel time",
          cells={"09_mod-budget": "def compute_bound_launch_us(profile):\n"
                                  "    return profile.device_compute_us / profile.launches\n"},
          why="estimates the budget as the average kernel time"),
    Wrong("budget-capped-at-20", "check-launch-budget", "above 20 us",
          edits=(("    while busy(hi) >= 0.5:\n        lo, hi = hi, 2 * hi\n", ""),),
          why="searches below the eager launch cost only"),
    Wrong("budget-coarse-search", "check-launch-budget", "1%",
          edits=(("    while hi - lo > 0.005 * lo:", "    while hi - lo > 0.08 * lo:"),),
          why="stops the bisection at 8 %, where the lab asks for 1 %"),
    Wrong("budget-returns-share", "check-launch-budget", "that is a share",
          edits=(("    return lo\n", "    return busy(lo)\n"),), why="returns the device share, not the overhead"),
    Wrong("budget-no-zero-case", "check-launch-budget", "expected 0.0",
          edits=(("    if busy(0.1) < 0.5:\n        return 0.0\n", ""),),
          why="forgets the models that no launch cost makes compute bound"),
]
