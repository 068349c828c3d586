"""`gristmill models [RECIPE] | add NAME FILE | fetch NAME...`: the model store's command (the store itself is
``gristmill.models``, which ops import; this module may import the recipe layer, ops must not)."""
from __future__ import annotations

import os
import sys

from .models import (DEFAULT_BASE_URL, add, fetch, find, fix_command, kind, listing, optional_models,
                     required_models, store_dir, unchecked)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


KENLM_MAGIC = b"mmap lm http://kheafield.com/code"
FASTTEXT_MAGIC = 793712314  # int32 little-endian, then the version (11 or 12)
_DEEP_LIMIT = 256 << 20  # files up to this size are also loaded by their library (when it is installed)


def check_model_file(name: str, path: str) -> None:
    """ValueError, one line, when ``path`` is not the kind of model ``name`` says (a KenLM binary or text
    ARPA, a SentencePiece model, a fastText model): a download's HTML error page, a truncated file or the
    wrong file is refused here, before it is copied into the store, not when a run loads it."""
    import os
    what = name.rsplit("/", 1)[-1]
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror}") from None
    bad = f"{path} is not a valid {_kind_of(name)}"
    if not head:
        raise ValueError(f"{bad}: the file is empty")
    if what.endswith((".arpa", ".arpa.bin")):
        if head.startswith(KENLM_MAGIC):
            _deep(name, path, size, "kenlm", lambda m: m.Model(path, _quiet_kenlm(m)), bad)
            return
        text = head.lstrip().decode("utf-8", "replace")
        if not text.startswith("\\data\\") or "ngram 1=" not in text:
            raise ValueError(f"{bad}: it is neither a KenLM binary nor an ARPA text file (which starts with "
                             f"\\data\\ and its ngram counts)")
        with open(path, "rb") as f:
            f.seek(max(0, size - 4096))
            tail = f.read().rstrip()
        if not tail.endswith(b"\\end\\"):
            raise ValueError(f"{bad}: the ARPA text does not end with \\end\\ (truncated?)")
        _deep(name, path, size * 4, "kenlm", lambda m: m.Model(path, _quiet_kenlm(m)), bad)  # text parses slowly
    elif what.endswith(".sp.model"):
        if head[:1] != b"\x0a":  # a ModelProto starts with its pieces (field 1)
            raise ValueError(f"{bad}: it does not start like a SentencePiece model")
        _deep(name, path, size, "sentencepiece", lambda m: m.SentencePieceProcessor(model_file=path), bad)
    elif (what.endswith(".bin") and what.startswith("lid.")) or what.endswith((".fasttext.bin", ".ftz")):
        import struct
        magic, version = struct.unpack("<ii", head[:8]) if len(head) >= 8 else (0, 0)
        if magic != FASTTEXT_MAGIC:
            raise ValueError(f"{bad}: it has no fastText header")
        if version not in (11, 12):
            raise ValueError(f"{bad}: fastText file version {version}, not 11 or 12")


def _quiet_kenlm(kenlm):
    """A KenLM config that loads without its progress bar and its "build a binary" advice on stderr."""
    c = kenlm.Config()
    c.show_progress = False
    c.arpa_complain = kenlm.ARPALoadComplain.NONE
    return c


def _kind_of(name: str) -> str:
    from .models import kind
    return (kind(name.rsplit("/", 1)[-1]) or "model").split(" (")[0]


def _deep(name: str, path: str, size: int, module: str, load, bad: str) -> None:
    """Load a small enough file with its library, when installed: ValueError when it does not parse."""
    if size > _DEEP_LIMIT:
        return
    try:
        mod = __import__(module)
    except ImportError:
        return
    try:
        load(mod)
    except Exception as e:  # noqa: BLE001 - each library raises its own kinds (OSError, RuntimeError...)
        msg = " ".join(str(e).split())[:200]
        raise ValueError(f"{bad}: {module} cannot load it ({msg or type(e).__name__})") from None


def cmd_models(args) -> int:
    action = args.action or []
    if action and action[0] == "add":
        if len(action) != 3:
            print("usage: gristmill models add NAME FILE", file=sys.stderr)
            return 2
        try:
            if kind(action[1]) is not None and os.path.isfile(action[2]):
                check_model_file(action[1], action[2])  # before anything is copied
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
            try:
                if p.is_file():
                    check_model_file(name, str(p))
            except ValueError as e:  # an error page saved under the model's name: not left in the store
                p.unlink(missing_ok=True)
                print(f"error: fetched {name} from {args.base_url or 'the model host'}, but {e}; removed it",
                      file=sys.stderr)
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
