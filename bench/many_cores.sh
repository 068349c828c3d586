#!/usr/bin/env bash
# Issue 25's many-core figures in one call, for a machine with many cores (e.g. the `device` tool's 16):
# the machine's own ceiling, then the filter recipe and MinHash at each np with the by-hand raw limit,
# then the filter recipe with the default shard plan against 2 MB shards.
#
# usage: bench/many_cores.sh CORPUS.jsonl [NP...]      (default NP: 1 2 4 8 16)
#   CORPUS: real text as JSONL (e.g. ../shared/bench/make-corpus.sh OUT small, then OUT/corpus.jsonl);
#   it is cut into 16 equal files, as in the issue's measurements. Needs gristmill installed (pip install -e .).
set -euo pipefail
corpus=${1:?usage: bench/many_cores.sh CORPUS.jsonl [NP...]}
shift
nps=${*:-1 2 4 8 16}
cd "$(dirname "$0")/.."
echo "== $(nproc) cores, $(python -V), $(git rev-parse --short HEAD 2>/dev/null || echo 'no git')"
python -m compileall -q gristmill bench
python -m gristmill.cli warm-up >/dev/null  # kernels compiled before anything is timed
echo "== machine ceiling (no coordination at all), $(nproc) processes"
python bench/machine_ceiling.py "$corpus" --n "$(nproc)"
echo "== filters and MinHash at np $nps"
# shellcheck disable=SC2086
python bench/scaling.py "$corpus" --shards 16 --np $nps --repeat 2 --warmup --by-hand
echo "== filters with the default shards and with 2 MB shards (a finer plan: tasks of equal bytes differ in cost)"
# shellcheck disable=SC2086
python bench/scaling.py "$corpus" --shards 16 --np $nps --repeat 2 --warmup --only filters --shard-size-mb default 2
