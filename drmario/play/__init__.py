"""Playing: agents, the lockstep game driver, the arena, self-play, batched GPU inference and the
concurrent self-play/training loop."""
