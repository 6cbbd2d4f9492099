#!/bin/sh
# The man page's JSON examples must keep their quotes once rendered: in roff a '"' inside a
# macro argument starts or ends a quoted argument and is not printed, so the source writes \(dq.
# Rendered plain (no overstrike), on long lines, runs of spaces from justification squeezed.
page="$1"
out=$(groff -man -Tutf8 -P-cbou -rLL=250n "$page" | tr -s ' ') || exit 1
for s in '{"tokens_per_rank": 4096, "topk": 8, "counts": [c0, c1, ...]}' \
         '"layers": [[...], [...]]' \
         '{"placement": [r0, r1, ...]}'; do
  printf '%s\n' "$out" | grep -qF -- "$s" || { echo "the rendered man page lacks: $s"; exit 1; }
done
