"""License policy: a permissive allowlist decides what may be published; detection from files."""

from __future__ import annotations

import re
from pathlib import Path

PERMISSIVE = frozenset(
    {
        "MIT",
        "MIT-0",
        "BSD-2-Clause",
        "BSD-3-Clause",
        "BSD-3-Clause-Clear",
        "Apache-2.0",
        "ISC",
        "Zlib",
        "Unlicense",
        "0BSD",
        "CC0-1.0",
        "PSF-2.0",
        "BSL-1.0",
        "NCSA",
        "UPL-1.0",
        "BSD-4-Clause-UC",
        "X11",
    }
)
LICENSE_FILES = (
    "LICENSE",
    "LICENSE.txt",
    "LICENSE.md",
    "LICENSE.rst",
    "LICENCE",
    "LICENCE.txt",
    "COPYING",
    "COPYING.txt",
    "LICENSE-APACHE",
    "LICENSE-MIT",
)
# (regex, spdx) in order of specificity; the earliest match in the text wins
_SIGNATURES = [
    (r"GNU AFFERO GENERAL PUBLIC LICENSE", "AGPL-3.0"),
    (r"GNU LESSER GENERAL PUBLIC LICENSE", "LGPL"),
    (r"GNU GENERAL PUBLIC LICENSE[\s\S]{0,200}?Version 3", "GPL-3.0"),
    (r"GNU GENERAL PUBLIC LICENSE[\s\S]{0,200}?Version 2", "GPL-2.0"),
    (r"Mozilla Public License,? (?:Version|v\.?) ?2\.0", "MPL-2.0"),
    (r"Apache License,?\s+Version 2\.0", "Apache-2.0"),
    (r"Permission is hereby granted, free of charge", "MIT"),
    (
        r"Redistribution and use in source and binary forms[\s\S]{0,2500}?(?:Neither the name|names of "
        r"its\s+contributors)",
        "BSD-3-Clause",
    ),
    (r"Redistribution and use in source and binary forms", "BSD-2-Clause"),
    (r"Permission to use, copy, modify, and(?:/or)? distribute this software for any", "ISC"),
    (r"This is free and unencumbered software released into the public domain", "Unlicense"),
    (r"Creative Commons Attribution-NonCommercial", "CC-BY-NC"),
    (r"Boost Software License", "BSL-1.0"),
]
_ALIASES = {
    "apache 2.0": "Apache-2.0",
    "apache-2": "Apache-2.0",
    "apache2": "Apache-2.0",
    "apache license 2.0": "Apache-2.0",
    "bsd": "BSD-3-Clause",
    "bsd-3": "BSD-3-Clause",
    "bsd 3-clause": "BSD-3-Clause",
    "bsd-2": "BSD-2-Clause",
    "mit license": "MIT",
}


def normalize(spdx: str | None) -> str | None:
    """Canonical SPDX id ('apache 2.0' -> 'Apache-2.0'); None / NOASSERTION stay unknown."""
    if not spdx:
        return None
    s = spdx.strip()
    if s.upper() in ("NOASSERTION", "NONE", "OTHER", "UNKNOWN"):
        return None
    for known in PERMISSIVE:
        if s.lower() == known.lower():
            return known
    return _ALIASES.get(s.lower(), s)


def permitted(spdx: str | None) -> bool:
    """True when the license is on the permissive allowlist (unknown licenses are not)."""
    return normalize(spdx) in PERMISSIVE


def detect_text(text: str) -> str | None:
    """SPDX id of the first license recognized in a license file's text."""
    best: tuple[int, str] | None = None
    head = text[:60_000]
    for rx, spdx in _SIGNATURES:
        m = re.search(rx, head, re.I)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), spdx)
    return best[1] if best else None


def detect_dir(root: Path) -> tuple[str | None, str | None]:
    """(SPDX id, license file name) found at the top of a checkout."""
    for name in LICENSE_FILES:
        p = root / name
        try:
            if p.is_file() and not p.is_symlink():
                spdx = detect_text(p.read_text(errors="replace"))
                if spdx:
                    return spdx, name
        except OSError:
            continue
    return None, None
