"""PyTorch models the importer tests and benchmarks/frontends.py share: torchvision (loadable
on a CPU-only torch) and a small GPT (token + position embeddings, causal self-attention both
as a tril mask and as ``scaled_dot_product_attention(is_causal=True)``, GELU MLP, residuals)."""

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
