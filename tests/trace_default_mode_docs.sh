#!/bin/sh
# README, man page and --help must agree on trace's default --mode (issue 16: the README said
# "sync mode" where --help and the code run every mode).
bin="$1"
readme="$2"
page="$3"
default=$("$bin" trace --help | sed -n 's/.*--mode [A-Z]*=\([a-z,-]*\).*/\1/p')
[ -n "$default" ] || { echo "commtool trace --help names no default for --mode"; exit 1; }
case $default in
  all) want="every mode" ;;
  *) want="$default mode" ;;
esac
line=$(grep -E '^ +commtool trace allreduce +#' "$readme")
[ -n "$line" ] || { echo "README lacks the bare 'commtool trace allreduce  # ...' example"; exit 1; }
printf '%s\n' "$line" | grep -qF -- "$want" ||
  { echo "README's default trace example does not say '$want' (--help: --mode=$default): $line"; exit 1; }
# The man page marks the default after the value it belongs to: ".B all" then "(default)."
awk -v d="$default" 'prev == ".B " d && /^\(default\)/ { found = 1 } { prev = $0 } END { exit !found }' \
  "$page" || { echo "the man page does not mark $default as --mode's default"; exit 1; }
