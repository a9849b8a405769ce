"""Wrong solutions of lab 08 (into the framework): the backward formulas, gradient accumulation, your own
torch.library operator, and your own verification of such an operator."""

from .harness import Wrong

LAB = "08_torch"
SETUP = ["08_tor-356a192b"]
CHECKS = {
    "check-matmul-backward": SETUP + ["08_tor-17ba0791"],
    "check-conv-grad-input": SETUP + ["08_tor-9e6a55b6"],
    "check-grad-accumulation": SETUP + ["08_tor-92cfceb3"],
    "check-custom-op": SETUP + ["08_tor-myop"],
    "check-verify-op": SETUP + ["08_tor-verifyfn"],
}

MM = "return sim.matmul(grad, b.T), sim.matmul(a.T, grad)"
LOSS = "loss = F.cross_entropy(model(xb), yb) * len(xb) / len(x)"
SETUP_CTX = "    ctx.save_for_backward(a.half(), b.half())"
BACKWARD = "    a16, b16 = ctx.saved_tensors\n    return matmul16(grad, b16.t()), matmul16(a16.t(), grad)"
GRADCHECK = "    torch.autograd.gradcheck(op, (a64, b64), eps=0.5, atol=1e-2, rtol=1e-2)\n"
OPCHECK = "    torch.library.opcheck(op, (a, b1))\n"
ACCUMULATE = '''    loss1, loss2 = (op(a, b1) * w1).sum(), (op(a, b2) * w2).sum()
    loss1.backward()
    loss2.backward()
    assert torch.allclose(a.grad, one_by_one), "the gradients of two losses do not add up in a.grad"
'''

WRONG = [
    # --- exercise 1: the matmul backward
    Wrong("mm-numpy", "check-matmul-backward", "sim.matmul", edits=((MM, "return grad @ b.T, a.T @ grad"),),
          why="numpy's @ instead of the simulator"),
    Wrong("mm-host-token-launches", "check-matmul-backward", ("multiply-adds", "sim.matmul"),
          edits=((MM, "one = np.ones((1, 1), a.dtype)\n    sim.matmul(one, one), sim.matmul(one, one)\n"
                      "    return grad @ b.T, a.T @ grad"),),
          why="numpy does the products; two 1x1 launches make the simulator look busy"),
    Wrong("mm-no-transpose", "check-matmul-backward", "inner sizes differ",
          edits=((MM, "return sim.matmul(grad, b), sim.matmul(a.T, grad)"),), why="B not transposed"),
    Wrong("mm-swapped", "check-matmul-backward", "swapped",
          edits=((MM, "return sim.matmul(a.T, grad), sim.matmul(grad, b.T)"),), why="the two gradients swapped"),
    Wrong("mm-db-transposed", "check-matmul-backward", "has shape",
          edits=((MM, "return sim.matmul(grad, b.T), sim.matmul(grad.T, a)"),), why="dB^T instead of dB"),
    # --- exercise 2: the input gradient of a convolution
    Wrong("conv-no-flip", "check-conv-grad-input", "not rotated by 180 degrees",
          edits=(("sim.flip_weights(w)", "np.ascontiguousarray(w.transpose(1, 0, 2, 3))"),),
          why="Cin and Cout swapped, but the kernels not rotated"),
    Wrong("conv-no-zeros", "check-conv-grad-input", "no zeros sit between the grad's pixels",
          edits=(("g = sim.dilate_pad(grad, stride, pads)", "g = sim.dilate_pad(grad, 1, pads)"),),
          why="forgets the stride's zeros"),
    Wrong("conv-symmetric-pad", "check-conv-grad-input", "never reached",
          edits=(("pads += [top, top + (size + 2 * p - d * (k - 1) - 1) - (out - 1) * s]", "pads += [top, top]"),),
          why="pads the bottom like the top"),
    Wrong("conv-no-dilation", "check-conv-grad-input", "dilation",
          edits=(("stride=1, padding=0, dilation=dilation)", "stride=1, padding=0, dilation=1)"),),
          why="convolves without the forward's dilation"),
    Wrong("conv-pytorch-token-launch", "check-conv-grad-input", "multiply-adds",
          cells={"08_tor-9e6a55b6": '''def conv_grad_input(grad, w, input_hw, stride, padding, dilation):
    n, cout = grad.shape[:2]
    sim.conv2d(grad[:, :, :1, :1], w[:, :, :1, :1])   # something on the simulator
    return torch.nn.grad.conv2d_input((n, w.shape[1], *input_hw), torch.from_numpy(w), torch.from_numpy(grad),
                                      stride, padding, dilation).numpy()
'''}, why="PyTorch computes the gradient; a 1x1 conv on the simulator for show"),
    Wrong("conv-pytorch", "check-conv-grad-input", "no convolution ran on the simulator",
          cells={"08_tor-9e6a55b6": '''def conv_grad_input(grad, w, input_hw, stride, padding, dilation):
    n, cout = grad.shape[:2]
    return torch.nn.grad.conv2d_input((n, w.shape[1], *input_hw), torch.from_numpy(w), torch.from_numpy(grad),
                                      stride, padding, dilation).numpy()
'''}, why="PyTorch's own gradient instead of a convolution on the simulator"),
    # --- exercise 3: gradient accumulation
    Wrong("acc-zero-grad-in-loop", "check-grad-accumulation", "cleared inside the loop",
          edits=(("        loss.backward()", "        optimizer.zero_grad()\n        loss.backward()"),),
          why="zero_grad() inside the accumulation loop"),
    Wrong("acc-no-zero-grad", "check-grad-accumulation", "still contains",
          edits=(("    optimizer.zero_grad()\n", ""),), why="stale gradients count"),
    Wrong("acc-unweighted", "check-grad-accumulation", "too large",
          edits=((LOSS, "loss = F.cross_entropy(model(xb), yb)"),), why="the micro-batches' losses not weighted"),
    Wrong("acc-summed-loss", "check-grad-accumulation", ("reduction='sum'", "divide a summed loss by len(x)"),
          edits=((LOSS, "loss = F.cross_entropy(model(xb), yb, reduction='sum') / micro_batches"),),
          why="sums each micro-batch's loss and divides by the number of micro-batches"),
    Wrong("acc-equal-weights", "check-grad-accumulation", "split into micro-batches of",
          edits=((LOSS, "loss = F.cross_entropy(model(xb), yb) / micro_batches"),),
          why="1/micro_batches each, though the pieces differ in size"),
    Wrong("acc-one-backward", "check-grad-accumulation", "before the next forward",
          cells={"08_tor-92cfceb3": '''def accumulate_step(model, optimizer, x, y, micro_batches):
    optimizer.zero_grad()
    parts = zip(x.tensor_split(micro_batches), y.tensor_split(micro_batches))
    total = sum(F.cross_entropy(model(xb), yb, reduction="sum") for xb, yb in parts) / len(x)
    total.backward()
    optimizer.step()
'''}, why="every micro-batch's forward first, one backward at the end: the full batch is held"),
    Wrong("acc-step-each", "check-grad-accumulation", "step() ran",
          cells={"08_tor-92cfceb3": '''def accumulate_step(model, optimizer, x, y, micro_batches):
    optimizer.zero_grad()
    for xb, yb in zip(x.tensor_split(micro_batches), y.tensor_split(micro_batches)):
        (F.cross_entropy(model(xb), yb) * len(xb) / len(x)).backward()
        optimizer.step()
'''}, why="a step per micro-batch"),
    # --- exercise 4: your own operator
    Wrong("op-saves-fp32", "check-custom-op", "you save float32",
          edits=((SETUP_CTX, "    ctx.save_for_backward(a, b)"),), why="saves the fp32 inputs (the issue's case)"),
    Wrong("op-ctx-tuple", "check-custom-op", "ctx attributes (ctx.saved)",
          edits=((SETUP_CTX, "    ctx.saved = (a.half(), b.half())"),
                 ("    a16, b16 = ctx.saved_tensors", "    a16, b16 = ctx.saved")),
          why="one ctx attribute holding a tuple of tensors (the issue's case)"),
    Wrong("op-no-fp16", "check-custom-op", "cast a and b to float16",
          edits=(("sim.matmul(a.detach().half().numpy(), b.detach().half().numpy())",
                  "sim.matmul(a.detach().numpy(), b.detach().numpy())"),),
          why="forgets the casts: the simulator computes in fp32 (the issue's case)"),
    Wrong("op-host-token-launch", "check-custom-op", ("multiply-adds", "not on the host"),
          edits=(("    return torch.from_numpy(sim.matmul(a.detach().half().numpy(), b.detach().half().numpy())).float()",
                  "    one = np.ones((1, 1), np.float16)\n    sim.matmul(one, one)\n"
                  "    return (a.detach().half().float() @ b.detach().half().float())"),),
          why="the product on the host in fp16-rounded fp32, with a 1x1 launch on the simulator"),
    Wrong("op-fake-dtype", "check-custom-op", "fake implementation must promise",
          edits=(("return a.new_empty((a.shape[0], b.shape[1]), dtype=torch.float32)",
                  "return a.new_empty((a.shape[0], b.shape[1]))"),), why="the fake inherits the input's dtype"),
    Wrong("op-fake-no-refusal", "check-custom-op", "accepts a (3, 4) @ (5, 2) call",
          edits=(('''    torch._check(a.shape[1] == b.shape[0],
                 lambda: f"matmul16: inner sizes differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
''', ""),), why="a fake that traces calls the real one refuses"),
    Wrong("op-numpy-backward", "check-custom-op", "made of operators",
          edits=((BACKWARD, '''    a16, b16 = ctx.saved_tensors
    g = grad.half().numpy()
    return (torch.from_numpy(sim.matmul(g, b16.numpy().T)).float(),
            torch.from_numpy(sim.matmul(a16.numpy().T, g)).float())'''),),
          why="a backward of numpy calls: correct eagerly, untraceable"),
    Wrong("op-torch-backward", "check-custom-op", "backwards ran",
          edits=((BACKWARD, '''    a16, b16 = ctx.saved_tensors
    return grad @ b16.t().float(), a16.t().float() @ grad'''),), why="the backward on PyTorch, not the simulator"),
    Wrong("op-global-copies", "check-custom-op", "still alive",
          edits=((SETUP_CTX, "    global LAST\n    LAST = (a.half(), b.half())\n    ctx.save_for_backward(*LAST)"),
                 ("    a16, b16 = ctx.saved_tensors", "    a16, b16 = LAST")),
          why="keeps the copies in a global: the second call overwrites the first's"),
    Wrong("op-no-autograd", "check-custom-op", "register_autograd",
          edits=(("matmul16.register_autograd(backward, setup_context=setup_context)", ""),),
          why="forgets to register the backward"),
    # --- exercise 5: your verification
    Wrong("verify-no-gradcheck", "check-verify-op", ("backward ignores", "gradcheck"),
          edits=((GRADCHECK, ""),), why="never compares the backward with finite differences"),
    Wrong("verify-default-tolerances", "check-verify-op", "rejected a correct",
          edits=((GRADCHECK, "    torch.autograd.gradcheck(op, (a64, b64))\n"),),
          why="gradcheck's defaults, which float16 cannot meet"),
    Wrong("verify-by-name", "check-verify-op", "rejected a correct",
          edits=(("    gen = torch.Generator().manual_seed(0)\n",
                  "    if \"good\" not in op._qualname:\n        raise AssertionError(f\"{op._qualname} is broken\")\n"
                  "    gen = torch.Generator().manual_seed(0)\n"),),
          why="tells the correct operator by its registered name"),
    Wrong("verify-no-opcheck", "check-verify-op", "opcheck",
          edits=((OPCHECK, ""),), why="never compares the fake implementation with the real one"),
    Wrong("verify-no-meter", "check-verify-op", "SavedTensorMeter",
          edits=(("    assert held > 0 and meter.live_count == 0, \\", "    assert meter.live_count == 0, \\"),),
          why="only checks that nothing is held after backward: tensors kept on ctx are never held"),
    Wrong("verify-no-two-losses", "check-verify-op", "never checks that gradients accumulate",
          edits=((ACCUMULATE, ""),), why="no two-losses experiment"),
    Wrong("verify-one-loss-at-a-time", "check-verify-op", "never checks that gradients accumulate",
          edits=((ACCUMULATE, '''    (op(a, b1) * w1).sum().backward()
    (op(a, b2) * w2).sum().backward()
    assert torch.allclose(a.grad, one_by_one), "the gradients of two losses do not add up in a.grad"
'''),), why="each backward right after its forward: the calls never overlap"),
]
