"""The model store: names → local files; never downloads implicitly (work in progress)."""
from __future__ import annotations


def add_models_command(sub) -> None:
    m = sub.add_parser("models", help="the model store: what recipes need, what is installed, add / fetch")
    m.set_defaults(fn=lambda a: 2)
