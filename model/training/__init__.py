"""Training the embedded Clover: the block-diffusion objective and loop, packed data, the copy
warm-up, growing a trained model deeper, and the tokenizer's training."""
