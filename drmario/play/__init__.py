"""Playing: agents, the lockstep game driver, the arena, self-play and batched GPU inference."""
