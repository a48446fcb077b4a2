"""The larger models offline capture must take as one graph each:
torchvision's resnet18 and mobilenet_v2 (eval), a transformer block and
nn.TransformerEncoderLayer."""
import torch
import torch.nn as nn
import torchvision

torch.manual_seed(0)
resnet18 = torchvision.models.resnet18().eval()
mobilenet_v2 = torchvision.models.mobilenet_v2().eval()


class TransformerBlock(nn.Module):
    """Embedding, pre-norm causal multi-head attention, GELU MLP."""

    def __init__(self, vocab=100, d=32, heads=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, ids):
        x = self.embed(ids)
        t = x.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=causal, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln2(x))


transformer = TransformerBlock().eval()
# torch 2's encoder layer: its forward asks any(... for m in self.modules())
# and all(... for x in tensor_args) before attention by
# F.scaled_dot_product_attention.
encoder_layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True,
                                           norm_first=True, activation="gelu").eval()

# (target, specs, make_inputs)
MODELS = [
    ("resnet18.forward", ["f32[2,3,64,64]"], lambda: (torch.randn(2, 3, 64, 64),)),
    ("mobilenet_v2.forward", ["f32[2,3,64,64]"], lambda: (torch.randn(2, 3, 64, 64),)),
    ("transformer.forward", ["i64[2,16]"], lambda: (torch.randint(0, 100, (2, 16)),)),
    ("encoder_layer.forward", ["f32[2,10,32]"], lambda: (torch.randn(2, 10, 32),)),
]


# Every torchvision classifier: offline capture must give one graph equal to
# eager, or a located graph break; a wrong graph fails the test.
SWEEP = ["alexnet", "vgg11", "squeezenet1_0", "densenet121", "shufflenet_v2_x0_5", "mnasnet0_5",
         "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf", "resnext50_32x4d",
         "googlenet", "convnext_tiny", "vit_b_16", "swin_t"]
_BIG_INPUT = {"alexnet", "vit_b_16", "swin_t"}  # need 224x224


def _sweep_model(name):
    kwargs = {"aux_logits": False, "init_weights": False} if name == "googlenet" else {}
    return getattr(torchvision.models, name)(**kwargs).eval()


def sweep_entries():
    """(target, spec, make_inputs) for each sweep model; builds the models
    (on first use: they take seconds) as globals the targets name."""
    out = []
    for name in SWEEP:
        if name not in globals():
            globals()[name] = _sweep_model(name)
        size = 224 if name in _BIG_INPUT else 64
        out.append((f"{name}.forward", f"f32[1,3,{size},{size}]",
                    lambda size=size: (torch.randn(1, 3, size, size),)))
    return out
