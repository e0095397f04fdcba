"""mgbench on Inspect AI: the `mgbench/mgbench` task (zero-shot, parallel sampling over epochs, an
agent with an evaluate tool), scored by `mgbench eval` in child processes. Needs the `inspect` extra
(pip install -e '.[inspect]'); docs/inspect.md. Nothing here is imported by validation/ or by the
task modules, and importing this package alone imports nothing from Inspect."""
