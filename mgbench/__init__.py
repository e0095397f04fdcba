"""mgbench's ground floor and its Inspect AI face.

store.py: the file formats every stage shares (the task manifest, the JSONL result stores), standard
library only; validation/, the generator, the scrapers and the dataset import it.

The rest is mgbench on Inspect AI: the `mgbench/mgbench` task (zero-shot, parallel sampling over epochs,
an agent with an evaluate tool), scored by `mgbench eval` in child processes. Needs the `inspect` extra
(pip install -e '.[inspect]'); docs/inspect.md. validation/ and the task modules never import those
modules, and importing this package alone imports nothing (from Inspect or anything else)."""
