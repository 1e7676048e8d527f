#!/usr/bin/env bash
# The widths of the engine's offload interfaces at a commit, from git alone (no build):
# virtual methods per class or struct in offload/*.h (how many are pure), the data members
# of the GPU-stream executor's files, and the lines of each file of the stream device,
# pipeline, executors and speculation, and the modules and lines of python/tandem.
# docs/architecture.md cites it.
#   scripts/interface-widths.sh [COMMIT]     (default HEAD; run from the repository root)
set -euo pipefail
c=${1:-HEAD}
echo "== $c: virtual methods per interface (pure)"
for f in $(git ls-tree -r --name-only "$c" offload | grep '\.h$'); do
  git show "$c:$f" | F=$f perl -0777 -ne 's/=\s*\{\}/= ()/g;
    while (/^(?:class|struct) (\w+)[^;{]*\{(.*?)^\};/msg) {
      my ($n, $b) = ($1, $2); my @v = grep { !/~/ } ($b =~ /\bvirtual\b[^;{]*[;{]/g);
      next unless @v; my $p = grep { /=\s*0\s*;$/ } @v;
      printf "  %-42s %-18s %2d (%d pure)\n", $ENV{F}, $n, scalar @v, $p }'
done
echo "== $c: data members (names ending in _) of the GPU-stream executor's files"
for f in $(git ls-tree -r --name-only "$c" offload/executors | grep -E 'gpu_stream\.(h|cc)$|stream_.*\.h$'); do
  printf "  %-42s %d\n" "$f" "$(git show "$c:$f" | grep -v '^ *//' | grep -oE '\b[a-z][a-z0-9_]*_\b' | sort -u | wc -l)"
done
echo "== $c: lines per file"
git ls-tree -r --name-only "$c" offload/devices offload/transport offload/pipeline offload/executors \
    offload/speculation | while read -r f; do printf "  %5d %s\n" "$(git show "$c:$f" | wc -l)" "$f"; done
echo "== $c: python/tandem modules, lines"
py=$(git ls-tree -r --name-only "$c" python/tandem | grep '\.py$')
printf "  %d modules, %d lines\n" "$(echo "$py" | wc -l)" "$(for f in $py; do git show "$c:$f"; done | wc -l)"
