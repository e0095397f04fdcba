"""The room that makes a standalone module of a candidate: torch and the standard library only.

checkout.py (the selected candidates and their checkouts' files), inline.py and splice.py (repository
helpers copied in with their line spans), standins.py (imports a task cannot have, one table),
annotations.py and reserved.py (annotations quoted, contract names renamed), specs.py and specedit.py
(the harness spec: the inputs the runtime draws), render.py (the task module), runtime_parts.py and
runtime/ (the task-side text every level-4 task carries, byte for byte). Imports no other room."""
