"""Undo and redo of exactly what the agent changed: the work-tree scans and checkpoints, the plan,
writing a state back, git refs and reflogs as undo sees them, and the user-facing report."""
