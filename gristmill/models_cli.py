"""`gristmill models [RECIPE] | add NAME FILE | fetch NAME...`: the model store's command (the store itself is
``gristmill.models``, which ops import; this module may import the recipe layer, ops must not)."""
from __future__ import annotations

import sys

from .models import (DEFAULT_BASE_URL, add, fetch, find, fix_command, listing, optional_models,
                     required_models, store_dir, unchecked)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def cmd_models(args) -> int:
    action = args.action or []
    if action and action[0] == "add":
        if len(action) != 3:
            print("usage: gristmill models add NAME FILE", file=sys.stderr)
            return 2
        try:
            p = add(action[1], action[2])
        except (ValueError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size
        print(f"added {action[1]} ({_size(size)}) to {store_dir()}")
        return 0
    if action and action[0] == "fetch":
        if len(action) < 2:
            print("usage: gristmill models fetch NAME... [--base-url URL]", file=sys.stderr)
            return 2
        status = 0
        for name in action[1:]:
            try:
                p = fetch(name, args.base_url)
            except ValueError as e:
                print(f"error: {e}", file=sys.stderr)
                status = 1
                continue
            print(f"fetched {p.name} ({_size(p.stat().st_size)}) into {p.parent}")
        return status
    if len(action) > 1:
        print("usage: gristmill models [RECIPE] | add NAME FILE | fetch NAME...", file=sys.stderr)
        return 2
    d = store_dir()
    have = listing()
    print(f"model store: {d}" + ("" if have else " (empty)"))
    for name, size in have:
        print(f"  {name:24} {_size(size):>10}")
    if not action:
        return 0
    from .recipe import RecipeError, all_ops, load_recipe
    try:
        with unchecked():
            recipe, ops, _ = load_recipe(action[0])
        ops = all_ops(recipe, ops)  # a sources: recipe's per-source chains too
    except (RecipeError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    need, opt = required_models(ops), optional_models(ops)
    print(f"{action[0]} needs: " + (", ".join(need) if need else "no models from the store"))
    missing = []
    for n in need:
        p = find(n)
        print(f"  {n:24} {'present: ' + str(p) if p else 'MISSING'}")
        if p is None:
            missing.append(n)
    for n in opt:
        p = find(n)
        print(f"  {n:24} {'present: ' + str(p) if p else 'absent (optional)'}")
    if missing:
        print("missing models; fix with:")
        for n in missing:
            print(f"  {fix_command(n).replace('` or `', '    # or: ').replace('` with DIR from `', '    # DIR from: ')}")
        return 1
    return 0


def add_models_command(sub) -> None:
    m = sub.add_parser("models", help="the model store: what recipes need, what is installed, add / fetch",
                       description="List the model store ($GRISTMILL_MODELS, default ~/.cache/gristmill/models); "
                                   "with RECIPE, what it needs (exit 1 if something is missing). "
                                   "`models add NAME FILE` copies a file in; `models fetch NAME...` downloads "
                                   "(only when asked) from --base-url / $GRISTMILL_MODELS_URL "
                                   f"(default {DEFAULT_BASE_URL}).")
    m.add_argument("action", nargs="*", metavar="RECIPE | add NAME FILE | fetch NAME...")
    m.add_argument("--base-url", default=None, help="where `fetch` downloads NAME from (BASE_URL/NAME)")
    m.set_defaults(fn=cmd_models)
