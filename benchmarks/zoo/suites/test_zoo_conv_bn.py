"""Conv + BatchNorm in train mode: outputs, gradients and running statistics after each call."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from zoo.models import ConvBN

from pytest_torchcompile import strategies as tcst


@pytest.mark.compile_parity
def test_conv_bn_train(compile_parity, device):
    torch.manual_seed(0)
    model = ConvBN().to(device).train()
    for _ in range(2):  # the second call starts from the running stats the first one left
        compile_parity(model, torch.randn(4, 3, 8, 8, device=device))


@pytest.mark.compile_parity
def test_conv_bn_channels_last(compile_parity, device):
    torch.manual_seed(0)
    model = ConvBN().to(device).train()
    x = torch.randn(4, 3, 8, 8, device=device).to(memory_format=torch.channels_last)
    compile_parity(model, x)


torch.manual_seed(0)
MODELS = {dtype: ConvBN().to(dtype).train() for dtype in tcst.FLOAT_DTYPES}

# The channel count is fixed by the model; batch and spatial sizes are drawn (at least 1: a
# convolution needs a position to slide over).
IMAGES = tcst.shapes(min_dims=4, max_dims=4, min_side=1).map(lambda s: (s[0], 3, *s[2:]))


# A batch of one 1x1 image leaves BatchNorm one value per channel, which eager rejects in training.
@pytest.mark.compile_parity(reject_eager_errors=True)
@given(x=tcst.tensors(dtypes=tcst.float_dtypes(), shapes=IMAGES))
def test_conv_bn_any_image(compile_parity, x):
    compile_parity(MODELS[x.dtype], x)
