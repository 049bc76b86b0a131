"""Git on the host: Clover's own git through libgit2 (runs no program), and the hardened git
program where the evals still need it."""
