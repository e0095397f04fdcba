"""Harness synthesis for mined candidates (issue 7): inputs, process groups and stubs found by an
error-driven search in sandboxed child processes; accepted harnesses become level-4 task modules."""
