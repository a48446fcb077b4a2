"""A small model for trying the tools:

    dynamo-export examples/mlp.py --fn model.forward --input x=f32[4,16] -o mlp.pb --weights embed
    dynamo-inspect examples/mlp.py --fn model.forward
"""
import torch
from torch import nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, width: int = 16, depth: int = 3):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.scale = 0.5

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.gelu(x) * self.scale
        try:
            norm = x.abs().sum(dim=-1, keepdim=True)
        except RuntimeError:
            norm = torch.ones(1)
        return x / (norm + 1e-6)


def forward(x, y):
    a = torch.sin(x)
    b = torch.cos(y)
    return a + b


torch.manual_seed(0)  # the same weights in every process that imports this file
model = MLP().eval()
