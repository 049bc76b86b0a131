"""Checkpoints in and out: safetensors shards, quantized formats and quantize-on-load, CPU linear
kernels' set-up, and placement of one model over several devices."""
