"""`clover bench`: block diffusion vs autoregressive decoding inside the real agent, on SynthFix held-out.

run.py is the engine (work trees, grading, the schedule), stats.py the per-task counters and the report.
Lives under evals/ (not benchmarks/) because the product command uses it."""
