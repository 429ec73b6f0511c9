"""One run's figures, read from its output: per-rank speed, GPU use, scaling, and the stack and settings it ran with."""
