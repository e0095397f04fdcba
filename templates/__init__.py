"""Jinja2 templates that render task modules (families/) and solver prompts."""

from pathlib import Path

TEMPLATES_DIR = Path(__file__).resolve().parent
