"""The larger models offline capture must take as one graph each:
torchvision's resnet18 and mobilenet_v2 (eval) and a transformer block."""
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

# (target, specs, make_inputs)
MODELS = [
    ("resnet18.forward", ["f32[2,3,64,64]"], lambda: (torch.randn(2, 3, 64, 64),)),
    ("mobilenet_v2.forward", ["f32[2,3,64,64]"], lambda: (torch.randn(2, 3, 64, 64),)),
    # PENDING: transformer.forward joins once the op registry has torch.baddbmm
    # (nn.MultiheadAttention's path in torch 1.13); until then it is a located
    # UNKNOWN_OP break, never a guessed graph.
]
