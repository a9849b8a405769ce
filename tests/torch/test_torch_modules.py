"""NPUConv2d / NPULinear as drop-ins, and swap_modules on a small CNN."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

import npusim.torch as nt  # noqa: E402
from torch_helpers import assert_close  # noqa: E402

pytestmark = pytest.mark.lab08


def test_same_constructor_parameters_and_state_dict_as_torch():
    torch_params = list(inspect.signature(nn.Conv2d.__init__).parameters)
    ours = list(inspect.signature(nt.NPUConv2d.__init__).parameters)
    assert ours[:len(torch_params)] == torch_params
    assert list(inspect.signature(nt.NPULinear.__init__).parameters)[:6] == \
        list(inspect.signature(nn.Linear.__init__).parameters)
    torch.manual_seed(0)
    ref = nn.Conv2d(3, 5, (3, 2), stride=(2, 1), padding=1, dilation=1)
    torch.manual_seed(0)
    npu = nt.NPUConv2d(3, 5, (3, 2), stride=(2, 1), padding=1, dilation=1)
    assert isinstance(npu.weight, nn.Parameter) and isinstance(npu.bias, nn.Parameter)
    assert npu.state_dict().keys() == ref.state_dict().keys()
    assert torch.equal(npu.weight, ref.weight) and torch.equal(npu.bias, ref.bias)    # same initialisation
    x = torch.randn(2, 3, 7, 6)
    assert_close("output", npu(x), ref(x), torch.float32)
    with pytest.raises(NotImplementedError, match="groups=1"):
        nt.NPUConv2d(4, 4, 3, groups=2)


def test_from_torch_copies_the_weights():
    conv = nn.Conv2d(2, 3, 3, bias=False)
    npu = nt.NPUConv2d.from_torch(conv, relu=True)
    assert npu.bias is None and npu.relu and torch.equal(npu.weight, conv.weight)
    assert npu.weight.data_ptr() != conv.weight.data_ptr()
    x = torch.randn(1, 2, 5, 5)
    assert_close("fused relu", npu(x), torch.relu(conv(x)), torch.float32)


def test_padding_same_and_valid():
    for pad in ("same", "valid"):
        conv = nn.Conv2d(2, 2, 3, padding=pad)
        x = torch.randn(1, 2, 5, 5)
        assert_close(pad, nt.NPUConv2d.from_torch(conv)(x), conv(x), torch.float32)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(8, 8, 3, padding=1, groups=2))     # grouped: stays torch
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def test_swap_modules_small_cnn_same_outputs_and_gradients():
    torch.manual_seed(1)
    model = SmallCNN()
    x = torch.randn(2, 1, 8, 8)
    swapped = nt.swap_modules(model)
    f = swapped.features
    assert isinstance(f[0], nt.NPUConv2d) and f[0].relu and isinstance(f[1], nn.Identity)
    assert isinstance(f[3], nt.NPUConv2d) and f[3].relu and isinstance(f[4], nn.Identity)
    assert type(f[5]) is nn.Conv2d and isinstance(swapped.head, nt.NPULinear)
    assert type(model.features[0]) is nn.Conv2d                                     # the original is untouched
    assert swapped.state_dict().keys() == model.state_dict().keys()
    assert len(swapped.npusim_swaps) == 3
    y_ref, y = model(x), swapped(x)
    assert_close("output", y, y_ref, torch.float32)
    y_ref.square().sum().backward()
    y.square().sum().backward()
    for (name, p_ref), p in zip(model.named_parameters(), swapped.parameters()):
        assert_close(f"grad of {name}", p.grad, p_ref.grad, torch.float32)


def test_swap_modules_fp16_compute_keeps_fp32_master_weights():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 4 * 4, 2))
    swapped = nt.swap_modules(model, compute_dtype=torch.float16)
    x = torch.randn(2, 1, 6, 6)
    y = swapped(x)
    assert y.dtype == torch.float32 and all(p.dtype == torch.float32 for p in swapped.parameters())
    assert_close("fp16 compute", y, model(x), torch.float16)
    y.sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in swapped.parameters())
