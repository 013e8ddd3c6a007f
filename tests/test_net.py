"""The residual network, its loss, checkpoints and the Player (tiny networks, CPU)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import drmario as dm
from drmario.learn.checkpoint import CheckpointError, load_net, save_net
from drmario.learn.dataset import ExampleSet
from drmario.learn.encode import moves_from_dict, planes_torch
from drmario.learn.loss import loss_terms
from drmario.learn.net import HEADS, DrMarioNet, NetConfig, NetOutput, flops_per_position
from drmario.learn.player import Player, load_player

TINY = {"filters": 8, "blocks": 1}


def real_examples(n_games: int = 6, seed: int = 0, level: int = 3) -> ExampleSet:
    """Examples from random games: the target of each decision is the move played (its mass split
    between r and r + 2 for a same-colour pill); cleared and duration count from the decision on."""
    rng = np.random.default_rng(seed)
    cols: dict[str, list] = {k: [] for k in ("cells", "pills", "won", "cleared", "duration", "moves", "game")}
    for g in range(n_games):
        game = dm.Game(int(rng.integers(2, 0x10000)), level)
        before = []
        while not game.over:
            moves = game.legal_moves()
            move = moves[rng.integers(len(moves))]
            cols["cells"].append(game.board.cells)
            cols["pills"].append((game.pill.left, game.pill.right))
            cols["moves"].append(moves_from_dict({move: 1.0}, game.pill))
            before.append((game.viruses_cleared, game.pills_used))
            game.play(move)
        for c, p in before:
            cols["cleared"].append(game.viruses_cleared - c)
            cols["duration"].append(game.pills_used - p)
        cols["won"] += [game.outcome.won_value] * len(before)
        cols["game"] += [g] * len(before)
    return ExampleSet.from_dense(**{k: np.array(v) for k, v in cols.items()})


@pytest.fixture(scope="module")
def examples() -> ExampleSet:
    return real_examples()


def batch_of(examples: ExampleSet, n: int = 32, n_planes: int = 24):
    return examples.to_device("cpu", n_planes).batch(torch.arange(n))


@pytest.mark.parametrize("head", HEADS)
def test_outputs_shapes_and_ranges(examples, head):
    torch.manual_seed(0)
    net = DrMarioNet(NetConfig(head=head, **TINY))
    out = net(batch_of(examples).planes)
    assert out.won.shape == out.cleared.shape == out.duration.shape == (32,)
    assert out.moves.shape == out.log_moves.shape == (32, 4, 8, 16)
    assert out.won.abs().max() <= 1 and out.cleared.min() >= 0 and out.duration.min() >= 0
    torch.testing.assert_close(out.moves.sum(dim=(1, 2, 3)), torch.ones(32))
    torch.testing.assert_close(out.log_moves.exp(), out.moves)


def test_extreme_logits_stay_finite(examples):
    """Saturated sigmoids: probabilities far below float32's range must keep a finite log."""
    torch.manual_seed(0)
    net = DrMarioNet(NetConfig(head="design", **TINY))
    with torch.no_grad():
        net.head.weight.mul_(1e4)
    batch = batch_of(examples)
    out = net(batch.planes)
    assert out.moves.min() == 0  # some slots underflow to 0 ...
    assert torch.isfinite(out.log_moves).all()  # ... but their log does not
    torch.testing.assert_close(out.moves.sum(dim=(1, 2, 3)), torch.ones(32))
    terms = loss_terms(out, batch, net.cfg, net)
    assert all(torch.isfinite(v) for v in terms.values())
    terms["total"].backward()
    assert all(torch.isfinite(p.grad).all() for p in net.parameters())


@pytest.mark.parametrize("head", HEADS)
def test_legal_mask(examples, head):
    torch.manual_seed(1)
    net = DrMarioNet(NetConfig(head=head, **TINY)).eval()
    batch = batch_of(examples, 8)
    legal = batch.legal.clone()
    legal[3] = False  # no legal move at all: the row keeps the unmasked distribution
    out, free = net(batch.planes, legal), net(batch.planes)
    assert (out.moves[~legal & legal.flatten(1).any(1)[:, None, None, None]] == 0).all()
    torch.testing.assert_close(out.moves.sum(dim=(1, 2, 3)), torch.ones(8))
    torch.testing.assert_close(out.moves[3], free.moves[3])
    # on the legal slots, the masked distribution is the unmasked one renormalised
    i = 0
    expect = free.moves[i] * legal[i] / (free.moves[i] * legal[i]).sum()
    torch.testing.assert_close(out.moves[i], expect)


def outputs_by_hand(**more: torch.Tensor) -> NetOutput:
    """The outputs of two examples, worked out on paper (uniform moves), with `more` outputs."""
    uniform = torch.full((2, 4, 8, 16), 1 / 512)
    return NetOutput(
        won=torch.tensor([0.5, -1.0]),
        cleared=torch.tensor([3.0, 0.0]),
        duration=torch.tensor([10.0, 2.0]),
        moves=uniform,
        log_moves=uniform.log(),
        **more,
    )


def test_loss_by_hand():
    """Two examples with numbers worked out on paper."""
    out = outputs_by_hand()
    target = torch.zeros(2, 4, 8, 16)
    target[0, 1, 2, 3] = 1.0
    target[1, 0, 4, 5] = target[1, 2, 4, 5] = 0.5
    batch = dm_batch(won=[1.0, -1.0], cleared=[5.0, 0.0], duration=[8.0, 0.0], moves=target)
    terms = loss_terms(out, batch, NetConfig(**TINY, count_error="relative"))
    # won: 0.5^2 and 0; cleared: ((3-5)/5)^2 and ((0-0)/1)^2; duration: ((10-8)/8)^2 and ((2-0)/1)^2
    assert terms["won"].item() == pytest.approx((0.25 + 0) / 2)
    assert terms["cleared"].item() == pytest.approx((0.16 + 0) / 2)
    assert terms["duration"].item() == pytest.approx((0.0625 + 4) / 2)
    assert terms["moves"].item() == pytest.approx(math.log(512), rel=1e-6)
    assert terms["reg"].item() == 0
    assert terms["total"].item() == pytest.approx(0.125 + 0.08 + 2.03125 + math.log(512), rel=1e-6)
    # scaled (the default): the count errors over 100, so the minimiser is the mean
    scaled = loss_terms(out, batch, NetConfig(**TINY))
    assert scaled["cleared"].item() == pytest.approx((0.02**2 + 0) / 2)
    assert scaled["duration"].item() == pytest.approx((0.02**2 + 0.02**2) / 2)
    # value_weight scales the three value terms in the total only; each term is reported as it is
    light = loss_terms(out, batch, NetConfig(**TINY, count_error="relative", value_weight=0.1))
    assert light["won"].item() == pytest.approx(terms["won"].item())
    assert light["total"].item() == pytest.approx(0.1 * (0.125 + 0.08 + 2.03125) + math.log(512), rel=1e-6)


def test_future_board_target_is_the_occupancy_n_decisions_later_in_the_same_game(examples):
    n = 3
    batch = examples.to_device("cpu", 24, future_pills=n).batch(torch.arange(len(examples)))
    assert batch.future is not None and batch.future_known is not None
    for i in range(len(examples)):
        g, d = examples.game[i], examples.duration[i]
        later = np.nonzero((examples.game == g) & (examples.duration == d - n))[0]
        assert bool(batch.future_known[i]) == (len(later) == 1)  # the game's last n decisions have none
        if len(later):
            expect = torch.as_tensor(examples.cells[later[0]] != 0, dtype=torch.float32)
            torch.testing.assert_close(batch.future[i], expect)
    assert 0 < batch.future_known.float().mean() < 1
    assert examples.to_device("cpu", 24).batch(torch.arange(4)).future is None  # not asked for, not made


def test_future_head_and_its_loss_by_hand(examples):
    torch.manual_seed(0)
    plain = DrMarioNet(NetConfig(**TINY))
    assert plain.future_conv is None and plain(batch_of(examples).planes).future is None
    cfg = NetConfig(**TINY, future_pills=2, future_weight=0.5)
    net = DrMarioNet(cfg)
    batch = examples.to_device("cpu", 24, future_pills=2).batch(torch.arange(len(examples)))
    out = net(batch.planes)
    assert out.future is not None and out.future.shape == (len(examples), 8, 16)
    # logits 0: every cell's cross-entropy is log 2, whatever the target
    terms = loss_terms(out._replace(future=torch.zeros_like(out.future)), batch, cfg)
    assert terms["future"].item() == pytest.approx(math.log(2))
    # the mean over the examples whose game lasts 2 more decisions; the others do not count
    z, y, known = out.future, batch.future, batch.future_known
    per_example = (torch.nn.functional.softplus(z) - z * y).mean(dim=(1, 2))
    terms = loss_terms(out, batch, cfg)
    torch.testing.assert_close(terms["future"], per_example[known].mean())
    base = terms["total"] - 0.5 * terms["future"]
    torch.testing.assert_close(base, loss_terms(out._replace(future=None), batch, cfg)["total"])
    # a batch without the target (or, above, an output without the head): the term is 0
    no_target = examples.to_device("cpu", 24).batch(torch.arange(len(examples)))
    assert loss_terms(out, no_target, cfg)["future"].item() == 0


def test_next_move_target_is_the_move_of_the_next_decision_in_the_same_game(examples):
    batch = examples.to_device("cpu", 24, next_move=True).batch(torch.arange(len(examples)))
    assert batch.next_moves is not None and batch.next_known is not None
    dense = examples.dense_moves()
    for i in range(len(examples)):
        later = np.nonzero((examples.game == examples.game[i]) & (examples.duration == examples.duration[i] - 1))[0]
        assert bool(batch.next_known[i]) == (len(later) == 1)  # a game's last decision has none
        expect = dense[later[0]] if len(later) else np.zeros_like(dense[i])
        np.testing.assert_allclose(batch.next_moves[i].numpy(), expect, atol=1e-6)
    assert 0 < batch.next_known.float().mean() < 1
    assert examples.to_device("cpu", 24).batch(torch.arange(4)).next_moves is None  # not asked for, not made


def test_next_move_head_and_its_loss_by_hand(examples):
    torch.manual_seed(0)
    assert DrMarioNet(NetConfig(**TINY)).next_move_conv is None
    cfg = NetConfig(**TINY, next_move_weight=0.25)
    net = DrMarioNet(cfg)
    batch = examples.to_device("cpu", 24, next_move=True).batch(torch.arange(len(examples)))
    out = net(batch.planes)
    assert out.next_log_moves is not None and out.next_log_moves.shape == (len(examples), 4, 8, 16)
    torch.testing.assert_close(out.next_log_moves.exp().sum(dim=(1, 2, 3)), torch.ones(len(examples)))
    # uniform over the 512 slots: the cross-entropy is log 512, whatever the target
    uniform = torch.full_like(out.next_log_moves, -math.log(512))
    assert loss_terms(out._replace(next_log_moves=uniform), batch, cfg)["next"].item() == pytest.approx(math.log(512))
    # the mean over the examples with a next decision; a game's last decision does not count
    per_example = -(batch.next_moves * out.next_log_moves).sum(dim=(1, 2, 3))
    terms = loss_terms(out, batch, cfg)
    torch.testing.assert_close(terms["next"], per_example[batch.next_known].mean())
    base = terms["total"] - 0.25 * terms["next"]
    torch.testing.assert_close(base, loss_terms(out._replace(next_log_moves=None), batch, cfg)["total"])
    no_target = examples.to_device("cpu", 24).batch(torch.arange(len(examples)))
    assert loss_terms(out, no_target, cfg)["next"].item() == 0


def test_play_never_reads_the_auxiliary_heads(examples):
    torch.manual_seed(0)
    net = DrMarioNet(NetConfig(**TINY, future_pills=2, next_move_weight=0.25))
    player = Player(net)  # leaves them out; its outputs are the network's
    assert player.module.future_conv is None and player.module.next_move_conv is None
    assert net.future_conv is not None and net.next_move_conv is not None
    pred = player.evaluate(examples.cells[:8], examples.pills[:8], examples.previews[:8])
    expect = net.eval()(batch_of(examples).planes[:8])
    np.testing.assert_allclose(pred.won, expect.won.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(pred.moves, expect.moves.detach().numpy(), atol=1e-5)


@pytest.mark.parametrize("head", ["conv", "alphago"])
def test_outcome_values_are_counts_the_value_head_owns_and_play_reads(examples, head):
    torch.manual_seed(0)
    plain = DrMarioNet(NetConfig(head=head, **TINY))
    assert plain.outcome_fc is None and plain(batch_of(examples).planes).win_pills is None
    net = DrMarioNet(NetConfig(head=head, outcome_values=True, **TINY))
    out = net.eval()(batch_of(examples).planes)
    for counts in (out.win_pills, out.loss_cleared, out.loss_pills):
        assert counts is not None and counts.shape == (32,) and counts.min() >= 0
    assert any(m is net.outcome_fc for m in net.value_head())
    # the search's columns: won, cleared, duration, then the outcome values (the means where a network has none)
    torch.testing.assert_close(out.search_values()[:, 3], out.win_pills)
    torch.testing.assert_close(out.search_values()[:, 4], out.loss_cleared)
    plain_out = plain.eval()(batch_of(examples).planes)
    torch.testing.assert_close(plain_out.search_values()[:, 3:], plain_out.search_values()[:, [2, 1, 2]])
    pred = Player(net).evaluate(examples.cells[:32], examples.pills[:32], examples.previews[:32])
    np.testing.assert_allclose(pred.win_pills, out.win_pills.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(pred.loss_pills, out.loss_pills.detach().numpy(), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="outcome_values: head 'design'"):
        NetConfig(head="design", outcome_values=True)


def won_and_lost_by_hand():
    """Outputs with outcome values, and a batch of a won and a lost example, worked out on paper."""
    out = outputs_by_hand(
        win_pills=torch.tensor([18.0, 500.0]),
        loss_cleared=torch.tensor([900.0, 4.0]),
        loss_pills=torch.tensor([700.0, 12.0]),
    )
    return out, dm_batch(won=[1.0, -1.0], cleared=[5.0, 2.0], duration=[8.0, 2.0], moves=out.moves)


def test_outcome_values_loss_by_hand():
    """A won example is scored on its pills to the end alone; a lost one on its cleared and pills."""
    out, batch = won_and_lost_by_hand()
    cfg = NetConfig(**TINY, value_weight=0.5)
    terms = loss_terms(out, batch, cfg)
    # won: ((18 - 8) / 100)^2; lost: ((4 - 2) / 100)^2 + ((12 - 2) / 100)^2; the other outcome's outputs unread
    assert terms["outcome"].item() == pytest.approx((0.01 + 0.0004 + 0.01) / 2)
    without = loss_terms(out._replace(win_pills=None, loss_cleared=None, loss_pills=None), batch, cfg)
    assert without["outcome"].item() == 0
    assert terms["total"].item() == pytest.approx(without["total"].item() + 0.5 * terms["outcome"].item())


def test_the_value_mask_keeps_the_value_terms_to_its_examples():
    out, batch = won_and_lost_by_hand()
    cfg = NetConfig(**TINY, count_error="relative")
    whole = {k: v.item() for k, v in loss_terms(out, batch, cfg).items()}
    one = {k: v.item() for k, v in loss_terms(out, batch._replace(value_mask=torch.tensor([True, False])), cfg).items()}
    first = {k: v.item() for k, v in loss_terms(_first(out), _first(batch), cfg).items()}
    for term in ("won", "cleared", "duration", "outcome"):  # the mean over the examples kept
        assert one[term] == pytest.approx(first[term]) and one[term] != pytest.approx(whole[term])
    assert one["moves"] == pytest.approx(whole["moves"])  # the moves term keeps every example
    none = loss_terms(out, batch._replace(value_mask=torch.tensor([False, False])), cfg)
    assert none["won"].item() == none["cleared"].item() == none["outcome"].item() == 0


def _first(t):
    """The first example of a NetOutput or Batch (None fields stay None)."""
    return type(t)(*(None if v is None else v[:1] for v in t))


def dm_batch(won, cleared, duration, moves):
    from drmario.learn.dataset import Batch

    n = len(won)
    return Batch(
        planes=torch.zeros(n, 24, 8, 16),
        won=torch.tensor(won),
        cleared=torch.tensor(cleared),
        duration=torch.tensor(duration),
        moves=moves,
        legal=torch.ones(n, 4, 8, 16, dtype=torch.bool),
    )


@pytest.mark.parametrize("head", HEADS)
def test_loss_matches_plain_torch(examples, head):
    torch.manual_seed(2)
    cfg = NetConfig(head=head, reg=1e-3, count_error="relative", **TINY)
    net = DrMarioNet(cfg)
    batch = batch_of(examples)
    out = net(batch.planes)
    terms = loss_terms(out, batch, cfg, net)
    w, c, d, m = batch.won, batch.cleared, batch.duration, batch.moves
    expect = {
        "won": ((out.won - w) ** 2).mean(),
        "cleared": (((out.cleared - c) / torch.maximum(c, torch.ones_like(c))) ** 2).mean(),
        "duration": (((out.duration - d) / torch.maximum(d, torch.ones_like(d))) ** 2).mean(),
        "moves": (-(m * torch.log(out.moves)).sum(dim=(1, 2, 3))).mean(),
        "reg": 1e-3 * sum((p**2).sum() for p in net.parameters()),
    }
    expect["total"] = sum(expect.values())
    for k, v in expect.items():
        torch.testing.assert_close(terms[k], v, msg=k)
    assert terms["reg"].requires_grad  # the regulariser acts through the loss


FLOPS_CASES = [(h, aux) for h in HEADS for aux in ({}, {"future_pills": 2}, {"next_move_weight": 0.5})]
FLOPS_CASES += [(h, {"outcome_values": True}) for h in HEADS if h != "design"]


@pytest.mark.parametrize(("head", "aux"), FLOPS_CASES)
def test_flops_count_matches_the_layers(head, aux):
    """The analytic count against multiply-adds counted from the layers that actually run."""
    cfg = NetConfig(head=head, filters=8, blocks=2, kernel=5, value_hidden=16, **aux)
    net = DrMarioNet(cfg)
    macs = []

    def hook(module, inputs, output):
        if isinstance(module, torch.nn.Conv2d):
            macs.append(output[0].numel() * module.in_channels * module.kernel_size[0] * module.kernel_size[1])
        else:
            macs.append(module.in_features * module.out_features)

    for m in net.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            m.register_forward_hook(hook)
    net(torch.zeros(1, cfg.planes, 8, 16))
    assert flops_per_position(cfg) == 2 * sum(macs)


def test_config_dict_round_trip():
    cfg = NetConfig(filters=32, blocks=3, head="alphago", value_hidden=64)
    assert NetConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="filter: not a setting .did you mean 'filters'"):
        NetConfig.from_dict({"filter": 32})
    with pytest.raises(ValueError, match="head"):
        NetConfig(head="policy")
    with pytest.raises(ValueError, match="odd"):
        NetConfig(kernel=4)


def test_design_defaults():
    cfg = NetConfig()
    assert (cfg.kernel, cfg.filters, cfg.blocks, cfg.leak, cfg.reg) == (3, 256, 19, 0.1, 1e-4)
    assert cfg.head == "conv"  # measured to generalise (spec/design.md section 2); "design" stays selectable


def test_conv_head_maps_plane_r_cell_xy_to_slot_r_x_y(examples):
    """The conv head's logit for slot r * 128 + x * 16 + y is its plane r at cell (x, y): a 1x1
    policy convolution that only reads channel 0 of the trunk puts the trunk's own map on each plane."""
    net = DrMarioNet(NetConfig(head="conv", **TINY)).eval()
    with torch.no_grad():
        net.policy_conv.weight.zero_()
        net.policy_conv.bias.copy_(torch.tensor([0.0, 1.0, 2.0, 3.0]))
        out = net(batch_of(examples, 2).planes)
    # constant logits per plane: plane r holds e^r / sum over planes, on each of its 128 cells
    per_plane = out.moves[0].sum(dim=(1, 2))
    expected = torch.exp(torch.arange(4.0)) / torch.exp(torch.arange(4.0)).sum()
    torch.testing.assert_close(per_plane, expected)
    assert torch.allclose(out.moves[0, 2], out.moves[0, 2, 0, 0].expand(8, 16))
    assert NetConfig(head="conv", **TINY).to_dict()["policy_kernel"] == 1
    with pytest.raises(ValueError, match="policy_kernel = 2"):
        NetConfig(policy_kernel=2)


@pytest.mark.parametrize("head, n_planes", [("design", 24), ("alphago", 24), ("conv", 28)])
def test_load_player_round_trip(tmp_path, examples, head, n_planes):
    torch.manual_seed(3)
    net = DrMarioNet(NetConfig(head=head, planes=n_planes, **TINY))
    net.train()
    net(batch_of(examples, 64, n_planes).planes)  # move the batch-norm statistics off their initial values
    net.eval()
    path = save_net(net, tmp_path / "net.pt")
    player = load_player(path, chunk=7)  # several chunks, the last one short
    n = 20
    cells, pills, legal = examples.cells[:n], examples.pills[:n], examples.legal()[:n]
    previews = examples.previews[:n]
    got = player.evaluate(cells, pills, previews, legal=legal)
    with torch.no_grad():
        x = planes_torch(torch.from_numpy(cells), torch.from_numpy(pills), torch.from_numpy(previews), n_planes)
        want = net(x, torch.from_numpy(legal))
    for name in ("won", "cleared", "duration", "moves"):
        a = getattr(got, name)
        assert a.dtype == np.float32 and a.shape == tuple(getattr(want, name).shape)
        np.testing.assert_allclose(a, getattr(want, name).numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    assert (got.moves[~legal] == 0).all()
    # from_module gives the same, and leaves the caller's module as it was (batch norms not folded)
    same = Player.from_module(net).evaluate(cells, pills, previews, legal=legal)
    np.testing.assert_allclose(same.moves, got.moves, rtol=1e-5, atol=1e-7)
    assert isinstance(net.stem.bn, torch.nn.BatchNorm2d)
    # bf16 inference (the CUDA default) is close to float32
    half = Player.from_module(net, dtype=torch.bfloat16).evaluate(cells, pills, previews, legal=legal)
    np.testing.assert_allclose(half.won, got.won, atol=0.05)
    with pytest.raises(ValueError, match="pills"):
        player.evaluate(cells, pills[:3])


def test_checkpoint_of_another_config(tmp_path):
    path = save_net(DrMarioNet(NetConfig(filters=8, blocks=2)), tmp_path / "small.pt")
    with pytest.raises(CheckpointError) as err:
        load_net(path, NetConfig(filters=16, blocks=1))
    msg = str(err.value)
    assert "small.pt" in msg and "filters=8 (this network: 16)" in msg and "blocks=2" in msg
    assert "stem.conv.weight (8, 24, 3, 3) vs (16, 24, 3, 3)" in msg and "unexpected: blocks.1" in msg
    assert load_net(path).cfg == NetConfig(filters=8, blocks=2)  # its own config loads


def test_corrupted_checkpoints(tmp_path):
    good = save_net(DrMarioNet(NetConfig(**TINY)), tmp_path / "good.pt")
    data = good.read_bytes()
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(data[: len(data) // 2])
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    for path in (truncated, garbage):
        with pytest.raises(CheckpointError, match=f"{path.name}.*cannot be read") as err:
            load_player(path)
        assert "weights_only" not in str(err.value)  # torch's advice to unpickle it anyway is not passed on
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    save_net(DrMarioNet(NetConfig(**TINY)), tmp_path / "run" / "checkpoints" / "latest.pt")
    with pytest.raises(FileNotFoundError, match=r"run is a directory: give a checkpoint file \(.pt\), e.g. .*latest"):
        load_net(tmp_path / "run")
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, other)
    with pytest.raises(CheckpointError, match="other.pt is not a drmario network checkpoint"):
        load_net(other)
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        load_net(tmp_path / "missing.pt")


def test_the_won_log_loss_keeps_its_gradient_where_tanh_saturates():
    """won = tanh z saturated at +1 for a lost game: the squared error's gradient is 0 (exactly, in
    float32: a dead output); the log loss of P(win) = sigmoid(2z) still pulls z down."""
    z = torch.tensor([12.0, 0.3], requires_grad=True)
    uniform = torch.full((2, 4, 8, 16), 1 / 512)
    batch = dm_batch(won=[-1.0, 1.0], cleared=[0.0, 0.0], duration=[0.0, 0.0], moves=uniform)

    def won_term(loss: str) -> torch.Tensor:
        zeros = torch.zeros(2)
        out = NetOutput(torch.tanh(z), zeros, zeros, uniform, uniform.log(), won_logit=z)
        return loss_terms(out, batch, NetConfig(**TINY, won_loss=loss))["won"]

    (squared,) = torch.autograd.grad(won_term("squared"), z)
    (log,) = torch.autograd.grad(won_term("log"), z)
    assert squared[0] == 0 and log[0] > 0.9  # d/dz of -log(1 - sigmoid(2z)) / 2 examples: sigmoid(2z) ~ 1
    # the log loss itself: -log P(the outcome), P(win) = sigmoid(2z): -log(1 - sigmoid(24)) = softplus(24)
    assert won_term("log").item() == pytest.approx((math.log1p(math.exp(24)) + math.log1p(math.exp(-0.6))) / 2)
    with pytest.raises(ValueError, match="won_loss = 'log' needs"):
        out = NetOutput(torch.tanh(z), torch.zeros(2), torch.zeros(2), uniform, uniform.log())
        loss_terms(out, batch, NetConfig(**TINY, won_loss="log"))
