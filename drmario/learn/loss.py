"""The design's loss (design note 000): one term per output, each a batch mean, plus the
regulariser; every term is logged on its own by the trainer."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from drmario.learn.net import NetConfig, NetOutput

if TYPE_CHECKING:
    from drmario.learn.dataset import Batch

COUNT_SCALE = 100.0  # the scale of cleared and duration errors with count_error = "scaled"


def weight_norm2(net: nn.Module) -> torch.Tensor:
    """||parameters||^2 over every parameter (the design's regulariser names no exceptions)."""
    return torch.stack([p.float().square().sum() for p in net.parameters()]).sum()


def total_loss(
    won: torch.Tensor,
    cleared: torch.Tensor,
    duration: torch.Tensor,
    moves: torch.Tensor,
    reg: torch.Tensor,
    cfg: NetConfig,
    future: torch.Tensor | float = 0.0,
    next_move: torch.Tensor | float = 0.0,
    outcome: torch.Tensor | float = 0.0,
) -> torch.Tensor:
    """The loss the optimiser sees, from its terms (scalar tensors): value_weight x (won + cleared +
    duration + outcome) + moves + reg + future_weight x future + next_move_weight x next_move."""
    aux = cfg.future_weight * future + cfg.next_move_weight * next_move
    return cfg.value_weight * (won + cleared + duration + outcome) + moves + reg + aux


def loss_terms(out: NetOutput, batch: Batch, cfg: NetConfig, net: nn.Module | None = None) -> dict[str, torch.Tensor]:
    """The design's loss, each term a batch mean (a scalar tensor), plus "reg" and "total".

    batch: a `dataset.Batch` (won, cleared, duration float[B], moves float[B, 4, 8, 16]).
    won: (w - ŵ)^2, or its log loss (cfg.won_loss); cleared: ((c - ĉ) / max(c, 1))^2; duration:
    likewise (or both over COUNT_SCALE with cfg.count_error = "scaled"); moves: -Σ m·log m̂;
    reg: c ||θ||^2 of net (0 without net); future: with a future head and a batch that carries its
    target, the binary cross-entropy of each cell's occupancy future_pills later, the mean over the
    cells of the examples whose game lasts that long (0 otherwise); next: with a next-move head and
    its target, the cross-entropy of the next decision's move, the mean over the examples that have
    one (0 otherwise); outcome: with outcome_values, the count errors of the outputs of the example's
    own outcome (a won game's pills; a lost game's cleared and pills), the mean over all examples (0
    otherwise); total: `total_loss` (the other terms are reported unweighted). With batch.value_mask,
    won, cleared, duration and outcome are means over the examples it keeps (0 where it keeps none).
    """
    value_mean = _masked_mean(batch.value_mask)
    won = won_error(out, batch, cfg)
    cleared = count_error(out.cleared, batch.cleared, cfg)
    duration = count_error(out.duration, batch.duration, cfg)
    moves = cross_entropy(batch.moves, out.log_moves)
    terms = {"won": value_mean(won), "cleared": value_mean(cleared), "duration": value_mean(duration)}
    terms["moves"] = moves.mean()
    reg = torch.zeros((), device=out.won.device) if net is None else cfg.reg * weight_norm2(net)
    terms["reg"] = reg
    terms["future"] = future_term(out, batch)
    terms["next"] = next_move_term(out, batch)
    terms["outcome"] = outcome_term(out, batch, cfg, value_mean)
    terms["total"] = total_loss(
        terms["won"],
        terms["cleared"],
        terms["duration"],
        terms["moves"],
        reg,
        cfg,
        terms["future"],
        terms["next"],
        terms["outcome"],
    )
    return terms


def won_error(out: NetOutput, batch: Batch, cfg: NetConfig) -> torch.Tensor:
    """The won term per example (float[B]), as cfg.won_loss says: (w - won)^2, or the log loss of
    P(win) = (1 + won) / 2 = sigmoid(2z) with z the pre-activation (won = tanh z)."""
    if cfg.won_loss == "squared":
        return (out.won - batch.won).square()
    if out.won_logit is None:
        raise ValueError("won_loss = 'log' needs the won output's pre-activation (NetOutput.won_logit)")
    return F.binary_cross_entropy_with_logits(2 * out.won_logit, (batch.won + 1) / 2, reduction="none")


def count_error(predicted: torch.Tensor, target: torch.Tensor, cfg: NetConfig) -> torch.Tensor:
    """The squared error of a count per example (float[B]), as cfg.count_error says."""
    scale = target.clamp(min=1) if cfg.count_error == "relative" else COUNT_SCALE
    return ((predicted - target) / scale).square()


def outcome_term(
    out: NetOutput, batch: Batch, cfg: NetConfig, mean: Callable[[torch.Tensor], torch.Tensor] = torch.mean
) -> torch.Tensor:
    """The outcome_values loss of `loss_terms` (a scalar tensor; 0 without the outputs): each
    example's error on its own outcome's outputs, won games by their pills, lost ones by their
    viruses cleared and pills; mean: of the errors float[B] to the term."""
    if out.win_pills is None or out.loss_cleared is None or out.loss_pills is None:
        return torch.zeros((), device=out.won.device)
    won = batch.won > 0
    win = count_error(out.win_pills, batch.duration, cfg)
    loss = count_error(out.loss_cleared, batch.cleared, cfg) + count_error(out.loss_pills, batch.duration, cfg)
    return mean(torch.where(won, win, loss))


def _masked_mean(mask: torch.Tensor | None) -> Callable[[torch.Tensor], torch.Tensor]:
    """The mean of float[B] over the examples mask bool[B] keeps (the plain mean without a mask)."""
    if mask is None:
        return torch.mean
    kept = mask.sum().clamp(min=1)
    return lambda x: torch.where(mask, x, 0.0).sum() / kept


def future_term(out: NetOutput, batch: Batch) -> torch.Tensor:
    """The future-board loss of `loss_terms` (a scalar tensor; 0 without the head or the target)."""
    if out.future is None or batch.future is None or batch.future_known is None:
        return torch.zeros((), device=out.won.device)
    per_cell = F.binary_cross_entropy_with_logits(out.future, batch.future, reduction="none")
    known = batch.future_known.float()
    return (per_cell.mean(dim=(1, 2)) * known).sum() / known.sum().clamp(min=1)


def next_move_term(out: NetOutput, batch: Batch) -> torch.Tensor:
    """The next-move loss of `loss_terms` (a scalar tensor; 0 without the head or the target)."""
    if out.next_log_moves is None or batch.next_moves is None or batch.next_known is None:
        return torch.zeros((), device=out.won.device)
    known = batch.next_known.float()
    return (cross_entropy(batch.next_moves, out.next_log_moves) * known).sum() / known.sum().clamp(min=1)


def cross_entropy(target: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
    """-sum target * log_p per example (float[B] from float[B, 4, 8, 16] each)."""
    # where(): a zero target times a -inf log (masked slot) is 0, not NaN (a NaN target stays NaN)
    return -torch.where(target != 0, target * log_p, 0.0).sum(dim=(1, 2, 3))
