"""Validation: run tasks on N rank processes (gloo on CPU, NCCL on GPU) and check them.

Imports only torch and the standard library (the GPU machines lack datasets/libcst/PyGithub).
"""
