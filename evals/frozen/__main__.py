"""`python -m clover.evals.frozen`: the frozen set's size and hash (MODEL_CARD.md states it)."""

from clover.evals.frozen import instance_files, set_hash

print(f"{len(instance_files())} instances, sha256 {set_hash()}")
