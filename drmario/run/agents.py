"""Agents by name: the one registry the command line, the notebooks, the pipeline and the benchmarks
share, so an agent is called the same everywhere.

A spec is ``KIND[-SIMULATIONS][@CHECKPOINT]``; the agent's name is the spec without the checkpoint,
with the default simulations filled in (``mcts`` -> ``mcts-100``):

==================  ============================================================================
``random``          uniformly random legal placements
``greedy``          the one-ply greedy heuristic
``expert``          the depth-2 heuristic search over the pill and the NES preview (tuned weights)
``expert3``         the same with depth 3: the expectation over the pill after the preview, on a beam
``expert4``         depth 4: the expectation over the two pills after the preview (8.6 times depth 3's time)
``mcts-N``          round-0 MCTS (no network) with N simulations, random rollouts
``mcts-greedy-N``   round-0 MCTS with greedy rollouts
``policy``          the network's move output alone (no search)
``net-mcts-N``      the network with N simulations of PUCT (no root noise)
``net-gumbel-N``    the network with N simulations of Gumbel root search
``dqn``, ``td``     the baseline learners (`drmario.baselines`), from their checkpoints
==================  ============================================================================

The network agents (and dqn, td) need a checkpoint: ``@PATH`` in the spec, or the ``network``
argument (a path, the name of a network shipped with the kit such as ``small``, or a loaded
`Player` for the network agents).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from drmario.play.agents import Agent, GreedyAgent, PlayDtype, PolicyAgent, RandomAgent, SearchAgent
from drmario.run.kit import shipped_network
from drmario.search.config import SearchConfig
from drmario.search.expert import ExpertDepth, ExpertSettings
from drmario.search.network import GumbelSettings, PuctSettings
from drmario.search.round0 import Round0Settings

if TYPE_CHECKING:
    from drmario.learn.player import Player

DEFAULT_SIMULATIONS = 100
SEARCH_KINDS = ("mcts", "mcts-greedy", "net-mcts", "net-gumbel")
NETWORK_KINDS = ("policy", "net-mcts", "net-gumbel")
TORCH_KINDS = (*NETWORK_KINDS, "dqn", "td")  # the agents that run a torch network
EXPERT_DEPTHS: dict[str, ExpertDepth] = {"expert": 2, "expert3": 3, "expert4": 4}
KINDS = ("random", "greedy", *EXPERT_DEPTHS, *SEARCH_KINDS, "policy", "dqn", "td")
AGENT_HELP = (
    "KIND[-SIMULATIONS][@CHECKPOINT] with KIND one of: random, greedy, expert, expert3, expert4 (depths 3, 4), "
    "mcts, mcts-greedy (round-0 MCTS, random or greedy rollouts), policy (the network alone), net-mcts, net-gumbel "
    "(the network with search), dqn, td; e.g. mcts-200, net-mcts-100@runs/demo/train0/checkpoints/latest.pt, "
    f"policy@small (the shipped network; default {DEFAULT_SIMULATIONS} simulations)"
)
DTYPES: tuple[str, ...] = get_args(PlayDtype)
DTYPE_HELP = (
    "the networks' number format in play: auto (bfloat16 on CUDA, float32 on the CPU), float32, or bfloat16 "
    "(faster on CPUs with AMX or AVX512-BF16: the apprentice's search 5x on a Xeon; some moves differ; README)"
)
_SPEC = re.compile(r"^(?P<kind>[a-z][a-z0-9]*(?:-[a-z]+)*?)(?:-(?P<sims>\d+))?(?:@(?P<path>.+))?$")


def parse_spec(spec: str) -> tuple[str, int | None, str | None]:
    """(kind, simulations or None, checkpoint path or None); ValueError naming what is wrong."""
    m = _SPEC.match(spec.strip())
    if m is None or m["kind"] not in KINDS:
        close = _close_spec(spec.strip())
        if close:
            raise ValueError(f"agent {spec!r}: not a known agent; did you mean {close}?")
        raise ValueError(f"agent {spec!r}: not a known agent; an agent is {AGENT_HELP}")
    kind, sims = m["kind"], m["sims"]
    if sims is not None and kind not in SEARCH_KINDS:
        raise ValueError(f"agent {spec!r}: {kind} takes no simulation count")
    if sims is not None and int(sims) < 1:
        raise ValueError(f"agent {spec!r}: the simulation count must be >= 1")
    if m["path"] is not None and kind not in TORCH_KINDS:
        raise ValueError(f"agent {spec!r}: {kind} plays without a network; only {', '.join(TORCH_KINDS)} take @PATH")
    return kind, None if sims is None else int(sims), m["path"]


def _close_spec(spec: str) -> str | None:
    """The spec with its kind replaced by the closest known kind (``polcy@small`` -> ``policy@small``)."""
    head, at, path = spec.partition("@")
    m = re.fullmatch(r"(.*?)(-\d+)?", head, re.DOTALL)
    kind, sims = m.groups() if m else (head, None)
    close = difflib.get_close_matches(kind, KINDS, n=1)
    return f"{close[0]}{sims or ''}{at}{path}" if close else None


def agent_name(spec: str) -> str:
    """The name an agent made from spec plays under (the spec without its checkpoint)."""
    kind, sims, _ = parse_spec(spec)
    if kind in SEARCH_KINDS:
        return f"{kind}-{sims or DEFAULT_SIMULATIONS}"
    return kind


def network_name(spec: str, network: str | Path | None = None) -> str:
    """An agent's name with the network it plays with, as given (``policy@small``, or with
    network="small" for ``policy``): tables of agents from several networks stay apart. Agents
    without a network keep `agent_name`."""
    kind, _, path = parse_spec(spec)
    source = path or network
    return f"{agent_name(spec)}@{source}" if kind in TORCH_KINDS and source is not None else agent_name(spec)


def resolve_checkpoint(source: str | Path) -> Path:
    """A checkpoint path, or the name of a network shipped with the kit (``small``:
    data/networks/small.pt)."""
    path = Path(source)
    if not path.exists() and re.fullmatch(r"[\w-]+", str(source)):
        try:
            return shipped_network(str(source))
        except FileNotFoundError as e:  # say both: a mistyped path reads as a name
            raise FileNotFoundError(f"{source!r}: no such file here ({path.resolve()}), and {e}") from None
    return path


def make_agent(
    spec: str, *, network: str | Path | Player | None = None, device: str = "cpu", dtype: str | None = None
) -> Agent:
    """An agent from its spec (module docstring), e.g. ``"mcts-200"`` or ``"net-mcts-100"`` with
    network set; a network from a path runs on device in dtype (`resolve_dtype`: None or auto is the
    device's default). Evaluation settings: search agents play their best move (no root noise)."""
    kind, sims, path = parse_spec(spec)
    name = agent_name(spec)
    n = sims or DEFAULT_SIMULATIONS
    if kind == "random":
        return RandomAgent()
    if kind == "greedy":
        return GreedyAgent()
    if kind in EXPERT_DEPTHS:
        expert = ExpertSettings(depth=EXPERT_DEPTHS[kind])
        return SearchAgent(SearchConfig(mode="expert", expert=expert), name=name)
    if kind in ("mcts", "mcts-greedy"):
        rollouts = Round0Settings(root_rollouts=1, rollout_policy="greedy" if kind == "mcts-greedy" else "random")
        return SearchAgent(SearchConfig(mode="round0", simulations=n, round0=rollouts), name=name)
    if kind not in TORCH_KINDS:  # a kind added to KINDS needs its branch above, or it would be a network search
        raise NotImplementedError(f"agent kind {kind!r} is in KINDS, but make_agent has no branch for it")
    source = path or network
    if source is None:
        raise ValueError(f"agent {spec!r} needs a checkpoint: {kind}@PATH, or a network")
    if kind in ("dqn", "td"):
        if not isinstance(source, (str, Path)):
            raise ValueError(f"agent {spec!r} needs its own checkpoint ({kind}@PATH), not a loaded network")
        from drmario.baselines import DQNAgent, TDAgent

        file = str(resolve_checkpoint(source))
        return DQNAgent.load(file, device=device) if kind == "dqn" else TDAgent.load(file)
    from drmario.learn.device import resolve_device, resolve_dtype
    from drmario.learn.player import Player, load_player

    if isinstance(source, Player):
        player = source
    else:
        player = load_player(resolve_checkpoint(source), resolve_device(device), resolve_dtype(dtype))
    if kind == "policy":
        return PolicyAgent(player, name=name)
    if kind not in ("net-mcts", "net-gumbel"):
        raise NotImplementedError(f"agent kind {kind!r} takes a network, but make_agent has no branch for it")
    cfg = SearchConfig(  # no noise: evaluation plays the best move
        mode="gumbel" if kind == "net-gumbel" else "puct",
        simulations=n,
        puct=PuctSettings(dirichlet_fraction=0.0),
        gumbel=GumbelSettings(noise=0.0),
    )
    return SearchAgent(cfg, player, name=name)


def make_agents(
    specs: Sequence[str], *, network: str | Path | Player | None = None, device: str = "cpu", dtype: str | None = None
) -> list[Agent]:
    """`make_agent` for each spec; the network (a checkpoint path) is loaded once for all of them."""
    if isinstance(network, (str, Path)) and any(parse_spec(s)[0] in NETWORK_KINDS for s in specs):
        from drmario.learn.device import resolve_device, resolve_dtype
        from drmario.learn.player import load_player

        network = load_player(resolve_checkpoint(network), resolve_device(device), resolve_dtype(dtype))
    return [make_agent(spec, network=network, device=device, dtype=dtype) for spec in specs]
