"""PyTorch models the importer tests and benchmarks/frontends.py share: torchvision (loadable
on a CPU-only torch), a small GPT (token + position embeddings, causal self-attention both
as a tril mask and as ``scaled_dot_product_attention(is_causal=True)``, GELU MLP, residuals),
and the importer tests' small models of converters the big ones do not reach (`MaskedAttention`,
`ConvZoo`, `ShapeZoo`), which the CUDA tests also run on the GPU."""

from __future__ import annotations

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


def import_torchvision():
    """torchvision, or ImportError saying why not. PyPI's torchvision wheel is a CUDA build; on
    a CPU-only torch its C++ ops library cannot load, and torchvision 0.28 then fails at import
    registering fake kernels for two of those ops. The models used here need none of them, so
    the two op schemas are declared (never run) and the import retried."""
    try:
        import torchvision
        return torchvision
    except RuntimeError as err:
        if "torchvision::" not in str(err):
            raise ImportError(f"torchvision cannot be imported: {err}") from None
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    lib = torch.library.Library("torchvision", "FRAGMENT")
    for op in ("nms", "qnms"):
        lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    import_torchvision.library = lib  # keep the definitions alive
    import torchvision
    return torchvision


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads, max_len, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len)).view(1, 1, max_len, max_len))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class GPTBlock(nn.Module):
    def __init__(self, dim, heads, max_len, sdpa):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, max_len, sdpa)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token and position embeddings, a block with a tril-masked attention and one with
    ``scaled_dot_product_attention(is_causal=True)``, a final norm and the vocabulary head."""

    def __init__(self, vocab=50, dim=32, heads=4, max_len=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList([GPTBlock(dim, heads, max_len, sdpa=False),
                                     GPTBlock(dim, heads, max_len, sdpa=True)])
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(0, idx.shape[1], dtype=torch.long, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class MaskedAttention(nn.Module):
    def forward(self, q, k, v, mask):
        return (F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                F.scaled_dot_product_attention(q, k, v, attn_mask=mask > 0, scale=0.3))


class ConvZoo(nn.Module):
    """Convolutions, norms, pads and activations the big models do not use."""

    def __init__(self):
        super().__init__()
        self.conv1d = nn.Conv1d(4, 6, 3, padding=1)
        self.gn = nn.GroupNorm(3, 6)
        self.conv2d = nn.Conv2d(6, 8, 3, stride=2, padding="valid", groups=2)
        self.bn = nn.BatchNorm2d(8)
        self.rms = nn.RMSNorm(8, eps=1e-6)

    def forward(self, x):
        y = self.gn(self.conv1d(x))                        # (2, 6, 16)
        y = F.pad(y, (1, 2)).unsqueeze(-1).expand(-1, -1, -1, 5)
        y = self.bn(self.conv2d(y))                        # (2, 8, 8, 2)
        y = F.hardswish(y) + F.hardsigmoid(y) - F.relu6(y) * torch.clamp(y, -0.5, 0.5)
        y = F.avg_pool2d(F.max_pool2d(y, 2, 1), (2, 1), 1, ceil_mode=True)
        z = self.rms(y.permute(0, 2, 3, 1))                # normalize over channels
        return F.gelu(z), F.silu(y).flatten(1).log_softmax(-1)


class ShapeZoo(nn.Module):
    """Reshapes, indexing, reductions and element-wise ops."""

    def forward(self, x, y):
        a = torch.cat([x, y], dim=1).reshape(2, -1, 4)     # (2, 6, 4)
        b = torch.stack([a[:, 0], a[:, -1]], dim=1)        # (2, 2, 4)
        c, d = torch.chunk(a, 2, dim=1)
        e = torch.where(c > 0, c, d * 0.5).sum(dim=-1, keepdim=True)
        f = a.max(dim=1).values - a.min(dim=1)[0] + a.amax(dim=(0, 1))
        g = torch.tril(a[0]) + torch.triu(a[1], diagonal=1)
        h = a.var(dim=-1) + a.std(dim=-1, unbiased=False) + a.mean(-1) + a.prod(-1)
        i = (x.exp() / (1 + x.abs())).sqrt().rsqrt().tanh().sigmoid()
        j = x[:, 1:].transpose(0, 1).contiguous().view(-1) ** 2
        k = torch.masked_fill(a, a < 0, -1.0).permute(2, 0, 1).to(torch.float64).float()
        m = (x.argmax(dim=1) + x.argmin(dim=1)).float() + torch.ones_like(x[:, 0]) * x.sum(1)
        return b, e, f, g, h, i, j, k, m, torch.floor_divide(x, 0.3) + torch.erf(x).neg()
