"""Baseline learners from the other design notes, on the same engine, for the arena.

- `dqn`: deep Q-learning with experience replay (note 003) over the 512 placement slots.
- `td`: a TD-Gammon-style value network over board features with a 2-ply expectimax search (note 004).

Both have a config dataclass, a trainer writing metrics.csv and resumable checkpoints into a run
directory, and an agent (the `drmario.play.agents.Agent` protocol) loadable from a checkpoint.
"""

from drmario.baselines.dqn import DQNAgent, DQNConfig, DQNResult, QNet, Replay, train_dqn
from drmario.baselines.td import TDAgent, TDConfig, TDResult, ValueNet, train_td

__all__ = [
    "DQNAgent",
    "DQNConfig",
    "DQNResult",
    "QNet",
    "Replay",
    "TDAgent",
    "TDConfig",
    "TDResult",
    "ValueNet",
    "train_dqn",
    "train_td",
]
