#!/usr/bin/env bash
# Audits commtool as an attacker and a careless user would: hostile option values, hostile
# files, hostile output paths, signals and races: about 2,100 tries. Needs no GPU and no
# network; about 4 minutes on 2 cores. A binary rebuilt meanwhile is waited for, its try rerun.
#
#   scripts/audit.sh [COMMTOOL] [WORKDIR]
#
# COMMTOOL: the binary (default build/cli/commtool of this checkout). WORKDIR: where every try
# runs, each in a fresh directory of its own (default a fresh mktemp -d, removed at the end
# unless AUDIT_KEEP=1; a WORKDIR you name must be new or empty and is kept). Nothing outside
# WORKDIR is written, apart from a copy of the findings log made with mktemp when WORKDIR goes.
#
# Classes of tries, one function each:
#   options  every option of every subcommand (read from its --help) given hostile values: empty,
#            100 kB, control characters, negative, zero, huge, nan, inf, trailing garbage, unicode
#   files    every option or argument that reads a file given a FIFO, a device, a directory, a
#            mode-000 file, a symlink loop, an empty, truncated, deeply nested, huge or binary
#            file, a 300-byte name; the same planted inside a sysfs tree, a saved run, a recording
#   outputs  --output --trace --plot --heatmap --save and record --save at a directory, a missing
#            directory, a long name, /dev/full, another output or an input of the same command,
#            a symlink another user planted in a sticky world-writable directory; signals while
#            an output is written
#   record   record's job: SIGTERM, SIGHUP, SIGINT, SIGUSR1 from another process, ten records
#            started together in one directory, five into one --save
#   report   report of mutated recordings and saved runs (rank >= nranks, negative and u64-max
#            times, truncated and duplicated lines, control characters, long strings)
#
# Every invocation runs under timeout (AUDIT_TIMEOUT, 30 s) and ulimit -v (AUDIT_MEM_KB, 4 GiB),
# with stdin from /dev/null and TMPDIR a fresh directory. A try is ok (exit 0, 2, 3, 4, 5, or
# what that try documents), or one or more findings:
#   crash     exit 1, an undocumented status, death by a signal the test did not send, bad_alloc
#   hang      the timeout expired (FIFO tries: 5 s)
#   leftover  a .commtool-* file, a file a failed run left, a file in TMPDIR, a process
#   format    a raw control character (C0 but \n and \t) on stdout or stderr, or more than 80
#             bytes of one value quoted on stderr (a run of 200 non-blanks, or an injected value)
#   wrong     a write through a planted symlink, an input or another output overwritten, a failed
#             write reported as success, a signal not passed to the job, two jobs in one
#             directory
# Notes (not failures): garbage accepted, what cannot be checked as root, behaviour to look at.
# Findings and notes go to WORKDIR/findings.log, one entry per try with its command and the
# first lines of stderr, then the distinct findings grouped; every try (class, exit, ms,
# findings, command) to WORKDIR/tries.tsv. Prints one table and the distinct findings; exits 0
# when there are no findings, 1 when there are, 2 on bad usage.
#   AUDIT_CLASSES="options record" scripts/audit.sh    only these classes
#   AUDIT_KEEP=1 AUDIT_TIMEOUT=30 AUDIT_MEM_KB=4194304 AUDIT_BINARY_WAIT=900 (s for a rebuild)
set -u
shopt -s nullglob
export LC_ALL=C

usage() {
  sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
}
die() {
  printf 'audit.sh: %s\n' "$*" >&2
  exit 2
}

case ${1:-} in -h | --help) usage; exit 0 ;; esac
(($# <= 2)) || die "usage: scripts/audit.sh [COMMTOOL] [WORKDIR]"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) || die "cannot find the checkout"
COMMTOOL=${1:-$root/build/cli/commtool}
[[ $COMMTOOL == /* ]] || COMMTOOL=$PWD/$COMMTOOL
[[ -f $COMMTOOL && -x $COMMTOOL ]] || die "$COMMTOOL: no such executable (build it first)"
[[ -d $root/tests/fixtures ]] || die "$root/tests/fixtures: missing (run from a checkout)"
TMO=${AUDIT_TIMEOUT:-30}
MEM_KB=${AUDIT_MEM_KB:-4194304}
KEEP=${AUDIT_KEEP:-0}
CLASSES=${AUDIT_CLASSES:-options files outputs record report}
[[ $TMO =~ ^[1-9][0-9]*$ ]] || die "AUDIT_TIMEOUT must be whole seconds, got '$TMO'"
[[ $MEM_KB =~ ^[1-9][0-9]*$ ]] || die "AUDIT_MEM_KB must be KiB, got '$MEM_KB'"
for tool in timeout pgrep mkfifo truncate awk find cmp; do
  command -v "$tool" >/dev/null || die "needs $tool"
done

own_w=1
if (($# == 2)); then
  own_w=0
  W=$2
  if [[ -e $W ]]; then
    [[ -d $W && -z $(ls -A "$W") ]] || die "WORKDIR $W must be new or empty"
  else
    mkdir -p "$W" || die "cannot create WORKDIR $W"
  fi
  W=$(cd "$W" && pwd) || die "cannot enter $W"
else
  W=$(mktemp -d -t commtool-audit.XXXXXX) || die "mktemp -d failed"
fi
LOG=$W/findings.log
GROUPS_TSV=$W/groups.tsv
TRIES_TSV=$W/tries.tsv
mkdir -p "$W/t" "$W/o" "$W/tmp" "$W/in" || die "cannot populate $W"
: >"$LOG"
: >"$GROUPS_TSV"
printf 'id\tclass\texit\tms\tfindings\tlabel\tvalue\tcommand\n' >"$TRIES_TSV"

# ---------------------------------------------------------------------------------------------
# Bookkeeping. C[class,field] counts; TS_*[id] describe one try.
declare -A C=() TS_class=() TS_label=() TS_tag=() TS_cmd=() TS_dir=() TS_ok=() TS_t0=()
declare -A TS_pid=() TS_rc=() TS_ms=() TS_tmo=() TS_dirs=() TS_long=() TS_own=() TS_flag=()
declare -A RUNNING=() HELPERS=() TS_jobout=() TS_procs_ok=() TS_args=() TS_env=()
n_try=0
TRY=0
REBUILT=0
PLUGIN_ENV=()
NAME300=$(printf '%300s' '' | tr ' ' n)
N81=${NAME300:0:81}
is_root=0
((EUID == 0)) && is_root=1

count() { C[$1,$2]=$((${C[$1,$2]:-0} + 1)); }

# Per-try settings, reset after each try_start.
T_reset() {
  T_cwd='' T_ok='0 2 3 4 5' T_tmo=$TMO T_long='' T_tag='' T_dirs=() T_env=() T_jobout=0
  T_procs_ok=0
}
T_reset

# One argument as the log shows it, into SHOWN: shell-quoted, long ones cut in the middle.
show_arg() {
  local a=$1
  if ((${#a} > 72)); then a="${a:0:32}...(${#a} bytes)...${a: -16}"; fi
  printf -v SHOWN '%q' "$a"
}
show_cmd() {
  local out=commtool a
  for a in "$@"; do
    show_arg "$a"
    out+=" $SHOWN"
  done
  SHOWN=$out
}

# Whatever MPI launcher or commtool setting the caller's environment has stays out of the tries.
clean_vars=(OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE PMI_RANK PMI_SIZE PMIX_RANK SLURM_PROCID
  SLURM_STEP_NUM_TASKS COMMTOOL_RECORD_DIR NCCL_PROFILER_PLUGIN CUDA_INJECTION64_PATH LD_PRELOAD
  COMMTOOL_PROFILER_OUT)
clean_env=()
for v in "${clean_vars[@]}"; do clean_env+=(-u "$v"); done

# try_start CLASS LABEL ARGS...: starts commtool ARGS in the background, under timeout and the
# memory limit, in T_cwd or a fresh directory. LABEL names what is tried ("probe --size"),
# T_tag the hostile value. Sets TRY to the try's id.
try_start() {
  local class=$1 label=$2
  shift 2
  local id=$((++n_try))
  local dir=${T_cwd:-$W/t/$id} tmp=$W/tmp/$id
  mkdir -p "$dir" "$tmp"
  TS_class[$id]=$class TS_label[$id]=$label TS_tag[$id]=$T_tag TS_ok[$id]=$T_ok
  TS_dir[$id]=$dir TS_tmo[$id]=$T_tmo TS_long[$id]=$T_long TS_own[$id]=${T_cwd:+shared}
  TS_jobout[$id]=$T_jobout TS_procs_ok[$id]=$T_procs_ok
  show_cmd "$@"
  TS_cmd[$id]=$SHOWN
  if ((${#T_env[@]})); then TS_cmd[$id]="${T_env[*]@Q} ${TS_cmd[$id]}"; fi
  local dl
  printf -v dl '%s\n' "${T_dirs[@]}"
  TS_dirs[$id]=$dl
  # Kept until the try ends, to start it again if the binary was being rebuilt.
  local q='' e=''
  (($#)) && printf -v q '%q ' "$@"
  local -a envs=("${PLUGIN_ENV[@]}" "${T_env[@]}")
  ((${#envs[@]})) && printf -v e '%q ' "${envs[@]}"
  TS_args[$id]=$q TS_env[$id]=$e
  wait_for_binary
  launch "$id"
  TRY=$id
  T_reset
}

# Starts try ID in the background, under timeout and the memory limit.
launch() {
  local id=$1
  local -a args env
  eval "args=(${TS_args[$id]})"
  eval "env=(${TS_env[$id]})"
  TS_t0[$id]=${EPOCHREALTIME/./}
  (
    cd "${TS_dir[$id]}" || exit 97
    ulimit -v "$MEM_KB" || exit 98
    unset "${clean_vars[@]}"
    export TMPDIR=$W/tmp/$id
    local e
    for e in "${env[@]}"; do export "${e?}"; done
    exec timeout -k 5 "${TS_tmo[$id]}" "$COMMTOOL" "${args[@]}"
  ) </dev/null >"$W/o/$id.out" 2>"$W/o/$id.err" &
  TS_pid[$id]=$!
  RUNNING[$!]=1
}

# The binary may be rebuilt while the audit runs: wait (up to AUDIT_BINARY_WAIT s, 900) until it
# is there and executable again.
wait_for_binary() {
  local i
  for ((i = 0; i < ${AUDIT_BINARY_WAIT:-900}; i++)); do
    [[ -f $COMMTOOL && -x $COMMTOOL ]] && return 0
    ((i == 0)) && printf 'audit.sh: %s is missing (being rebuilt?); waiting\n' "$COMMTOOL" >&2
    sleep 1
  done
  die "$COMMTOOL did not come back"
}

# The commtool process of a running try (timeout's child), waiting up to 5 s for it to start;
# fails when the try has already ended.
try_child() {
  local id=$1 i c st pid=${TS_pid[$1]}
  for ((i = 0; i < 100; i++)); do
    c=$(pgrep -P "$pid" | head -1)
    [[ -n $c ]] && { printf '%s' "$c"; return 0; }
    st=Z
    { read -r _ _ st _ <"/proc/$pid/stat"; } 2>/dev/null
    [[ $st == Z ]] && return 1
    sleep 0.05
  done
  return 1
}

# finding ID KIND WHAT: one finding (KIND crash hang leftover format wrong, or note) of try ID.
finding() {
  local id=$1 kind=$2 what=$3
  local class=${TS_class[$id]}
  if [[ $kind == note ]]; then
    count "$class" note
  elif [[ -z ${TS_flag[$id,$kind]:-} ]]; then
    TS_flag[$id,$kind]=1
    count "$class" "$kind"
  fi
  [[ $kind == note ]] || TS_flag[$id,bad]=1
  {
    printf '[%s] %s #%s %s%s: %s\n' "$kind" "$class" "$id" "${TS_label[$id]}" \
      "${TS_tag[$id]:+ <${TS_tag[$id]}>}" "$what"
    printf '  exit %s after %s ms: %s\n' "${TS_rc[$id]:-?}" "${TS_ms[$id]:-?}" "${TS_cmd[$id]}"
    if [[ -s $W/o/$id.err ]]; then
      head -n 4 "$W/o/$id.err" | cut -c1-240 | cat -v | sed 's/^/    | /'
    fi
  } >>"$LOG"
  # The group of a finding: its kind, class, what was tried and why, without the value.
  printf '%s\t%s\t%s\t%s\t%s\n' "$kind" "$class" "${TS_label[$id]}" "${what%%:*}" \
    "${TS_tag[$id]:--}" >>"$GROUPS_TSV"
}

# Reads FILE into TEXT with builtins: TEXT_ALL=1 when it was read whole (under 64 KiB), and then
# TEXT_NUL=1 when it held a NUL byte (which bash drops).
read_text() {
  local f=$1 rest
  TEXT='' TEXT_NUL=0 TEXT_ALL=0
  IFS= read -r -d '' -N 65536 TEXT <"$f"
  ((${#TEXT} < 65536)) || return 0
  TEXT_ALL=1
  IFS= read -r -d '' rest <"$f" && TEXT_NUL=1
  return 0
}

CTRL_RE=$'[\x01-\x08\x0b-\x1f]'
ABORT_WORDS=('bad_alloc' 'terminate called' 'Segmentation fault' 'AddressSanitizer'
  'runtime error:')

# Format findings of one output stream (out or err) of try ID.
check_stream() {
  local id=$1 which=$2 f=$W/o/$1.$2
  [[ -s $f ]] || return 0
  read_text "$f"
  local ctrl=0 esc=0
  if ((TEXT_ALL)); then
    ((TEXT_NUL)) && ctrl=1
    [[ $TEXT =~ $CTRL_RE ]] && ctrl=1
    [[ $TEXT == *$'\e'* ]] && esc=1
  elif grep -qaP '[\x00-\x08\x0b-\x1f]' "$f"; then
    ctrl=1
    grep -qaP '\x1b' "$f" && esc=1
  fi
  if ((esc)); then
    finding "$id" format "raw ESC character on std$which"
  elif ((ctrl)); then
    finding "$id" format "raw control character on std$which"
  fi
  [[ $which == err ]] || return 0
  local w
  ((TS_jobout[$id])) && return 0 # the job's own words, not commtool's
  for w in "${ABORT_WORDS[@]}"; do
    if [[ $TEXT == *"$w"* ]]; then
      ABORT_WORD=$w
      break
    fi
  done
  if [[ $TEXT =~ [^[:space:]]{201} ]] || { ((!TEXT_ALL)) && grep -qaE '[^[:space:]]{201}' "$f"; }
  then
    finding "$id" format "long value echoed: a run of over 200 non-blank bytes on stderr"
  elif [[ -n ${TS_long[$id]} && $TEXT == *"${TS_long[$id]}"* ]]; then
    finding "$id" format "long value echoed: over 80 bytes of the value on stderr"
  fi
}

# try_finish ID: waits for the try and classifies it.
try_finish() {
  local id=$1 rc tries
  for ((tries = 0; ; tries++)); do
    wait "${TS_pid[$id]}"
    rc=$?
    unset "RUNNING[${TS_pid[$id]}]"
    # timeout could not run commtool (a rebuild replacing it): the same try again.
    if ((rc != 126 && rc != 127 || tries >= 3)); then break; fi
    TEXT=''
    IFS= read -r -N 40 TEXT <"$W/o/$id.err"
    [[ $TEXT == 'timeout: failed to run command'* ]] || break
    REBUILT=$((REBUILT + 1))
    sleep 2
    wait_for_binary
    launch "$id"
  done
  unset "TS_args[$id]" "TS_env[$id]"
  local t1=${EPOCHREALTIME/./}
  local ms=$(((t1 - TS_t0[$id]) / 1000))
  TS_rc[$id]=$rc TS_ms[$id]=$ms
  local class=${TS_class[$id]}
  count "$class" tried
  case $rc in
    0 | 2 | 3 | 4 | 5) count "$class" "e$rc" ;;
    *) count "$class" eother ;;
  esac
  ABORT_WORD=''
  check_stream "$id" out
  check_stream "$id" err
  if ((rc == 124 || (rc == 137 && ms >= TS_tmo[$id] * 1000))); then
    finding "$id" hang "no end within ${TS_tmo[$id]} s: timed out"
  elif [[ " ${TS_ok[$id]} " != *" $rc "* ]]; then
    local why="exit $rc"
    ((rc > 128 && rc < 160)) && why="killed by signal $((rc - 128))"
    ((rc == 97 || rc == 98)) && why="exit $rc: the harness could not cd or set ulimit"
    [[ -n $ABORT_WORD ]] && why+=" ($ABORT_WORD)"
    finding "$id" crash "$why: not a documented status"
  elif [[ -n $ABORT_WORD ]]; then
    finding "$id" crash "stderr says '$ABORT_WORD': out of memory or an abort"
  fi
  # Leftovers: temporary files of commtool, its TMPDIR, processes of its process group.
  local d
  local -a left=()
  while IFS= read -r d; do
    [[ -n $d && -d $d ]] || continue
    left+=("$d"/.commtool-* "$d"/*/.commtool-* "$d"/*/*/.commtool-*)
  done <<<"${TS_dir[$id]}"$'\n'"${TS_dirs[$id]}"
  ((${#left[@]} == 0)) || finding "$id" leftover "temporary file left: ${left[*]:0:3}"
  left=("$W/tmp/$id"/* "$W/tmp/$id"/.[!.]*)
  # Open MPI's singleton session directory (ompi.*) is removed by its own daemon a moment after
  # the process ends: give it up to 5 s before calling it left.
  local waited=0
  while ((${#left[@]} > 0 && waited < 50)) && [[ ${left[*]} == *"/ompi."* ]]; do
    sleep 0.1
    waited=$((waited + 1))
    left=("$W/tmp/$id"/* "$W/tmp/$id"/.[!.]*)
  done
  ((${#left[@]} == 0)) || finding "$id" leftover "left in TMPDIR: ${left[*]:0:3}"
  if ((!TS_procs_ok[$id])) && kill -0 -- "-${TS_pid[$id]}" 2>/dev/null; then
    local procs
    procs=$(pgrep -g "${TS_pid[$id]}" | head -3 | xargs -r ps -o pid=,args= -p |
      tr -s ' \n' '  ')
    finding "$id" leftover "process left in its process group: $procs"
    kill -KILL -- "-${TS_pid[$id]}" 2>/dev/null
  fi
  return 0
}

# try_done ID: forgets the try's files unless it had a finding or AUDIT_KEEP=1.
try_done() {
  local id=$1 k kinds=''
  for k in crash hang leftover format wrong; do [[ -n ${TS_flag[$id,$k]:-} ]] && kinds+=$k,; done
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "${TS_class[$id]}" "${TS_rc[$id]}" \
    "${TS_ms[$id]}" "${kinds%,}" "${TS_label[$id]}" "${TS_tag[$id]}" "${TS_cmd[$id]}" \
    >>"$TRIES_TSV"
  [[ -z ${TS_flag[$id,bad]:-} && $KEEP != 1 ]] || return 0
  local -a gone=("$W/o/$id.out" "$W/o/$id.err" "$W/tmp/$id")
  [[ -z ${TS_own[$id]} ]] && gone+=("${TS_dir[$id]}")
  rm -rf "${gone[@]}" 2>/dev/null || { chmod -R u+rwX "${gone[@]}"; rm -rf "${gone[@]}"; }
}

# try CLASS LABEL ARGS...: one try, start to finish.
try() {
  try_start "$@"
  try_finish "$TRY"
  try_done "$TRY"
}

cleanup() {
  local p
  for p in "${!RUNNING[@]}"; do
    kill -KILL -- "-$p" 2>/dev/null
    kill -KILL "$p" 2>/dev/null
  done
  for p in "${!HELPERS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  kill_job_strays
  wait 2>/dev/null
  if ((own_w)) && [[ $KEEP != 1 ]]; then
    chmod -R u+rwX "$W" 2>/dev/null
    rm -rf "$W"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# Processes of record's jobs that are still alive anywhere (found by the COMMTOOL_RECORD_DIR
# record gave them, which points into WORKDIR): pid and command line each.
job_strays() {
  local f p
  for f in /proc/[0-9]*/environ; do
    p=${f#/proc/}
    p=${p%/environ}
    if grep -qzsF "COMMTOOL_RECORD_DIR=$W/" "$f" 2>/dev/null; then
      printf '%s %s\n' "$p" "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
    fi
  done
}
kill_job_strays() {
  local p rest
  while read -r p rest; do
    [[ -n $p ]] && kill -KILL "$p" 2>/dev/null
  done < <(job_strays)
}

# ---------------------------------------------------------------------------------------------
# Hostile values. VALS[i] is tagged TAGS[i].
A100K=$(printf '%102400s' '' | tr ' ' A)
A81=${A100K:0:81}
TAGS=(empty 100k esc newline cr-bs c0 neg zero u64+1 1e400 i32+1 nan inf 8x '1,,2' 'sync,,'
  unicode bad-utf8 fmt)
VALS=('' "$A100K" $'\e[31mred\e[0m' $'8\n9' $'8\r\b9' $'\x01\x02\x7f' -1 0
  18446744073709551616 1e400 2147483648 nan inf 8x '1,,2' 'sync,,'
  $'\xef\xbc\x98\xe2\x80\xae1' $'\xff\xfe8' '{}%s%n{:>99999999}')
# Values no option should accept (others, such as 0 or -1, are valid for some).
GARBAGE=' empty 100k esc newline cr-bs c0 u64+1 1e400 nan 8x 1,,2 sync,, unicode bad-utf8 fmt '

# The arguments an option is tried in, for SUB (the subcommand words) and OPT: PRE before the
# option, POST after its value.
opt_context() {
  local sub=$1 opt=$2
  F=$W/fix
  PRE=() POST=()
  case "$sub" in
    topo)
      PRE=(topo --sysfs-root "$F/sysfs/h200_vm")
      [[ $opt == --sysfs-root || $opt == --nccl-xml ]] && PRE=(topo)
      ;;
    probe) PRE=(probe) ;;
    trace)
      PRE=(trace allreduce)
      case $opt in
        --root) PRE=(trace broadcast) ;;
        --scope-samples | --scope-sleep-ms) PRE=(trace allreduce --stream-scope) ;;
        --batches | --poll-ms) PRE=(trace allreduce) ;;
      esac
      ;;
    report) PRE=(report "$F/trace_run") ;;
    record)
      PRE=(record) POST=(-- true)
      [[ $opt == --kill-on-hang ]] && PRE=(record --hang-timeout 5)
      ;;
    'diagnose allreduce') PRE=(diagnose allreduce) ;;
    'diagnose ep')
      PRE=(diagnose ep)
      [[ $opt == --layer ]] && PRE=(diagnose ep --routing "$F/ep/counts.json")
      ;;
    'diagnose ep --dry-run')
      PRE=(diagnose ep --dry-run)
      [[ $opt == --layer ]] && PRE=(diagnose ep --dry-run --ranks 4 --routing "$F/ep/counts.json")
      ;;
    global) PRE=() POST=(trace allreduce)
      [[ $opt == --output || $opt == --json || $opt == -v || $opt == --verbose ]] &&
        POST=(topo --sysfs-root "$F/sysfs/h200_vm")
      ;;
  esac
}

# The options a --help lists: "OPTION TYPE" per line, TYPE - for a flag. The help itself is a try.
help_options() {
  local label="commtool${*:+ $*} --help" line re
  re='^  (-[[:alnum:]],)?(--[[:alnum:]][[:alnum:]-]*)( ([^ ]+))?'
  try_start options "$label" "$@" --help
  local id=$TRY
  try_finish "$id"
  ((TS_rc[$id] == 0)) || finding "$id" crash "exit ${TS_rc[$id]}: --help failed"
  while IFS= read -r line; do
    [[ $line =~ $re ]] || continue
    [[ ${BASH_REMATCH[2]} == --help ]] && continue
    printf '%s %s\n' "${BASH_REMATCH[2]}" "${BASH_REMATCH[4]:--}"
  done <"$W/o/$id.out"
  try_done "$id"
}

# Is TYPE (as --help spells it) a path? Garbage is then a valid name.
is_path_type() { [[ $1 =~ FILE|DIR|PATH ]]; }

# One option with every hostile value (or with VALUE_SUBSET's tags only).
fuzz_option() {
  local sub=$1 opt=$2 type=$3 subset=${4:-}
  local label="$sub $opt" i tag v
  opt_context "$sub" "$opt"
  if [[ $type == - ]]; then
    # A flag: given a value it does not take.
    for tag in empty esc 100k nan; do
      for i in "${!TAGS[@]}"; do [[ ${TAGS[$i]} == "$tag" ]] && v=${VALS[$i]}; done
      T_tag="=$tag" T_long=$A81
      try options "$label=" "${PRE[@]}" "$opt=$v" "${POST[@]}"
    done
    return
  fi
  for i in "${!TAGS[@]}"; do
    tag=${TAGS[$i]} v=${VALS[$i]}
    [[ -n $subset && " $subset " != *" $tag "* ]] && continue
    T_tag=$tag T_long=$A81
    try_start options "$label" "${PRE[@]}" "$opt" "$v" "${POST[@]}"
    local id=$TRY
    try_finish "$id"
    if [[ $GARBAGE == *" $tag "* ]] && ! is_path_type "$type" &&
      [[ ${TS_rc[$id]} == 0 || ${TS_rc[$id]} == 3 ]]; then
      finding "$id" note "garbage accepted: exit ${TS_rc[$id]}"
    fi
    try_done "$id"
  done
  [[ -n $subset ]] && return
  T_tag='=empty'
  try options "$label" "${PRE[@]}" "$opt=" "${POST[@]}"
  T_tag='no value'
  if ((${#POST[@]})); then
    # The next word is then taken as the value; put the option last instead.
    try options "$label" "${PRE[@]}" "${POST[@]}" "$opt"
  else
    try options "$label" "${PRE[@]}" "$opt"
  fi
}

class_options() {
  local sub opt type i tag v
  local -a subs=(topo probe trace report record 'diagnose allreduce' 'diagnose ep')
  try options "no arguments"
  try options "--help" --help
  try options "--version" --version
  T_tag=esc
  try options "unknown subcommand" $'\e[31mnosuch'
  T_tag=100k T_long=$A81
  try options "unknown subcommand" "$A100K"
  T_tag=esc
  try options "unknown option" topo $'--\e[31mx'
  T_tag=100k T_long=$A81
  try options "unknown option" topo "--$A100K"
  try options "diagnose" diagnose
  local opts=$W/options.txt
  help_options >"$opts"
  while read -r opt type <&3; do
    [[ $opt == --version ]] && continue
    fuzz_option global "$opt" "$type"
  done 3<"$opts"
  for sub in "${subs[@]}"; do
    # shellcheck disable=SC2086  # the subcommand's words
    help_options $sub >"$opts"
    while read -r opt type <&3; do
      fuzz_option "$sub" "$opt" "$type"
      if [[ $sub == 'diagnose ep' && $opt != --dry-run ]]; then
        fuzz_option 'diagnose ep --dry-run' "$opt" "$type" \
          '100k esc u64+1 1e400 i32+1 nan'
      fi
    done 3<"$opts"
  done
  # The positionals.
  for i in "${!TAGS[@]}"; do
    tag=${TAGS[$i]} v=${VALS[$i]}
    T_tag=$tag T_long=$A81
    try options "trace COLLECTIVE" trace "$v"
    T_tag=$tag T_long=$A81
    try options "report DIR" report "$v"
    T_tag=$tag T_long=$A81 T_ok='0 2 3 4 5 127'
    try options "record -- CMD" record -- "$v"
  done
  try options "record without command" record
  try options "record without command" record --
  T_ok='0 1 2 3 4 5'
  try options "record -- false" record -- false
}

# ---------------------------------------------------------------------------------------------
# Hostile input files.
make_inputs() {
  local I=$W/in
  F=$W/fix
  [[ -e $I/fifo ]] && return 0
  mkfifo "$I/fifo"
  mkdir -p "$I/dir" "$I/emptydir" "$I/d000"
  echo x >"$I/dir/f"
  chmod 000 "$I/d000"
  ln -s loop2 "$I/loop1"
  ln -s loop1 "$I/loop2"
  ln -s nowhere "$I/dangling"
  ln -s /dev/zero "$I/zero-link"
  : >"$I/empty"
  head -c 65536 "$COMMTOOL" >"$I/binary"
  awk 'BEGIN { for (i = 0; i < 100000; i++) printf "["; print "" }' >"$I/deep.json"
  awk 'BEGIN { for (i = 0; i < 100000; i++) printf "<a>"; print "" }' >"$I/deep.xml"
  truncate -s 1G "$I/sparse-1g"
  truncate -s 5G "$I/sparse-5g"
}

# plant KIND PATH VALID FORMAT: makes PATH a hostile KIND, VALID being a good file of that place.
plant() {
  local kind=$1 p=$2 valid=$3 fmt=$4 I=$W/in
  rm -rf "$p"
  case $kind in
    fifo) mkfifo "$p" ;;
    dev-zero) ln -s /dev/zero "$p" ;;
    dev-null) ln -s /dev/null "$p" ;;
    dir) mkdir "$p" && echo x >"$p/f" ;;
    m000) cp "$valid" "$p" && chmod 000 "$p" ;;
    loop) ln -s "$(basename "$p")" "$p" ;;
    dangling) ln -s "$(basename "$p").nowhere" "$p" ;;
    empty) : >"$p" ;;
    binary) cp "$I/binary" "$p" ;;
    sparse-1g) truncate -s 1G "$p" ;;
    sparse-5g) truncate -s 5G "$p" ;;
    truncated) head -c "$(($(wc -c <"$valid") / 2))" "$valid" >"$p" ;;
    nul-inside) { head -c 20 "$valid"; printf '\0\0'; tail -c +21 "$valid"; } >"$p" ;;
    bom) { printf '\xef\xbb\xbf'; cat "$valid"; } >"$p" ;;
    crlf) sed 's/$/\r/' "$valid" >"$p" ;;
    esc-inside) { head -c 20 "$valid"; printf '\e[2J\e]0;owned\a'; tail -c +21 "$valid"; } >"$p" ;;
    long-line) { printf '%s\n' "${A100K:0:70000}"; cat "$valid"; } >"$p" ;;
    deep) if [[ $fmt == xml ]]; then cp "$I/deep.xml" "$p"; else cp "$I/deep.json" "$p"; fi ;;
    *) echo "plant: unknown kind $kind" >&2; return 1 ;;
  esac
}
FILE_KINDS=(fifo dev-zero dev-null dir m000 loop dangling empty binary sparse-1g sparse-5g
  truncated nul-inside bom crlf esc-inside long-line deep)
DIR_KINDS=(fifo dev-zero file emptydir d000 loop dangling name300 esc-name)

# One try of a file KIND: ARGS with @F@ replaced by the planted file.
file_try() {
  local label=$1 kind=$2 valid=$3 fmt=$4
  shift 4
  big_ok "$kind" "$label" || return 0
  local d=$W/t/f$((n_try + 1)) a
  mkdir -p "$d"
  local p=$d/input.$fmt
  case $kind in
    name300) p=$d/$NAME300 ;;
    esc-name) p=$d/$'\e[31mred\e[0m'.$fmt ;;
    newline-name) p=$d/$'a\nb'.$fmt ;;
    *) plant "$kind" "$p" "$valid" "$fmt" || return ;;
  esac
  [[ $kind == esc-name || $kind == newline-name ]] && plant binary "$p" "$valid" "$fmt"
  planted_run "$label" "$kind" "$d" @F@ "$p" "$@"
}

# One try of a planted file: ARGS with MARK replaced by VALUE, run in CWD, tagged KIND.
#   planted_run LABEL KIND CWD MARK VALUE ARGS...
planted_run() {
  local label=$1 kind=$2 cwd=$3 mark=$4 value=$5 a
  shift 5
  local -a args=()
  for a in "$@"; do args+=("${a//"$mark"/$value}"); done
  T_tag=$kind T_cwd=$cwd T_long=$N81
  [[ $kind == fifo ]] && T_tmo=5
  try_start files "$label" "${args[@]}"
  local id=$TRY
  TS_own[$id]=''
  try_finish "$id"
  try_done "$id"
}

# A 1 GiB file is read whole (seconds each): tried where it is named, not everywhere.
big_ok() { [[ $1 != sparse-1g || $2 == *'--routing (json)'* || $2 == 'report: run.json' ]]; }

# A directory argument given a hostile KIND.
dir_try() {
  local label=$1 kind=$2
  shift 2
  local d=$W/t/f$((n_try + 1)) a p
  mkdir -p "$d"
  p=$d/input
  case $kind in
    fifo) mkfifo "$p" ;;
    dev-zero) ln -s /dev/zero "$p" ;;
    file) cp "$W/in/binary" "$p" ;;
    emptydir) mkdir "$p" ;;
    d000) mkdir "$p" && chmod 000 "$p" ;;
    loop) ln -s input "$p" ;;
    dangling) ln -s nowhere "$p" ;;
    name300) p=$d/$NAME300 ;;
    esc-name) p=$d/$'\e[31mred\e[0m' && mkdir "$p" ;;
  esac
  planted_run "$label" "$kind" "$d" @F@ "$p" "$@"
}

# A copy of a fixture tree with one file of it made KIND; then ARGS with @D@ the copy.
inner_try() {
  local label=$1 src=$2 rel=$3 kind=$4 fmt=$5
  shift 5
  big_ok "$kind" "$label" || return 0
  local d=$W/t/f$((n_try + 1)) a
  mkdir -p "$d"
  cp -a "$src" "$d/tree"
  [[ -d $d/tree/$rel ]] || cp "$d/tree/$rel" "$d/valid"  # a directory has no valid copy
  plant "$kind" "$d/tree/$rel" "$d/valid" "$fmt" || return
  planted_run "$label" "$kind" "$d" @D@ "$d/tree" "$@"
}

# An NCCL topology file of N GPUs on one CPU.
gpus_xml() {
  awk -v n="$1" 'BEGIN {
    print "<system version=\"1\">"
    print "  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\">"
    for (i = 0; i < n; i++) {
      printf "    <pci busid=\"0000:%02x:%02x.%x\" class=\"0x030200\" vendor=\"0x10de\"", \
        int(i / 256), int(i % 256 / 8), i % 8
      printf " device=\"0x2330\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">"
      printf "<gpu dev=\"%d\" sm=\"90\" rank=\"%d\" gdr=\"1\"/></pci>\n", i, i
    }
    print "  </cpu>"
    print "</system>"
  }'
}

# Small files that ask for a lot.
make_huge() {
  local H=$W/in/huge
  [[ -d $H ]] && return 0
  make_inputs
  mkdir -p "$H"
  # NCCL XML with 65,536 GPUs (one per PCI function of domain 0), 4,096 and 1,024.
  gpus_xml 65536 >"$H/gpus65536.xml"
  gpus_xml 4096 >"$H/gpus4096.xml"
  gpus_xml 1024 >"$H/gpus1024.xml"
  local x=$W/fix/nccl_xml/dgx_h100.xml
  sed 's/link_width="[0-9]*"/link_width="2147483647"/' "$x" >"$H/width-max.xml"
  sed 's/numaid="[0-9-]*"/numaid="2147483647"/' "$x" >"$H/numa-max.xml"
  sed 's/ dev="[0-9]*"/ dev="2147483647"/' "$x" >"$H/dev-max.xml"
  sed 's/count="[0-9]*"/count="2147483647"/' "$x" >"$H/nvlink-count-max.xml"
  sed 's/speed="[0-9]*"/speed="18446744073709551616"/' "$x" >"$H/nic-speed-over.xml"
  sed 's/busid="0000:/busid="ffffffffffff:/' "$x" >"$H/busid-wide.xml"
  # Routing and placement asking for huge sizes.
  printf '{"tokens_per_rank": 2147483647, "topk": 1, "counts": [4294967294, 4294967294]}\n' \
    >"$H/tokens-max.json"
  printf '{"tokens_per_rank": 1152921504606846976, "topk": 1, "counts": [%s, %s]}\n' \
    2305843009213693952 2305843009213693952 >"$H/tokens-2e60.json"
  printf '{"tokens_per_rank": 64, "topk": 2147483647, "counts": [128]}\n' >"$H/topk-max.json"
  printf '{"counts": [18446744073709551616, 1]}\n' >"$H/count-over.json"
  printf '{"counts": [1e400, 1]}\n' >"$H/count-1e400.json"
  printf '{"counts": [-1, 257]}\n' >"$H/count-neg.json"
  printf 'expert,count\n2147483647,64\n0,64\n' >"$H/expert-max.csv"
  printf 'expert,count\n0,18446744073709551615\n1,1\n' >"$H/count-u64.csv"
  awk 'BEGIN { printf "{\"tokens_per_rank\": 250000, \"topk\": 1, \"counts\": [1"
    for (i = 1; i < 1000000; i++) printf ",1"; print "]}" }' >"$H/experts-1e6.json"
  awk 'BEGIN { printf "{\"layers\": ["; for (i = 0; i < 100000; i++) printf "%s[]", i ? "," : ""
    print "]}" }' >"$H/layers-1e5.json"
  printf 'expert,rank\n0,2147483647\n' >"$H/placement-rank-max.csv"
  awk 'BEGIN { printf "{\"placement\": [0"; for (i = 1; i < 1000000; i++) printf ",%d", i % 4
    print "]}" }' >"$H/placement-1e6.json"
  # A recording whose communicator claims 2^31-1 ranks.
  cp -a "$W/fix/recordings/two_rank_clean" "$H/rec-nranks-max"
  sed -i 's/"nranks":[0-9]*/"nranks":2147483647/' "$H"/rec-nranks-max/procs/*.jsonl
}

class_files() {
  local F=$W/fix k H=$W/in/huge
  make_inputs
  make_huge
  local ep=(diagnose ep --dry-run --ranks 4 --tokens 64 --topk 2)
  for k in "${FILE_KINDS[@]}" name300 esc-name newline-name; do
    file_try "topo --nccl-xml" "$k" "$F/nccl_xml/dgx_h100.xml" xml topo --nccl-xml @F@
    file_try "diagnose ep --dry-run --routing (json)" "$k" "$F/ep/counts.json" json \
      "${ep[@]}" --routing @F@
    file_try "diagnose ep --dry-run --routing (csv)" "$k" "$F/ep/counts.csv" csv \
      "${ep[@]}" --routing @F@
    file_try "diagnose ep --routing" "$k" "$F/ep/counts.json" json \
      diagnose ep --tokens 64 --topk 2 --routing @F@
    file_try "diagnose ep --dry-run --placement" "$k" "$F/ep/placement.csv" csv \
      "${ep[@]}" --routing "$F/ep/counts.csv" --placement @F@
  done
  for k in "${DIR_KINDS[@]}"; do
    dir_try "report DIR" "$k" report @F@
    dir_try "topo --sysfs-root" "$k" topo --sysfs-root @F@
  done
  for k in fifo dev-zero dir m000 loop dangling; do
    T_ok='0 2 3 4 5 126 127'
    file_try "record -- CMD" "$k" /bin/true sh record -- @F@
  done
  file_try "record -- CMD" name300 /bin/true sh record -- @F@
  file_try "record -- CMD" esc-name /bin/true sh record -- @F@
  # Hostile files inside a saved run, a recording and a sysfs tree.
  local gpu=devices/pci0000:00/0000:00:06.0
  for k in "${FILE_KINDS[@]}"; do
    inner_try "report: run.json" "$F/trace_run" run.json "$k" json report @D@
    inner_try "report: records-rank0.txt" "$F/trace_run" records-rank0.txt "$k" txt report @D@
    inner_try "report: record.json" "$F/recordings/two_rank_clean" record.json "$k" json \
      report @D@
    inner_try "report: procs/*.jsonl" "$F/recordings/two_rank_clean" procs/node-a-100.jsonl \
      "$k" jsonl report @D@
    inner_try "topo --sysfs-root: class" "$F/sysfs/h200_vm" "$gpu/class" "$k" txt \
      topo --sysfs-root @D@
  done
  for k in fifo dev-zero empty loop; do
    inner_try "report: procs/" "$F/recordings/two_rank_clean" procs "$k" dir report @D@
  done
  # Sysfs values that ask for a lot.
  local what val
  for what in "local_cpulist 0-4294967295" "local_cpulist 0-18446744073709551615" \
    "numa_node 2147483648" "numa_node -5" "current_link_width 2147483647" \
    "max_link_speed 1e400 GT/s PCIe" "current_link_speed nan GT/s PCIe" \
    "vendor 0x10de0000000000000000" "class $(printf '\e[31m0x030200')"; do
    val=${what#* }
    sysfs_value_try "${what%% *}" "$val"
  done
  # Small files asking for a lot.
  T_tag=65536-gpus
  try files "topo --nccl-xml: huge" topo --nccl-xml "$H/gpus65536.xml"
  T_tag=1024-gpus
  try files "topo --nccl-xml: huge" --json topo --nccl-xml "$H/gpus1024.xml" --output o.json
  for k in width-max numa-max dev-max nvlink-count-max nic-speed-over busid-wide; do
    T_tag=$k
    try files "topo --nccl-xml: huge" topo --nccl-xml "$H/$k.xml"
  done
  for k in tokens-max.json tokens-2e60.json topk-max.json count-over.json count-1e400.json \
    count-neg.json expert-max.csv count-u64.csv experts-1e6.json layers-1e5.json; do
    T_tag=$k
    try files "diagnose ep --routing: huge" diagnose ep --dry-run --ranks 2 --routing "$H/$k"
  done
  for k in placement-rank-max.csv placement-1e6.json; do
    T_tag=$k
    try files "diagnose ep --placement: huge" "${ep[@]}" --routing "$F/ep/counts.csv" \
      --placement "$H/$k"
  done
  T_tag=nranks-max
  try files "report: huge" report "$H/rec-nranks-max"
}

# A sysfs copy whose GPU has FILE holding VALUE.
sysfs_value_try() {
  local file=$1 val=$2
  local d=$W/t/f$((n_try + 1))
  mkdir -p "$d"
  cp -a "$W/fix/sysfs/h200_vm" "$d/tree"
  printf '%s\n' "$val" >"$d/tree/devices/pci0000:00/0000:00:06.0/$file"
  show_arg "$val"
  T_tag="$file=$SHOWN" T_cwd=$d
  try_start files "topo --sysfs-root: values" topo --sysfs-root "$d/tree"
  local id=$TRY
  TS_own[$id]=''
  try_finish "$id"
  try_done "$id"
}

# ---------------------------------------------------------------------------------------------
# Outputs. Each command writes @X@ (and @Y@ where two outputs meet).
OUT_CMDS=(
  'topo --output|topo --sysfs-root @FIX@/sysfs/h200_vm --output @X@|0'
  'topo --json --output|--json topo --sysfs-root @FIX@/sysfs/h200_vm --output @X@|0'
  'report --output|report @FIX@/trace_run --output @X@|0'
  'report --trace|report @FIX@/trace_run --trace @X@|0'
  'report recording --trace|report @FIX@/recordings/hang_rank3 --trace @X@|0'
  'diagnose ep --dry-run --heatmap|diagnose ep --dry-run --heatmap @X@|0'
  'diagnose ep --dry-run --output|diagnose ep --dry-run --output @X@|0'
  'trace --trace|trace allreduce --trace @X@|3'
  'trace --save|trace allreduce --save @X@|3'
  'trace --output|trace allreduce --output @X@|3'
  'diagnose allreduce --plot|diagnose allreduce --plot @X@|3'
  'diagnose ep --heatmap|diagnose ep --heatmap @X@|3'
  'diagnose ep --trace|diagnose ep --cupti --trace @X@|3'
  'probe --output|probe --output @X@|3'
  'record --save|record --save @X@ -- true|0'
)
OUT_KINDS=(dir missing name300 dev-full dev-null loop sticky-link sticky-dangling ro-dir)

# A fresh directory for an output try: adir/ (not empty), victim.txt, victimdir/ (empty),
# sticky/ (mode 1777) where "another user" (nobody) planted links to them.
out_dir_setup() {
  local d=$1
  mkdir -p "$d/adir" "$d/victimdir" "$d/ro" "$d/sticky"
  echo keep >"$d/adir/keep"
  echo 'victim: must not change' >"$d/victim.txt"
  chmod 1777 "$d/sticky"
  chmod 555 "$d/ro"
  ln -s ../victim.txt "$d/sticky/link"
  ln -s ../victimdir "$d/sticky/dirlink"
  ln -s ../created.txt "$d/sticky/dangling"
  ln -s loop "$d/loop"
  if ((is_root)); then
    chown -h nobody "$d/sticky/link" "$d/sticky/dirlink" "$d/sticky/dangling" 2>/dev/null
  fi
}

# What a directory holds: "path size mtime" per entry, .tmp excluded.
snapshot() { find "$1" -mindepth 1 -printf '%P %s %T@ %y\n' 2>/dev/null | sort; }

out_try() {
  local spec=$1 kind=$2
  local label=${spec%%|*} rest=${spec#*|}
  local argline=${rest%|*} expect=${rest##*|}
  local d=$W/t/x$((n_try + 1)) x a
  mkdir -p "$d"
  out_dir_setup "$d"
  local isdir=0
  [[ $label == *--save* || $label == *--save ]] && isdir=1
  case $kind in
    dir) x=$d/adir ;;
    missing) x=$d/missing/sub/out ;;
    name300) x=$d/$NAME300 ;;
    dev-full) x=/dev/full ;;
    dev-null) x=/dev/null ;;
    loop) x=$d/loop ;;
    sticky-link) x=$d/sticky/link; ((isdir)) && x=$d/sticky/dirlink ;;
    sticky-dangling) x=$d/sticky/dangling ;;
    ro-dir) x=$d/ro/out ;;
  esac
  local -a args=() words=()
  read -r -a words <<<"$argline"
  for a in "${words[@]}"; do
    a=${a//@FIX@/$W/fix}
    args+=("${a//@X@/$x}")
  done
  local before
  before=$(snapshot "$d")
  T_tag=$kind T_cwd=$d T_long=$N81 T_dirs=("$d")
  try_start outputs "$label" "${args[@]}"
  local id=$TRY
  TS_own[$id]=''
  try_finish "$id"
  local rc=${TS_rc[$id]}
  if ! cmp -s "$d/victim.txt" <(echo 'victim: must not change') || [[ ! -f $d/victim.txt ]] ||
    [[ -L $d/victim.txt ]]; then
    finding "$id" wrong "victim file changed through the link planted in the sticky directory"
  fi
  if [[ -n $(ls -A "$d/victimdir") ]]; then
    finding "$id" wrong "victim directory written through the link planted in the sticky dir"
  fi
  if [[ -e $d/created.txt ]]; then
    finding "$id" wrong "file created through the dangling link planted in the sticky directory"
  fi
  if [[ $kind == sticky-* && $rc == 0 && $is_root == 0 ]]; then
    finding "$id" note "not root: the planted link is ours, so following it is no attack"
  fi
  if [[ $rc == 3 && ($kind == name300 || $kind == loop || $kind == sticky-*) ]]; then
    finding "$id" note "an output it cannot or must not write not refused before looking for a \
GPU (exit 3)"
  fi
  if [[ $kind == dev-full && $rc == 0 && $expect == 0 ]]; then
    finding "$id" wrong "writing to /dev/full (ENOSPC) reported success: the output is lost"
  fi
  if ((rc != 0)); then
    local after new
    after=$(snapshot "$d")
    new=$(comm -13 <(printf '%s\n' "$before" | awk '{print $1, $4}' | sort) \
      <(printf '%s\n' "$after" | awk '{print $1, $4}' | sort) | awk '{print $1}' | head -3)
    [[ -z $new ]] || finding "$id" leftover "failed run (exit $rc) left: ${new//$'\n'/ }"
  fi
  try_done "$id"
}

# Two outputs, or an output and an input, on one file: must be refused (exit 2), and nothing may
# be overwritten.
clash_try() {
  local label=$1 watch=$2
  shift 2
  local d=$W/t/x$((n_try + 1)) a
  mkdir -p "$d"
  cp -a "$W/fix/trace_run" "$d/run"
  cp -a "$W/fix/recordings/two_rank_clean" "$d/rec"
  cp "$W/fix/nccl_xml/dgx_h100.xml" "$d/in.xml"
  cp "$W/fix/ep/counts.json" "$d/r.json"
  echo 'existing output' >"$d/x"
  ln -s x "$d/xlink"
  local -a args=()
  for a in "$@"; do args+=("${a//@D@/$d}"); done
  local sum_before=''
  [[ -n $watch ]] && sum_before=$(cksum <"$d/$watch")
  T_cwd=$d T_dirs=("$d")
  try_start outputs "$label" "${args[@]}"
  local id=$TRY
  TS_own[$id]=''
  try_finish "$id"
  local rc=${TS_rc[$id]}
  if [[ -n $watch && $rc == 0 ]]; then
    if [[ $(cksum <"$d/$watch" 2>/dev/null) != "$sum_before" ]]; then
      finding "$id" wrong "not refused, an input overwritten: $watch"
    fi
  fi
  if [[ -z $watch && $rc == 0 ]]; then
    finding "$id" wrong "not refused: one output overwrote the other on one file"
  fi
  if ((rc == 3)); then
    finding "$id" note "one file for two outputs not refused before looking for a GPU (exit 3)"
  fi
  try_done "$id"
}

# SIGNAL sent after DELAY seconds to a command that writes --output (topo --json of 4,096 GPUs,
# about a second and 5 MB here): no temporary file, and the output whole or absent.
signal_out_try() {
  local sig=$1 delay=$2
  local d=$W/t/x$((n_try + 1))
  mkdir -p "$d"
  local n
  n=$(kill -l "$sig")
  T_cwd=$d T_tag="SIG$sig after ${delay}s" T_ok="0 2 $((128 + n))" T_dirs=("$d")
  try_start outputs "signal while writing --output" --json topo --nccl-xml \
    "$W/in/huge/gpus4096.xml" --output "$d/out.json"
  local id=$TRY
  TS_own[$id]=''
  sleep "$delay"
  local c
  local sent=0
  c=$(try_child "$id") && kill "-$sig" "$c" 2>/dev/null && sent=1
  try_finish "$id"
  ((sent)) || finding "$id" note "ended before the signal: nothing tested"
  if [[ -e $d/out.json && $(tail -c 2 "$d/out.json" | tr -d '\n') != '}' ]]; then
    finding "$id" wrong "half-written output: out.json does not end its JSON document"
  fi
  try_done "$id"
}

class_outputs() {
  local spec k
  make_inputs
  make_huge
  for spec in "${OUT_CMDS[@]}"; do
    for k in "${OUT_KINDS[@]}"; do out_try "$spec" "$k"; done
  done
  local run=(report @D@/run) rec=(report @D@/rec) ep=(diagnose ep --dry-run)
  clash_try "report --output x --trace x" '' "${run[@]}" --output @D@/x --trace @D@/x
  clash_try "report --output x --trace ./x" '' "${run[@]}" --output @D@/x --trace ./x
  clash_try "report --output x --trace link-to-x" '' "${run[@]}" --output @D@/x \
    --trace @D@/xlink
  clash_try "report DIR --output DIR/run.json" run/run.json --json "${run[@]}" \
    --output @D@/run/run.json
  clash_try "report DIR --trace DIR/run.json" run/run.json "${run[@]}" --trace @D@/run/run.json
  clash_try "report REC --trace REC/record.json" rec/record.json "${rec[@]}" \
    --trace @D@/rec/record.json
  clash_try "report REC --output REC/procs/x.jsonl" rec/procs/node-a-100.jsonl "${rec[@]}" \
    --output @D@/rec/procs/node-a-100.jsonl
  clash_try "topo --nccl-xml x --output x" in.xml topo --nccl-xml @D@/in.xml --output @D@/in.xml
  clash_try "diagnose ep --routing x --heatmap x" r.json "${ep[@]}" --ranks 4 --tokens 64 \
    --topk 2 --routing @D@/r.json --heatmap @D@/r.json
  clash_try "diagnose ep --routing x --output x" r.json "${ep[@]}" --ranks 4 --tokens 64 \
    --topk 2 --routing @D@/r.json --output @D@/r.json
  clash_try "diagnose ep --dry-run --output x --heatmap x" '' "${ep[@]}" --output @D@/x \
    --heatmap @D@/x
  clash_try "trace --output x --trace x" '' trace allreduce --output @D@/x --trace @D@/x
  clash_try "trace --save d --output d" '' trace allreduce --save @D@/adir --output @D@/adir
  clash_try "diagnose allreduce --output x --plot x" '' diagnose allreduce --output @D@/x \
    --plot @D@/x
  clash_try "diagnose ep --heatmap x --trace x" '' diagnose ep --cupti --heatmap @D@/x --trace @D@/x
  clash_try "diagnose ep --output x --trace x" '' diagnose ep --cupti --output @D@/x --trace @D@/x
  local sig delay
  for sig in TERM INT HUP QUIT; do
    for delay in 0.2 0.6 0.9; do signal_out_try "$sig" "$delay"; done
  done
}

# ---------------------------------------------------------------------------------------------
# record: the job, signals, races.
record_check_strays() {
  local id=$1 s
  s=$(job_strays | head -3 | tr '\n' ';')
  if [[ -n $s ]]; then
    finding "$id" leftover "process of the job still running after record ended: $s"
    kill_job_strays
  fi
}

# record's job gets SIG (sent to commtool from another process); JOB traps it into file "got".
record_signal_try() {
  local sig=$1 job=$2 ok=$3
  local d=$W/t/r$((n_try + 1))
  mkdir -p "$d"
  T_cwd=$d T_tag=SIG$sig T_ok=$ok T_tmo=15 T_dirs=("$d")
  [[ $sig == KILL ]] && T_procs_ok=1 # left to the note below
  try_start record "record: SIG$sig from another process" record --save rec -- sh -c "$job"
  local id=$TRY
  TS_own[$id]=''
  local i c
  for ((i = 0; i < 100; i++)); do
    [[ -e $d/rec/record.json ]] && break
    sleep 0.05
  done
  sleep 1
  RECORD_SENT=0
  c=$(try_child "$id") && kill "-$sig" "$c" 2>/dev/null && RECORD_SENT=1
  RECORD_ID=$id RECORD_DIR=$d
}

# Ends a record_signal_try.
record_finish() {
  try_finish "$RECORD_ID"
  ((RECORD_SENT)) || finding "$RECORD_ID" note "ended before the signal: nothing tested"
}

class_record() {
  local d id i
  # Without the plugin record is exit 3; a stand-in file lets the job run (true loads no NCCL).
  T_tag=plain
  try_start record "record -- true" record --save rec -- true
  id=$TRY
  try_finish "$id"
  if ((TS_rc[$id] == 3)); then
    finding "$id" note "record: no profiler plugin beside commtool; using a stand-in file"
  elif [[ ! -f ${TS_dir[$id]}/rec/record.json ]]; then
    finding "$id" wrong "record -- true ended ${TS_rc[$id]} but left no rec/record.json"
  fi
  try_done "$id"
  T_tag=plain
  try record "record -- true" record -- true
  T_ok='7' T_tag='exit 7'
  try record "record -- sh -c 'exit 7'" record -- sh -c 'exit 7'
  T_ok='139' T_tag='SEGV' T_jobout=1
  try record "record -- job killed by SIGSEGV" record -- sh -c 'kill -SEGV $$'
  T_tag=nonempty-out
  d=$W/t/r$((n_try + 1))
  mkdir -p "$d/full"
  echo keep >"$d/full/keep"
  T_cwd=$d T_ok=2
  try_start record "record --save non-empty" record --save full -- true
  id=$TRY
  TS_own[$id]=''
  try_finish "$id"
  [[ $(ls -A "$d/full") == keep ]] || finding "$id" wrong "a non-empty --save was written into"
  try_done "$id"
  T_tag=missing-cmd T_ok=2
  d=$W/t/r$((n_try + 1))
  T_cwd=$d
  try_start record "record --save x -- missing command" record --save x -- ./no-such-command
  id=$TRY
  TS_own[$id]=''
  try_finish "$id"
  [[ ! -e $d/x ]] || finding "$id" leftover "--save x left behind by a job that never started"
  try_done "$id"

  # SIGTERM: record passes it to the job; nothing of the job may outlive record.
  record_signal_try TERM 'sleep 30 & sleep 30' '143'
  record_finish
  record_check_strays "$RECORD_ID"
  try_done "$RECORD_ID"
  # SIGHUP, passed on the same way: the job traps it.
  # shellcheck disable=SC2016  # the job's shell expands them
  record_signal_try HUP 'trap "echo HUP > got; exit 0" HUP; i=0
    while [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done' '0 129'
  record_finish
  [[ $(cat "$RECORD_DIR/got" 2>/dev/null) == HUP ]] ||
    finding "$RECORD_ID" wrong "SIGHUP sent to record did not reach the job"
  record_check_strays "$RECORD_ID"
  try_done "$RECORD_ID"
  # SIGINT from another process (not the terminal): the job must receive it.
  # shellcheck disable=SC2016  # the job's shell expands them
  record_signal_try INT 'trap "echo INT > got; exit 0" INT; i=0
    while [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done' '0 130'
  record_finish
  [[ $(cat "$RECORD_DIR/got" 2>/dev/null) == INT ]] ||
    finding "$RECORD_ID" wrong "SIGINT sent to record by another process did not reach the job"
  record_check_strays "$RECORD_ID"
  try_done "$RECORD_ID"
  # SIGUSR1: a standing report, and the job goes on.
  record_signal_try USR1 'sleep 2; echo done > got' '0'
  record_finish
  [[ $(cat "$RECORD_DIR/got" 2>/dev/null) == 'done' ]] ||
    finding "$RECORD_ID" wrong "SIGUSR1 to record ended the job"
  compgen -G "$RECORD_DIR/rec/standing-*.txt" >/dev/null ||
    finding "$RECORD_ID" wrong "SIGUSR1 to record wrote no standing-N.txt"
  record_check_strays "$RECORD_ID"
  try_done "$RECORD_ID"
  # SIGKILL to record: nothing can be cleaned, but does the job outlive it?
  record_signal_try KILL 'sleep 4' '137'
  record_finish
  if [[ -n $(job_strays) ]]; then
    finding "$RECORD_ID" note "SIGKILL to record leaves its job running (no parent-death signal)"
    kill_job_strays
  fi
  try_done "$RECORD_ID"

  # Ten records started together in one directory, default names.
  d=$W/t/r$((n_try + 1))
  mkdir -p "$d"
  local -a ids=()
  for ((i = 0; i < 10; i++)); do
    T_cwd=$d T_tag="10 together" T_dirs=("$d")
    # shellcheck disable=SC2016  # the job's shell expands it
    try_start record "record: ten together, default --save" record -- \
      sh -c 'echo "$COMMTOOL_RECORD_DIR" > told.$$; sleep 1'
    ids+=("$TRY")
  done
  for id in "${ids[@]}"; do try_finish "$id"; TS_own[$id]=shared; done
  local made told uniq
  made=$(find "$d" -maxdepth 1 -type d -name 'commtool-record-*' | wc -l)
  local with_meta
  with_meta=$(find "$d" -maxdepth 2 -path '*/commtool-record-*/record.json' | wc -l)
  local -a tf=("$d"/told.*)
  told=0 uniq=0
  if ((${#tf[@]})); then
    told=$(cat "${tf[@]}" | wc -l)
    uniq=$(cat "${tf[@]}" | sort -u | wc -l)
  fi
  if ((made != 10 || with_meta != 10 || told != 10 || uniq != 10)); then
    finding "${ids[0]}" wrong "ten records together: $made directories, $with_meta with \
record.json, $told jobs told $uniq distinct paths"
  fi
  for id in "${ids[@]}"; do try_done "$id"; done
  # Five records into one --save together: one runs, four are refused.
  d=$W/t/r$((n_try + 1))
  mkdir -p "$d"
  ids=()
  for ((i = 0; i < 5; i++)); do
    T_cwd=$d T_tag="5 into one" T_dirs=("$d")
    # shellcheck disable=SC2016  # the job's shell expands it
    try_start record "record: five into one --save" record --save same -- \
      sh -c 'echo "$COMMTOOL_RECORD_DIR" > told.$$; sleep 1'
    ids+=("$TRY")
  done
  local zeros=0 twos=0
  for id in "${ids[@]}"; do
    try_finish "$id"
    TS_own[$id]=shared
    ((TS_rc[$id] == 0)) && ((zeros++))
    ((TS_rc[$id] == 2)) && ((twos++))
  done
  if ((zeros != 1 || twos != 4)); then
    finding "${ids[0]}" wrong "five records into one --save: $zeros ran (exit 0), $twos refused \
(exit 2); jobs told to record there: $(find "$d" -maxdepth 1 -name 'told.*' | wc -l)"
  fi
  for id in "${ids[@]}"; do try_done "$id"; done
  kill_job_strays
}

# ---------------------------------------------------------------------------------------------
# report of mutated recordings and saved runs.
REC_MUTATIONS=(rank-ge-nranks rank-neg nranks-zero t-neg t-u64max t-u64over gpu-u64max mono-neg
  truncated dup-lines dup-file count-u64max seq-huge esc-json esc-raw long-host huge-host
  empty-proc binary-tail index-huge meta-exit-huge meta-command-string)
RUN_MUTATIONS=(nranks-max nranks-zero rank-file-ge-nranks t-neg t-u64max t-u64over end-before-start
  records-truncated run-truncated dup-lines sizes-zero sizes-u64max sizes-neg sizes-1e400 iters-zero
  iters-max time-1e400 time-neg header-99 esc-kernel long-kernel wide-line seq-huge modes-esc)

# mutate_rec KIND DIR: DIR a copy of a recording.
mutate_rec() {
  local m=$1 d=$2
  local p
  p=$(find "$d/procs" -name '*.jsonl' | sort | head -1)
  case $m in
    rank-ge-nranks) sed -i 's/"rank":[0-9]*/"rank":7/' "$p" ;;
    rank-neg) sed -i 's/"rank":[0-9]*/"rank":-1/' "$p" ;;
    nranks-zero) sed -i 's/"nranks":[0-9]*/"nranks":0/' "$d"/procs/*.jsonl ;;
    t-neg) sed -i 's/"t":[0-9]*/"t":-5/g' "$p" ;;
    t-u64max) sed -i 's/"t":[0-9]*/"t":18446744073709551615/g' "$p" ;;
    t-u64over) sed -i 's/"t":[0-9]*/"t":18446744073709551616/g' "$p" ;;
    gpu-u64max) sed -i 's/"gpu":\[[0-9]*,/"gpu":[18446744073709551615,/g' "$p" ;;
    mono-neg) sed -i 's/"mono":[0-9]*/"mono":-1/; s/"realtime":[0-9]*/"realtime":-1/' "$p" ;;
    truncated) truncate -s "$(($(wc -c <"$p") / 2))" "$p" ;;
    dup-lines) sed -i 'p' "$p" ;;
    dup-file) cp "$p" "${p%.jsonl}-copy.jsonl" ;;
    count-u64max) sed -i 's/"count":[0-9]*/"count":18446744073709551615/g' "$p" ;;
    seq-huge) sed -i 's/"seq":[0-9]*/"seq":9223372036854775807/g' "$p" ;;
    esc-json) sed -i 's/"func":"[A-Za-z]*"/"func":"\\u001b[31mX\\u0007"/g
      s/"host":"[^"]*"/"host":"\\u001b]0;owned\\u0007"/' "$p" ;;
    esc-raw) sed -i 's/"func":"[A-Za-z]*"/"func":"\x1b[31mX"/' "$p" ;;
    long-host) sed -i "s/\"host\":\"[^\"]*\"/\"host\":\"${A100K:0:60000}\"/" "$p" ;;
    huge-host) sed -i "s/\"host\":\"[^\"]*\"/\"host\":\"$A100K\"/" "$p" ;;
    empty-proc) : >"$p" ;;
    binary-tail) cat "$W/in/binary" >>"$p" ;;
    index-huge) sed -i 's/"index":[0-9]*/"index":18446744073709551615/g' "$p" ;;
    meta-exit-huge) sed -i 's/"exit_code": [0-9a-z]*/"exit_code": 2147483648/
      s/"started_realtime_ns": [0-9]*/"started_realtime_ns": -1/' "$d/record.json" ;;
    meta-command-string) sed -i '/"command": \[/,/\]/c\  "command": "\\u001b[31mrm -rf /",' \
      "$d/record.json" ;;
  esac
}

# mutate_run KIND DIR: DIR a copy of a saved run.
mutate_run() {
  local m=$1 d=$2
  local r=$d/records-rank0.txt j=$d/run.json
  case $m in
    nranks-max) sed -i 's/"nranks": [0-9]*/"nranks": 2147483647/' "$j" ;;
    nranks-zero) sed -i 's/"nranks": [0-9]*/"nranks": 0/' "$j" ;;
    rank-file-ge-nranks) mv "$r" "$d/records-rank5.txt" ;;
    t-neg) awk '$1 == "k" || $1 == "a" { $4 = -5 } 1' "$r" >"$r.x" && mv "$r.x" "$r" ;;
    t-u64max) awk '$1 == "k" { $4 = "18446744073709551615" } 1' "$r" >"$r.x" && mv "$r.x" "$r" ;;
    t-u64over) awk '$1 == "a" { $5 = "18446744073709551616" } 1' "$r" >"$r.x" && mv "$r.x" "$r" ;;
    end-before-start) awk '$1 == "k" { t = $4; $4 = $5; $5 = t } 1' "$r" >"$r.x" &&
      mv "$r.x" "$r" ;;
    records-truncated) truncate -s "$(($(wc -c <"$r") / 2))" "$r" ;;
    run-truncated) truncate -s "$(($(wc -c <"$j") / 2))" "$j" ;;
    dup-lines) sed -i 'p' "$r" ;;
    sizes-zero) sed -i '/"sizes": \[/,/\]/{s/^ *[0-9][0-9]*,$/0,/; s/^ *[0-9][0-9]*$/0/}' "$j" ;;
    sizes-u64max) sed -i '/"sizes": \[/,/\]/s/^ *1024,$/18446744073709551615,/' "$j" ;;
    sizes-neg) sed -i '/"sizes": \[/,/\]/s/^ *1024,$/-8,/' "$j" ;;
    sizes-1e400) sed -i '/"sizes": \[/,/\]/s/^ *1024,$/1e400,/' "$j" ;;
    iters-zero) sed -i 's/"iters": [0-9]*/"iters": 0/' "$j" ;;
    iters-max) sed -i 's/"iters": [0-9]*/"iters": 2147483647/' "$j" ;;
    time-1e400) sed -i '0,/"time_us": [0-9.]*/s//"time_us": 1e400/' "$j" ;;
    time-neg) sed -i 's/"time_us": [0-9.]*/"time_us": -1/' "$j" ;;
    header-99) sed -i '1s/.*/commtool-records 99/' "$r" ;;
    esc-kernel)
      sed -i '0,/^k /s/^\(k [0-9]* [0-9]* [0-9]* [0-9]*\) .*/\1 \x1b[31mkernel\x07/' "$r" ;;
    long-kernel) sed -i "0,/^k /s/^\\(k [0-9]* [0-9]* [0-9]* [0-9]*\\) .*/\\1 $A100K/" "$r" ;;
    wide-line) awk 'NR == 3 { printf "%s", $0; for (i = 0; i < 100000; i++) printf " 1"
      print ""; next } 1' "$r" >"$r.x" && mv "$r.x" "$r" ;;
    seq-huge) sed -i 's/"seq": [0-9]*/"seq": 18446744073709551615/' "$j" ;;
    modes-esc) sed -i 's/"sync",/"\\u001b[31msync",/' "$j" ;;
  esac
}

report_mut_try() {
  local kind=$1 src=$2 m=$3
  shift 3
  local d=$W/t/m$((n_try + 1))
  mkdir -p "$d"
  cp -a "$src" "$d/in"
  if [[ $kind == rec ]]; then mutate_rec "$m" "$d/in"; else mutate_run "$m" "$d/in"; fi
  T_tag="$(basename "$src"):$m" T_cwd=$d T_long=$A81 T_dirs=("$d")
  local -a args=()
  local a
  for a in "$@"; do args+=("${a//@D@/$d/in}"); done
  try_start report "${*/@D@/DIR} ($kind)" "${args[@]}"
  local id=$TRY
  TS_own[$id]=''
  try_finish "$id"
  try_done "$id"
}

class_report() {
  local r m
  make_inputs
  for r in "$W"/fix/recordings/*/; do
    r=${r%/}
    for m in "${REC_MUTATIONS[@]}"; do report_mut_try rec "$r" "$m" report @D@; done
  done
  for r in two_rank_clean hang_rank3; do
    for m in "${REC_MUTATIONS[@]}"; do
      report_mut_try rec "$W/fix/recordings/$r" "$m" --json report @D@
      report_mut_try rec "$W/fix/recordings/$r" "$m" report @D@ --trace t.json
    done
  done
  for m in "${RUN_MUTATIONS[@]}"; do
    report_mut_try run "$W/fix/trace_run" "$m" report @D@
    report_mut_try run "$W/fix/trace_run" "$m" --json report @D@
    report_mut_try run "$W/fix/trace_run" "$m" report @D@ --trace t.json
  done
}

# ---------------------------------------------------------------------------------------------
table_row() { printf '%-8s | %5s | %-22s | %7s | %5s | %9s | %6s | %5s | %5s\n' "$@"; }
print_table() {
  local cls f
  local -A sum=()
  local rule
  rule=$(printf '%96s' '' | tr ' ' -)
  echo
  table_row class tried 'exit 0/2/3/4/5/other' crashes hangs leftovers format wrong notes
  printf '%s\n' "$rule"
  for cls in options files outputs record report total; do
    if [[ $cls == total ]]; then
      printf '%s\n' "$rule"
    else
      for f in tried e0 e2 e3 e4 e5 eother crash hang leftover format wrong note; do
        sum[$f]=$((${sum[$f]:-0} + ${C[$cls,$f]:-0}))
        sum[$cls,$f]=${C[$cls,$f]:-0}
      done
    fi
    local k=$cls,
    [[ $cls == total ]] && k=''
    local exits="${sum[${k}e0]}/${sum[${k}e2]}/${sum[${k}e3]}/${sum[${k}e4]}/${sum[${k}e5]}"
    table_row "$cls" "${sum[${k}tried]}" "$exits/${sum[${k}eother]}" \
      "${sum[${k}crash]}" "${sum[${k}hang]}" "${sum[${k}leftover]}" "${sum[${k}format]}" \
      "${sum[${k}wrong]}" "${sum[${k}note]}"
  done
  BAD=$((sum[crash] + sum[hang] + sum[leftover] + sum[format] + sum[wrong]))
}

# The distinct findings: per kind, class and why, how many tries, then the values that did it,
# each with what was tried (the option, argument or file); notes last. Wrapped at 100 columns.
# shellcheck disable=SC2016  # the program is awk's
GROUPS_AWK='
  function wrap(text, words, nw, i, line) {
    nw = split(text, words, " "); line = "   "
    for (i = 1; i <= nw; i++) {
      if (length(line) + 1 + length(words[i]) > 100 && line !~ /^ *$/) {
        print line; line = "        "
      }
      line = line " " words[i]
    }
    print line
  }
  { why = $1 " " $2 " " $4
    if (!(why in n)) { order[++k] = why; isnote[why] = ($1 == "note") }
    n[why]++
    lab = $3; tag = $5
    if ($1 == "note") { lab = $3 " <" $5 ">"; tag = "" }
    if (!((why, lab) in seen)) {
      seen[why, lab] = 1; tags[why, lab] = tag; labs[why] = labs[why] SUBSEP lab
    } else if (index(" " tags[why, lab] " ", " " tag " ") == 0) {
      tags[why, lab] = tags[why, lab] " " tag
    }
  }
  END {
    for (pass = 0; pass < 2; pass++) for (i = 1; i <= k; i++) {
      w = order[i]
      if (isnote[w] != pass) continue
      printf "%s (%d)\n", w, n[w]
      m = split(substr(labs[w], 2), l, SUBSEP)
      split("", byset); sets = 0
      for (j = 1; j <= m; j++) {
        t = tags[w, l[j]]
        if (!(t in byset)) { setorder[++sets] = t; byset[t] = l[j] }
        else byset[t] = byset[t] ", " l[j]
      }
      for (j = 1; j <= sets; j++) {
        t = setorder[j]
        wrap((t == "" ? "" : "<" t ">: ") byset[t])
      }
    }
  }'
print_groups() {
  [[ -s $GROUPS_TSV ]] || return 0
  printf '\nDistinct findings: kind class why (tries), then <values>: what was tried\n'
  awk -F '\t' "$GROUPS_AWK" "$GROUPS_TSV"
}

main() {
  printf 'audit.sh: %s\naudit.sh: work in %s (timeout %s s, ulimit -v %s KiB)\n' \
    "$COMMTOOL" "$W" "$TMO" "$MEM_KB"
  cp -a "$root/tests/fixtures" "$W/fix" || die "cannot copy the fixtures"
  {
    printf 'commtool audit of %s, %s\n' "$COMMTOOL" "$(date -u '+%Y-%m-%d %H:%M UTC')"
    ((is_root)) && printf 'note: running as root: mode-000 files and directories and mode-555 '
    ((is_root)) && printf 'directories cannot be enforced\n'
    printf 'note: fs.protected_symlinks = %s\n\n' \
      "$(cat /proc/sys/fs/protected_symlinks 2>/dev/null || echo unknown)"
  } >>"$LOG"
  # record needs commtool's NCCL profiler plugin only to name it to the job; without one a
  # stand-in file lets record's tries run (their jobs load no NCCL).
  local probe=$W/t/plugin
  mkdir -p "$probe"
  if ! (cd "$probe" && ulimit -v "$MEM_KB" &&
    exec env "${clean_env[@]}" timeout 10 "$COMMTOOL" record --save r -- true \
      </dev/null >/dev/null 2>&1); then
    : >"$W/in/stand-in-plugin.so"
    PLUGIN_ENV=("COMMTOOL_PROFILER_PLUGIN=$W/in/stand-in-plugin.so")
    printf 'note: record -- true failed as it is: record runs with %s\n' "${PLUGIN_ENV[0]}" \
      >>"$LOG"
  fi
  rm -rf "$probe"
  local cls start=$SECONDS
  for cls in $CLASSES; do
    case $cls in
      options | files | outputs | record | report) ;;
      *) die "unknown class '$cls' (options files outputs record report)" ;;
    esac
    local t0=$SECONDS
    "class_$cls"
    printf 'audit.sh: %-8s %5s tries in %3s s\n' "$cls" "${C[$cls,tried]:-0}" $((SECONDS - t0))
  done
  print_table
  local groups
  groups=$(print_groups)
  if [[ -n $groups ]]; then
    printf '%s\n' "$groups"
    printf '\n%s\n' "$groups" >>"$LOG"
  fi
  local log=$LOG
  if ((own_w)) && [[ $KEEP != 1 ]]; then
    log=$(mktemp -t commtool-audit-findings.XXXXXX) && cp "$LOG" "$log"
  fi
  ((REBUILT == 0)) ||
    printf 'audit.sh: %s tries were started again: commtool was being rebuilt\n' "$REBUILT"
  printf '\n%s findings in %s tries (%s s); every finding and note: %s\n' "$BAD" "$n_try" \
    $((SECONDS - start)) "$log"
  ((BAD == 0))
}

main
