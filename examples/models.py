"""Small models a user would test: the self-attention block from the seeds, an MLP, conv + BatchNorm."""

from __future__ import annotations

import torch
from torch import nn


class Attention(nn.Module):
    """Self-attention without masking or scaling, softmax written out by hand."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__()
        self.W_q = nn.Linear(dim, dim, bias=False)
        self.W_k = nn.Linear(dim, dim, bias=False)
        self.W_v = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.W_q(x)
        k = self.W_k(x)
        v = self.W_v(x)
        out = q @ k.transpose(-2, -1)
        out = torch.exp(out) / torch.sum(torch.exp(out), dim=-1, keepdim=True)
        return out @ v


class MLP(nn.Module):
    def __init__(self, dim: int = 32, hidden: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(0.1), nn.Linear(hidden, classes)
        )

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        return {"logits": logits, "probs": logits.softmax(-1)}


class ConvBN(nn.Module):
    """Conv + BatchNorm + ReLU; in train mode the running statistics change on every call."""

    def __init__(self, channels: int = 3, features: int = 8) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, features, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def ema_update(average: torch.Tensor, value: torch.Tensor, decay: float = 0.9) -> torch.Tensor:
    """An in-place exponential moving average: the caller's tensor is the result."""
    average.mul_(decay).add_(value, alpha=1 - decay)
    return average.sum()


def train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """One optimisation step: forward, loss, backward and the optimizer update."""
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()
