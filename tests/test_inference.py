"""The self-play inference path: fixed-shape batches, overlapped halves, one server for many workers."""

import queue
import threading
from multiprocessing import shared_memory
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import drmario as dm
from drmario.files import RunError
from drmario.learn.checkpoint import save_net
from drmario.learn.net import DrMarioNet, NetConfig
from drmario.learn.player import Player
from drmario.play import inference
from drmario.play.agents import SearchAgent
from drmario.play.inference import BatchedInference, InferenceServer, InferenceStats, RemoteEvaluator, Ticket
from drmario.play.lockstep import GameSpec, play_lockstep
from drmario.play.selfplay import SelfPlayConfig, generate, read_records
from drmario.search import RolloutEvaluator, SearchConfig


def tiny_net(seed=0) -> DrMarioNet:
    """With the outcome values: every output column the search reads differs from the others."""
    torch.manual_seed(seed)
    return DrMarioNet(NetConfig(filters=8, blocks=1, outcome_values=True))


def some_positions(n: int):
    games = [dm.Game(100 + i, i % 10) for i in range(n)]
    cells = np.stack([g.board.cells for g in games])
    pills = np.array([(g.pill.left, g.pill.right) for g in games], np.uint8)
    previews = np.array([(g.next_pill.left, g.next_pill.right) for g in games], np.uint8)
    return cells, pills, previews


def within(seconds: float, fn):
    """fn() in a daemon thread: a lost wake-up in the server's protocol fails the test instead of
    hanging it."""
    result: dict = {}

    def run():
        try:
            result["value"] = fn()
        except BaseException as e:  # re-raised in the test's thread
            result["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"no answer in {seconds} s"
    if "error" in result:
        raise result["error"]
    return result["value"]


def assert_same(got, want, rows=slice(None)):
    for x, y in zip(got, want):
        np.testing.assert_allclose(x, y[rows], rtol=1e-4, atol=1e-5)


def test_batched_inference_matches_player_and_pads_to_buckets():
    net = tiny_net()
    engine = BatchedInference(net, "cpu", buckets=(4, 16))
    player = Player.from_module(net)
    cells, pills, previews = some_positions(21)
    want = player.evaluate(cells, pills, previews)
    assert want.win_pills is not None and not np.allclose(want.win_pills, want.duration)
    got = engine.evaluate(cells, pills, previews)  # 16 + 5 (padded to 16)
    assert not np.allclose(player.evaluate(cells, pills).moves, want.moves)  # the preview counts
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert engine.stats.batches == 2 and engine.stats.positions == 21
    assert engine.stats.padded == 21  # CPU: no padding (CUDA pads to the bucket for its graphs)
    row = engine.stats.row()
    assert row["batches_0_64"] == 2 and 0 < row["device_busy"] <= 1 and row["padding"] == 0
    with pytest.raises(ValueError, match="at most 16"):
        engine.submit(cells, pills, previews)
    t1 = engine.submit(cells[:3], pills[:3], previews[:3])
    t2 = engine.submit(cells[3:6], pills[3:6], previews[3:6])
    with pytest.raises(RuntimeError, match="in flight"):
        engine.submit(cells[:3], pills[:3], previews[:3])
    np.testing.assert_allclose(engine.wait(t2).won, want.won[3:6], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(engine.wait(t1).won, want.won[:3], rtol=1e-4, atol=1e-5)


class AsyncRollouts(RolloutEvaluator):
    """A deterministic evaluator with the submit/wait interface (evaluation happens in wait)."""

    def submit(self, cells, pills, previews):
        self._held = getattr(self, "_held", {})
        self._held[id(cells)] = (cells.copy(), pills.copy(), previews.copy())
        return Ticket(0, id(cells), len(cells))

    def wait(self, ticket):
        return self.evaluate(*self._held.pop(ticket.slot))


def test_pipelined_halves_play_the_same_games_as_lockstep():
    cfg = SearchConfig(mode="puct", simulations=6)
    specs = [GameSpec(i, 300 + i, level) for i, level in enumerate([0, 2, 4, 6, 1])]
    lockstep = play_lockstep(SearchAgent(cfg, RolloutEvaluator(seed=4)), specs, lockstep=4, max_pills=30)
    piped = play_lockstep(SearchAgent(cfg, AsyncRollouts(seed=4)), specs, lockstep=4, max_pills=30)
    assert [r.moves for r in piped] == [r.moves for r in lockstep]
    assert [r.outcome for r in piped] == [r.outcome for r in lockstep]


def test_pipelined_halves_keep_playout_cap_randomisation():
    """The overlapped path runs the full and the fast searches together (`core.merged`): same
    games, same recorded decisions as lockstep."""
    cfg = SearchConfig(mode="gumbel", simulations=6)
    specs = [GameSpec(i, 300 + i, level) for i, level in enumerate([0, 2, 4, 6, 1])]

    def play(evaluator):
        agent = SearchAgent(cfg, evaluator, full_search_share=0.4, fast_simulations=1)
        recorded = []
        records = play_lockstep(
            agent, specs, lockstep=4, max_pills=30, on_finish=lambda r, d: recorded.append([x.recorded for x in d])
        )
        return [r.moves for r in records], recorded

    (moves, recorded), (piped_moves, piped_recorded) = play(RolloutEvaluator(seed=4)), play(AsyncRollouts(seed=4))
    assert piped_moves == moves and piped_recorded == recorded
    assert 0 < sum(map(sum, recorded)) < sum(map(len, recorded))


def test_inference_server_answers_workers_through_shared_memory():
    net = tiny_net(1)
    cells, pills, previews = some_positions(10)
    want = Player.from_module(net).evaluate(cells, pills, previews)
    with InferenceServer(net, workers=1, capacity=64, buckets=(16, 64)) as server:
        remote = RemoteEvaluator(server.handle(0))
        got = within(60, lambda: remote.evaluate(cells, pills, previews))
        a = remote.submit(cells[:4], pills[:4], previews[:4])
        b = remote.submit(cells[4:], pills[4:], previews[4:])
        got_b, got_a = within(60, lambda: (remote.wait(b), remote.wait(a)))
        remote.close()
        rows = server.close()
    assert_same(got, want)
    assert_same(got_a, want, slice(None, 4))
    assert_same(got_b, want, slice(4, None))
    assert rows and rows[-1]["positions"] == 20 and "device_busy" in rows[-1]


def test_a_worker_submits_up_to_its_capacity_at_once():
    net = tiny_net(1)
    cells, pills, previews = some_positions(11)
    want = Player.from_module(net).evaluate(cells, pills, previews)
    with InferenceServer(net, workers=1, capacity=10, buckets=(16, 64)) as server:
        remote = RemoteEvaluator(server.handle(0))
        ticket = remote.submit(cells[:10], pills[:10], previews[:10])  # exactly the capacity: one request
        assert_same(within(60, lambda: remote.wait(ticket)), want, slice(None, 10))
        assert_same(within(60, lambda: remote.evaluate(cells, pills, previews)), want)  # 10 + 1
        with pytest.raises(ValueError, match="at most 10 positions, got 11"):
            remote.submit(cells, pills, previews)
        remote.close()


def test_a_worker_waiting_on_a_dead_server_gets_a_run_error():
    net = tiny_net(1)
    cells, pills, previews = some_positions(3)
    with InferenceServer(net, workers=1, capacity=16, buckets=(16,)) as server:
        remote = RemoteEvaluator(server.handle(0))
        server.process.kill()
        server.process.join()
        with pytest.raises(RunError, match="search worker 0: the inference server is gone"):
            within(60, lambda: remote.evaluate(cells, pills, previews))
        remote.close()


@pytest.mark.parametrize("capacity", [1, 3, 7, 64, 4096])
def test_a_channels_arrays_do_not_overlap(capacity):
    """Requests in, answers out: each array has its own bytes of the block, the answers 8-aligned."""
    channel = inference._channel(SimpleNamespace(buf=bytearray(inference._channel_bytes(capacity))), capacity)
    for value, array in enumerate(channel, 1):
        array[...] = value
    assert [int(a.min()) for a in channel] == [int(a.max()) for a in channel] == [1, 2, 3, 4]
    assert inference._out_offset(capacity) % 8 == 0


@pytest.mark.parametrize(
    "bucket, sizes",
    [(16, (10, 10)), (64, (4, 6))],  # two batches (the second request carried over), or one batch of both
)
def test_the_server_loop_answers_each_request_from_its_rows_of_the_batch(monkeypatch, bucket, sizes):
    """The server's loop in this process, on requests queued before it starts: a request that does not
    fit the batch goes to the next one, and each slot's answers are its own positions' answers."""
    monkeypatch.setattr(inference, "die_with_parent", lambda parent=None: None)
    net = tiny_net(3)
    cells, pills, previews = some_positions(sum(sizes))
    want = Player.from_module(net).evaluate(cells, pills, previews)
    blocks = [shared_memory.SharedMemory(create=True, size=inference._channel_bytes(16)) for _ in sizes]
    try:
        channels = [inference._channel(b, 16) for b in blocks]
        requests: queue.Queue = queue.Queue()
        start = 0
        for slot, n in enumerate(sizes):
            end = start + n
            ch = channels[slot]
            ch.cells[:n], ch.pills[:n], ch.previews[:n] = cells[start:end], pills[start:end], previews[start:end]
            requests.put((0, slot, n))
            start = end
        requests.put("stop")
        sent: list[int] = []
        state = {"config": net.cfg.to_dict(), "model": net.state_dict()}
        answers = [SimpleNamespace(send=sent.append)]
        inference._serve(state, "cpu", "float32", (bucket,), requests, answers, [[b.name for b in blocks]], 16, None)
        assert sent == [0, 1]
        assert_same(inference._unpack(channels[0].out[: sizes[0]]), want, slice(None, sizes[0]))
        assert_same(inference._unpack(channels[1].out[: sizes[1]]), want, slice(sizes[0], None))
    finally:
        for b in blocks:
            b.close()
            b.unlink()


def test_self_play_runs_the_network_in_its_dtype(tmp_path):
    from drmario.play.selfplay import make_agent

    net = tiny_net(1)
    ckpt = save_net(net, tmp_path / "net.pt")
    search = SearchConfig(mode="gumbel", simulations=2)
    for name, dtype in [("auto", torch.float32), ("float32", torch.float32), ("bfloat16", torch.bfloat16)]:
        assert make_agent(SelfPlayConfig(network=str(ckpt), search=search, dtype=name)).evaluator.dtype == dtype
    cells, pills, previews = some_positions(6)
    want = Player.from_module(net, dtype=torch.bfloat16).evaluate(cells, pills, previews)
    with InferenceServer(net, workers=1, dtype="bfloat16", capacity=64, buckets=(16, 64)) as server:
        remote = RemoteEvaluator(server.handle(0))
        got = remote.evaluate(cells, pills, previews)
        remote.close()
    for x, y in zip(got, want):  # the server's network runs in bfloat16 too: the same answers (float32's differ
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-5)  # from them by up to 2e-4 here)
    with pytest.raises(Exception, match="half"):
        SelfPlayConfig(network=str(ckpt), search=search, dtype="half")


def test_selfplay_with_an_inference_server_and_two_search_processes(tmp_path):
    ckpt = save_net(tiny_net(2), tmp_path / "net.pt")
    cfg = SelfPlayConfig(
        games=4,
        levels=[0, 3],
        seed=2,
        games_per_shard=2,
        max_pills=40,
        workers=2,
        inference="server",
        network=str(ckpt),
        search=SearchConfig(mode="puct", simulations=4),
    )
    table = generate(cfg, tmp_path / "run", progress=False)
    assert table.loc["all", "games"] == 4
    records = read_records(tmp_path / "run")
    assert sorted(r.meta["index"] for r in records) == [0, 1, 2, 3]
    assert all(r.meta["search_kl"] >= 0 for r in records) and table.loc["all", "search_kl"] > 0  # KL(target || prior)
    for r in records:
        if r.outcome:
            r.replay()
    metrics = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    assert metrics[0].startswith("wall_s,batches,positions,positions_per_s,device_busy")
    assert int(metrics[-1].split(",")[2]) > 0
    with pytest.raises(ValueError, match="server"):
        SelfPlayConfig(inference="server")


def test_rounds_table_has_a_kl_for_network_rounds_and_none_for_round_zero(tmp_path):
    """The expert (round 0 of the profiles) and round-0 MCTS have no network prior, so no KL: the
    table keeps it NaN."""
    from drmario.run.notebook import selfplay_rounds_table

    ckpt = save_net(tiny_net(3), tmp_path / "net.pt")
    base = dict(games=2, levels=[0], seed=4, games_per_shard=2, max_pills=30, workers=1)
    generate(SelfPlayConfig(**base, search=SearchConfig(mode="expert")), tmp_path / "run" / "round0", progress=False)
    search = SearchConfig(mode="puct", simulations=4)
    dagger = SelfPlayConfig(**base, network=str(ckpt), search=search, labels="expert")
    generate(dagger, tmp_path / "run" / "round1", progress=False)
    mcts = SearchConfig(mode="round0", simulations=8)
    generate(SelfPlayConfig(**base, search=mcts), tmp_path / "run" / "round2", progress=False)
    table = selfplay_rounds_table(tmp_path / "run")
    assert list(table.index) == [0, 1, 2] and table.loc[1, "games"] == 2
    searches = ["expert, depth 2", "puct, 4 simulations; the expert's labels", "round0, 8 simulations"]
    assert list(table["search"]) == searches
    assert np.isnan(table.loc[0, "search_kl"]) and table.loc[1, "search_kl"] > 0 and np.isnan(table.loc[2, "search_kl"])
    from drmario.engine.level import virus_count
    from drmario.play.selfplay import read_records

    shares = [r.viruses_cleared / virus_count(r.level) for r in read_records(tmp_path / "run" / "round0")]
    assert table.loc[0, "cleared_share"] == pytest.approx(np.mean(shares))  # a mean per game, not a sum


def test_inference_stats_count_padding_and_bin_batch_sizes_by_their_lower_edge():
    stats = InferenceStats()
    for n, padded in ((300, 512), (64, 64), (63, 64), (0, 0)):
        stats.add(n, padded, 0.1)
    row = stats.row()
    assert row["padding"] == round(1 - 427 / 640, 4) and row["positions"] == 427 and row["batches"] == 4
    assert (row["batches_0_64"], row["batches_64_128"], row["batches_256_512"]) == (2, 1, 1)  # 64 is [64, 128)
    stats.reset()
    assert stats.row()["batches"] == 0 and stats.row()["padding"] == 0


def test_a_server_that_cannot_make_its_shared_memory_leaves_none_behind(monkeypatch):
    made: list[shared_memory.SharedMemory] = []
    original = shared_memory.SharedMemory

    def third_fails(*args, **kwargs):
        if len(made) == 2:
            raise OSError(28, "No space left on device")
        made.append(original(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(inference.shared_memory, "SharedMemory", third_fails)
    with pytest.raises(OSError, match="No space left"):
        InferenceServer(tiny_net(1), workers=2, capacity=16, buckets=(16,))
    for block in made:  # unlinked: opening it by name fails
        with pytest.raises(FileNotFoundError):
            original(name=block.name)
