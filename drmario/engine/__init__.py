"""The engine: NES Dr. Mario rules, maryodel text formats, NES levels and pills, legal placements,
place-and-resolve, whole games and records. Torch-free; the hot paths are compiled (`kernels`)."""
