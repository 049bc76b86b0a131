"""Block-diffusion decoding on top of the network: the decode loop (generate.py), verified rounds,
drafts from the context, the repetition stop, the decode width and likelihood scoring."""
