"""mgbench on Inspect AI: the `mgbench/mgbench` task (zero-shot, parallel sampling over epochs, an agent
with an evaluate tool), scored by `mgbench eval` in child processes; the offline scripted model provider
`mgbench_scripted/...`. Needs the `inspect` extra (pip install -e '.[inspect]'); docs/inspect.md.
validation/ and the task modules never import this package, and importing it alone imports nothing."""
