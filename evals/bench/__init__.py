"""`clover bench`: block diffusion vs autoregressive decoding inside the real agent, on SynthFix held-out.

run.py is the engine (the instances, the schedule, the workers), task.py one task (work tree, agent,
grading), config.py the options, stats.py the per-task counters and the report.
Lives under evals/ (not benchmarks/) because the product command uses it."""
