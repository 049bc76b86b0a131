"""Triton kernels for Clover. Each op matches its torch reference in kernels/reference/ (tests compare
them under TRITON_INTERPRET=1 on CPU and natively on CUDA); kernels/dispatch.py picks one."""
