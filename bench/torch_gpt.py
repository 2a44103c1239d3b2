"""The GPT training step of bench_gpt in PyTorch: the same model (pre-norm,
learned positions, causal multi-head attention with one in-projection,
tanh GELU MLP, a head without bias, cross entropy), batch, AdamW, f32, one
thread. Prints ms per step and tokens per second, medians of reps of
steps.

    python3 bench/torch_gpt.py [layers width heads context batch steps reps]
"""
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)
L, E, H, T, N, K, R = (int(a) for a in (sys.argv[1:8] if len(sys.argv) >= 8
                                        else (4, 128, 4, 128, 16, 3, 5)))
V = 114


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(E)
        self.qkv = nn.Linear(E, 3 * E)
        self.out = nn.Linear(E, E)
        self.ln2 = nn.LayerNorm(E)
        self.fc = nn.Linear(E, 4 * E)
        self.proj = nn.Linear(4 * E, E)

    def forward(self, x):
        n, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(E, dim=2)
        q, k, v = (z.view(n, t, H, E // H).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True) \
            if hasattr(F, "scaled_dot_product_attention") else None
        if a is None:  # torch before 2.0: the same math by hand
            s = q @ k.transpose(-1, -2) / (E // H) ** 0.5
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)
            a = s.masked_fill(mask, float("-inf")).softmax(-1) @ v
        x = x + self.out(a.transpose(1, 2).reshape(n, t, E))
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, E)
        self.wpe = nn.Parameter(torch.randn(T, E))
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(E)
        self.head = nn.Linear(E, V, bias=False)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


torch.manual_seed(1)
model = GPT()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids = torch.randint(0, V, (N, T))
tgt = torch.randint(0, V, (N * T,))


def step():
    opt.zero_grad()
    loss = F.cross_entropy(model(ids).view(N * T, V), tgt)
    loss.backward()
    opt.step()


step()
times = []
for _ in range(R):
    t0 = time.perf_counter()
    for _ in range(K):
        step()
    times.append((time.perf_counter() - t0) / K)
times.sort()
med = times[len(times) // 2] if R % 2 else 0.5 * (times[R // 2 - 1] + times[R // 2])
print("torch %s: %.2f ms/step, %.0f tokens/s" % (torch.__version__, 1e3 * med, N * T / med))
