"""Replay of measured candidate spaces (Kernel Tuner's simulation mode, for KernelKB).

A task's whole space is measured once on the GPU (benchmarks/measure_space.py); the
optimizer's choices are then scored against those measurements instead of a GPU, so the
transfer benchmark (benchmarks/transfer.py) can repeat runs at no GPU cost.
"""
