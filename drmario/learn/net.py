"""The residual network of design note 000 with three heads. The loss is `loss`, the checkpoint
format `checkpoint`, and `player.Player` the batched inference wrapper the search calls.

Heads (`NetConfig.head`):

- ``conv`` (the default, measured to generalise: bench/imitation.py): the move logits are a
  convolution of the trunk to 4 planes, one per rotation, so slot r * 128 + x * 16 + y is plane r
  at cell (x, y); the three value outputs come from a 1x1-conv projection pooled over the board
  (mean and max, as KataGo pools) and a small MLP. Nothing flattens the 4,096 trunk features.
- ``design``: the design note's single linear layer from the flattened trunk to 3 + 512 outputs.
- ``alphago``: note 001's 1x1-conv policy and value trunks, each with a linear layer.

With ``future_pills`` > 0 a fourth, auxiliary head (any of the three) reads the trunk: a 1x1
convolution to one plane, the logits of each cell being occupied that many pills later in the game.
Only the loss reads it, as KataGo's ownership head teaches its trunk where the game is going.
With ``next_move_weight`` > 0 another one, a 1x1 convolution to 4 planes (as the conv head's moves),
predicts the move target of the game's next decision (where the preview pill is to go: the expert's
move or the search's visits there), KataGo's opponent-move target in a one-player game.
With ``outcome_values`` (conv and alphago heads) one more linear layer reads the value MLP's hidden
units: the pills to the end of a won game, and the viruses cleared and pills to the end of a lost one.
The cleared and duration outputs are means over won and lost futures alike; the search values a win
by the pills a win takes and a loss by what a loss clears, so it reads these where the network has
them (`search.utility.expected_utility`).

Shapes: B = batch size. Input float[B, P, 8, 16] planes (`encode`: P = 24 with the preview, the
design's 18, or 28 with the expert's one-ply preference; `NetConfig.planes`); outputs `NetOutput`:
won float[B] in [-1, 1], cleared and duration float[B] >= 0, moves float[B, 4, 8, 16] summing to 1
over the 512 slots (flat slot r * 128 + x * 16 + y, as `rules.move_index`).

Moves are normalised in log space: log m = s - logsumexp(s), with s = log-sigmoid(z) for the design
head (sigmoid then divided by the sum, exactly, without forming tiny products) and s = z for the
conv and alphago heads (a softmax over logits). The loss uses `NetOutput.log_moves` so the
cross-entropy stays finite whatever the logits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple, get_args

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from drmario.engine import kernels as K
from drmario.engine.rules import MOVES_SHAPE, N_MOVES
from drmario.learn.encode import N_PLANES
from drmario.settings import Settings, setting

CELLS = K.WIDTH * K.HEIGHT  # 128 board cells
Head = Literal["conv", "design", "alphago"]  # each with its branch in DrMarioNet and flops_per_position
HEADS: tuple[str, ...] = get_args(Head)


@dataclass(frozen=True)
class NetConfig(Settings):
    """Every number of the network and its loss (defaults: design note 000, with the preview planes)."""

    planes: Literal[18, 24, 28] = setting(
        N_PLANES,
        "input planes: 24 with the NES preview pill, the design's 18, or 28: 24 and the expert's one-ply preference "
        "among the pill's moves (encode.one_ply_planes)",
    )
    kernel: int = setting(3, "k: convolution kernel size (odd: zero padding keeps the 8x16 board)", ge=1, le=15)
    filters: int = setting(256, "f: convolution filters", ge=1, le=4096)
    blocks: int = setting(19, "r: residual blocks", ge=0, le=200)
    leak: float = setting(0.1, "l: LeakyReLU negative slope", ge=0, lt=1)
    reg: float = setting(1e-4, "c: weight of c * ||parameters||^2 in the loss", ge=0)
    count_error: Literal["relative", "scaled"] = setting(
        "scaled",
        "cleared and duration errors: scaled, (x - x^)/100, whose minimiser is the mean (measured better: the "
        "search needs expectations); or relative, the design's (x - x^)/max(x, 1), which predicts about a third "
        "of long futures",
    )
    value_weight: float = setting(
        1.0,
        "weight of the won, cleared and duration terms in the loss (the design's 1; AlphaGo Zero's network "
        "learning from experts' games used 0.01 so as not to learn each game's outcome by heart). 64x6 on 8,000 "
        "expert games: 0.1 and 16,000 steps against 1 and 8,000, held-out won error 0.074 against 0.142, agreement "
        "68.1% against 65.1%; play level on 32 tuning games (capacity-held-out-vw, alone-f64b6-vw01-16k-tuning)",
        ge=0,
    )
    won_loss: Literal["squared", "log"] = setting(
        "squared",
        "the won term: squared, the design's (w - won)^2; log, the log loss of P(win) = (1 + won) / 2 = sigmoid(2z) "
        "from the pre-activation z, whose gradient does not vanish where tanh saturates (the cpu profile's round-0 "
        "training with squared: won = +1 on every position from step 100 on, a dead output; bench/README.md, "
        '"The cpu profile\'s round-0 won output is dead"; a whole cpu loop with log learned no better: "A whole cpu '
        'loop with the log loss")',
    )
    head: Head = setting(
        "conv", "conv: convolutional moves, pooled values; design: one linear layer to 3 + 512; alphago: note 001"
    )
    policy_kernel: int = setting(1, "conv head: kernel size of the moves convolution (1 or 3)", ge=1, le=7)
    pooled_planes: int = setting(32, "conv head: 1x1-conv planes pooled (mean, max) for the values", ge=1, le=1024)
    value_hidden: int = setting(256, "conv and alphago heads: hidden units of the value MLP", ge=1, le=65536)
    policy_planes: int = setting(2, "alphago head: 1x1-conv planes before the policy layer", ge=1, le=512)
    value_planes: int = setting(1, "alphago head: 1x1-conv planes before the value trunk", ge=1, le=512)
    future_pills: int = setting(
        0,
        "auxiliary target (KataGo's ownership, in Dr. Mario's terms): a 1x1-conv head on the trunk predicts which"
        " cells are occupied this many pills later in the game (training only: the search never reads it); 0: no"
        " such head",
        ge=0,
        le=64,
    )
    future_weight: float = setting(1.0, "weight of the future-board term (binary cross-entropy, mean over cells)", ge=0)
    next_move_weight: float = setting(
        0.0,
        "auxiliary target (KataGo's opponent move, in a one-player game): a 1x1-conv head on the trunk predicts the"
        " move target of the game's next decision, where the preview pill is to go (training only); the weight of its"
        " cross-entropy in the loss; 0: no such head",
        ge=0,
    )
    outcome_values: bool = setting(
        False,
        "conv and alphago heads: also predict the pills to the end of a won game and the viruses cleared and pills "
        "of a lost one (each trained on the examples of that outcome only; the search reads them in place of the "
        'means over both outcomes; with 100 simulations no gain shown: bench/README.md, "Values conditioned on the '
        'outcome")',
    )

    def check(self) -> list[str]:
        problems = [
            f"{name} = {k}: expected an odd size"
            for name, k in (("kernel", self.kernel), ("policy_kernel", self.policy_kernel))
            if k % 2 == 0
        ]
        if self.outcome_values and self.head == "design":
            problems.append("outcome_values: head 'design' has no value MLP to read")
        return problems


class NetOutput(NamedTuple):
    """Network outputs, float32 whatever the compute dtype."""

    won: torch.Tensor  # [B] in [-1, 1]
    cleared: torch.Tensor  # [B] >= 0
    duration: torch.Tensor  # [B] >= 0
    moves: torch.Tensor  # [B, 4, 8, 16], sums to 1 (0 on masked slots)
    log_moves: torch.Tensor  # [B, 4, 8, 16], log of moves computed stably (-inf on masked slots)
    future: torch.Tensor | None = None  # [B, 8, 16] logits of "occupied future_pills later" (None: no such head)
    next_log_moves: torch.Tensor | None = None  # [B, 4, 8, 16] log-probabilities of the next decision's move
    win_pills: torch.Tensor | None = None  # [B] >= 0 pills to the end of a won game (None: no outcome_values)
    loss_cleared: torch.Tensor | None = None  # [B] >= 0 viruses cleared in a lost game
    loss_pills: torch.Tensor | None = None  # [B] >= 0 pills to the end of a lost game
    won_logit: torch.Tensor | None = None  # [B] won's pre-activation z (won = tanh z), for the log loss

    def search_values(self) -> torch.Tensor:
        """float[B, 6]: won, cleared, duration, win_pills, loss_cleared, loss_pills, the last three
        the means over both outcomes (cleared, duration) where the network has no outcome_values."""
        win_pills = self.duration if self.win_pills is None else self.win_pills
        loss_cleared = self.cleared if self.loss_cleared is None else self.loss_cleared
        loss_pills = self.duration if self.loss_pills is None else self.loss_pills
        columns = (self.won, self.cleared, self.duration, win_pills, loss_cleared, loss_pills)
        return torch.stack([c.float() for c in columns], 1)


SEARCH_VALUES = 6  # the columns of NetOutput.search_values


def softplus(x: torch.Tensor) -> torch.Tensor:
    """The counts' nonlinearity (>= 0)."""
    return F.softplus(x, beta=1, threshold=5)


def heads_to_outputs(scalars: torch.Tensor, score: torch.Tensor, legal: torch.Tensor | None = None) -> NetOutput:
    """Final nonlinearities. scalars float[B, 3] (won, cleared, duration pre-activations);
    score float[B, 512] unnormalised log-probabilities; legal bool[B, 4, 8, 16] or None.

    With legal, illegal slots get probability 0 and the rest is renormalised; a row with no legal
    move at all (a finished position) keeps the unmasked distribution rather than dividing by 0.
    """
    scalars, score = scalars.float(), score.float()
    n = score.shape[0]
    if legal is not None:
        legal = legal.reshape(n, N_MOVES).bool()
        keep = legal | ~legal.any(dim=1, keepdim=True)
        score = score.masked_fill(~keep, float("-inf"))
    log_moves = score - torch.logsumexp(score, dim=1, keepdim=True)
    return NetOutput(
        won=torch.tanh(scalars[:, 0]),
        won_logit=scalars[:, 0],
        cleared=softplus(scalars[:, 1]),
        duration=softplus(scalars[:, 2]),
        moves=log_moves.exp().view(n, *MOVES_SHAPE),
        log_moves=log_moves.view(n, *MOVES_SHAPE),
    )


class ConvBN(nn.Module):
    """Convolution (zero padding, stride 1, no bias: the batch norm's shift is the bias) + batch norm.
    `fuse` folds the norm into the convolution for inference."""

    def __init__(self, cin: int, cout: int, kernel: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, padding=kernel // 2, bias=False)
        self.bn: nn.Module = nn.BatchNorm2d(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))

    def fuse(self) -> None:
        if isinstance(self.bn, nn.BatchNorm2d):
            self.conv = fuse_conv_bn_eval(self.conv.eval(), self.bn.eval())
            self.bn = nn.Identity()


class Residual(nn.Module):
    """conv BN LeakyReLU conv BN, skip connection, LeakyReLU."""

    def __init__(self, filters: int, kernel: int, leak: float) -> None:
        super().__init__()
        self.a = ConvBN(filters, filters, kernel)
        self.b = ConvBN(filters, filters, kernel)
        self.leak = leak

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.leaky_relu(self.a(x), self.leak)
        return F.leaky_relu(x + self.b(y), self.leak)


class DrMarioNet(nn.Module):
    """Stem conv + r residual blocks + the configured head. forward(planes float[B, P, 8, 16],
    legal bool[B, 4, 8, 16] | None) -> NetOutput, with P = `NetConfig.planes`."""

    def __init__(self, cfg: NetConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = cfg or NetConfig()
        self.values_only = False  # `learn_values_only`
        f = cfg.filters
        self.stem = ConvBN(cfg.planes, f, cfg.kernel)
        self.blocks = nn.Sequential(*[Residual(f, cfg.kernel, cfg.leak) for _ in range(cfg.blocks)])
        if cfg.head == "conv":
            self.policy_conv = nn.Conv2d(f, 4, cfg.policy_kernel, padding=cfg.policy_kernel // 2)
            self.pool = ConvBN(f, cfg.pooled_planes, 1)
            self.value_fc = nn.Sequential(
                nn.Linear(2 * cfg.pooled_planes, cfg.value_hidden), nn.ReLU(), nn.Linear(cfg.value_hidden, 3)
            )
        elif cfg.head == "design":
            self.head = nn.Linear(f * CELLS, 3 + N_MOVES)
        elif cfg.head == "alphago":
            self.policy = ConvBN(f, cfg.policy_planes, 1)
            self.policy_fc = nn.Linear(cfg.policy_planes * CELLS, N_MOVES)
            self.value = ConvBN(f, cfg.value_planes, 1)
            self.value_fc = nn.Sequential(
                nn.Linear(cfg.value_planes * CELLS, cfg.value_hidden), nn.ReLU(), nn.Linear(cfg.value_hidden, 3)
            )
        else:  # a new head needs its branch here, in `heads`, `value_head` and `flops_per_position`
            raise NotImplementedError(f"head {cfg.head!r}: DrMarioNet has no branch for it")
        self.outcome_fc = nn.Linear(cfg.value_hidden, 3) if cfg.outcome_values else None
        self.future_conv = nn.Conv2d(f, 1, 1) if cfg.future_pills else None
        self.next_move_conv = nn.Conv2d(f, 4, 1) if cfg.next_move_weight else None

    def forward(self, planes: torch.Tensor, legal: torch.Tensor | None = None) -> NetOutput:
        """planes float[B, cfg.planes, 8, 16]; legal bool[B, 4, 8, 16] masks the moves (None: none masked)."""
        x = self.trunk(planes)
        out = self.heads(x, legal)
        if self.future_conv is not None:
            out = out._replace(future=self.future_conv(x).float().squeeze(1))
        if self.next_move_conv is not None:  # over all 512 slots: the next decision's legal moves are not known here
            logits = self.next_move_conv(x).float()
            out = out._replace(next_log_moves=logits.flatten(1).log_softmax(1).view_as(logits))
        return out

    def trunk(self, planes: torch.Tensor) -> torch.Tensor:
        """The shared features float[B, filters, 8, 16] that every head reads."""
        return self.blocks(F.leaky_relu(self.stem(planes), self.cfg.leak))

    def heads(self, x: torch.Tensor, legal: torch.Tensor | None = None) -> NetOutput:
        """The outputs from the trunk's features x."""
        if self.cfg.head == "conv":
            logits = self.policy_conv(x).flatten(1)  # [B, 4 * 8 * 16]: plane r, cell (x, y)
            v = F.leaky_relu(self.pool(x), self.cfg.leak).flatten(2)  # [B, p, 128]
            # Pooled in float32: torch.compile's backward of a bf16 amax (torch 2.11, H100) read
            # memory it never wrote, so training went NaN whenever a freed block held NaN.
            v32 = v.float()
            pooled = torch.cat([v32.mean(dim=2), v32.amax(dim=2)], dim=1).to(v.dtype)  # [B, 2p]
            return self._values(pooled, logits, legal)
        if self.cfg.head == "design":
            z = self.head(x.flatten(1)).float()  # [B, 3 + 512]
            return heads_to_outputs(z[:, :3], F.logsigmoid(z[:, 3:]), legal)
        if self.cfg.head == "alphago":
            logits = self.policy_fc(F.relu(self.policy(x)).flatten(1))  # [B, 512], softmax logits
            return self._values(F.relu(self.value(x)).flatten(1), logits, legal)
        raise NotImplementedError(f"head {self.cfg.head!r}: heads has no branch for it")

    def _values(self, features: torch.Tensor, logits: torch.Tensor, legal: torch.Tensor | None) -> NetOutput:
        """The outputs from the value MLP's input features float[B, n] and the move logits float[B, 512]."""
        hidden = self.value_fc[1](self.value_fc[0](features))  # [B, value_hidden]
        out = heads_to_outputs(self.value_fc[2](hidden), logits, legal)
        if self.outcome_fc is None:
            return out
        win_pills, loss_cleared, loss_pills = softplus(self.outcome_fc(hidden).float()).unbind(1)
        return out._replace(win_pills=win_pills, loss_cleared=loss_cleared, loss_pills=loss_pills)

    def value_head(self) -> list[nn.Module]:
        """The modules that only the value outputs (won, cleared, duration; outcome_values) read."""
        outcome = [] if self.outcome_fc is None else [self.outcome_fc]
        if self.cfg.head == "conv":
            return [self.pool, self.value_fc, *outcome]
        if self.cfg.head == "alphago":
            return [self.value, self.value_fc, *outcome]
        if self.cfg.head == "design":
            raise ValueError("head 'design' is one layer shared by the moves and the values: it has no value head")
        raise NotImplementedError(f"head {self.cfg.head!r}: value_head has no branch for it")

    def learn_values_only(self) -> DrMarioNet:
        """Freeze everything but `value_head` (the moves output stays exactly as it is); the frozen
        modules stay in eval mode, so their batch norms keep their statistics. Returns self."""
        learning = {id(p) for m in self.value_head() for p in m.parameters()}
        for p in self.parameters():
            p.requires_grad_(id(p) in learning)
        self.values_only = True
        return self.train(self.training)

    def train(self, mode: bool = True) -> DrMarioNet:
        """nn.Module.train, except that after `learn_values_only` the frozen modules stay in eval mode."""
        super().train(mode)
        if self.values_only:
            head = self.value_head()
            for m in self.children():
                if not any(m is h for h in head):
                    m.eval()
        return self

    def fuse_bn(self) -> DrMarioNet:
        """Fold every batch norm into its convolution (eval mode; the module stays fused). Returns self."""
        self.eval()
        for m in self.modules():
            if isinstance(m, ConvBN):
                m.fuse()
        return self

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def flops_per_position(cfg: NetConfig) -> int:
    """Forward FLOPs of one position: 2 per multiply-add of the convolutions and linear layers
    (batch norms, activations and the output nonlinearities are left out). Training is about 3x."""
    k2, f = cfg.kernel**2, cfg.filters
    macs = CELLS * k2 * f * (cfg.planes + 2 * cfg.blocks * f)
    if cfg.head == "conv":
        p, h = cfg.pooled_planes, cfg.value_hidden
        macs += CELLS * f * (4 * cfg.policy_kernel**2 + p) + 2 * p * h + 3 * h * (1 + cfg.outcome_values)
    elif cfg.head == "design":
        macs += f * CELLS * (3 + N_MOVES)
    elif cfg.head == "alphago":
        p, v = cfg.policy_planes, cfg.value_planes
        macs += CELLS * f * (p + v) + p * CELLS * N_MOVES + v * CELLS * cfg.value_hidden
        macs += cfg.value_hidden * 3 * (1 + cfg.outcome_values)
    else:
        raise NotImplementedError(f"head {cfg.head!r}: flops_per_position has no branch for it")
    if cfg.future_pills:
        macs += CELLS * f
    if cfg.next_move_weight:
        macs += CELLS * f * 4
    return 2 * macs
