#!/usr/bin/env bash
# overnight's agent contract without Python: the sample agent's five steps in bash, coreutils,
# git and curl. It does what overnight/demo/sample_agent/main.py does on the agent kit, by hand:
#
# - reads OVERNIGHT_RUN_ID, OVERNIGHT_ATTEMPT, OVERNIGHT_RESTART_REASON, OVERNIGHT_CHECKPOINT
#   (and OVERNIGHT_FRESH_CONTEXT_EXIT_CODE);
# - after every step writes its checkpoint atomically: a temp file in the checkpoint's folder,
#   synced, renamed over the checkpoint (mv), the folder synced. The checkpoint is the kit's
#   JSON (step, plan, next, notes, done, done_actions), and a restart continues after `step`;
# - keys each outside action {run_id}-step-{n}, the same on every attempt, in the ledger
#   service at OVERNIGHT_LEDGER_URL (overnight/demo/outside_world.py), which does an action once
#   per key (without a URL: the JSONL file OVERNIGHT_LEDGER, default next to the checkpoint);
# - commits each step on the current branch, and pushes when there is an origin;
# - exits 0 when done, OVERNIGHT_FRESH_CONTEXT_EXIT_CODE for a fresh context, 3 for a crash.
#
# Failure switches, each firing once per run (the ledger remembers): AGENT_DIE_AFTER=N crashes
# after step N's work, before its checkpoint; AGENT_STALL_AT=N hangs before step N;
# AGENT_FRESH_CONTEXT_AFTER=N asks for a fresh context after step N. AGENT_STEP_DELAY=S sleeps
# S seconds before each step.
set -euo pipefail

STEPS=("read the code" "write the migration" "run the tests" "open the pull request"
  "post a summary")
CRASH_EXIT_CODE=3
MIGRATION=migrations/0001_add_due_date.sql

RUN_ID=${OVERNIGHT_RUN_ID:-local-run}
ATTEMPT=${OVERNIGHT_ATTEMPT:-1}
REASON=${OVERNIGHT_RESTART_REASON:-}
CHECKPOINT=${OVERNIGHT_CHECKPOINT:-/workspace/checkpoint.json}
FRESH_CONTEXT_EXIT_CODE=${OVERNIGHT_FRESH_CONTEXT_EXIT_CODE:-75}
LEDGER_URL=${OVERNIGHT_LEDGER_URL:-}
LEDGER_FILE=${OVERNIGHT_LEDGER:-$(dirname "$CHECKPOINT")/ledger.jsonl}

# --- JSON: just enough to write strings and lists, and to read back our own checkpoint ---------

json_string() { # TEXT -> a JSON string literal
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  s=${s//$'\r'/}
  printf '"%s"' "$(printf '%s' "$s" | tr -d '\000-\037')"
}

json_list() { # LITERAL... -> a JSON list of JSON literals, one per line
  if (($# == 0)); then
    printf '[]'
    return
  fi
  local first=1 item
  printf '['
  for item in "$@"; do
    ((first)) || printf ','
    first=0
    printf '\n  %s' "$item"
  done
  printf '\n ]'
}

strings() { # TEXT... -> their JSON literals, one per line
  local text
  for text in "$@"; do
    json_string "$text"
    printf '\n'
  done
}

# --- the checkpoint ----------------------------------------------------------------------------

STEP=0
NOTES=()        # JSON literals, kept as written
DONE_ACTIONS=() # JSON literals of action keys
DONE_NAMES=()   # JSON literals of the steps done

load_checkpoint() {
  [[ -f $CHECKPOINT ]] || return 0
  # Written one field per line, sorted, as the kit writes it (json.dumps(indent=1)).
  local line section="" item literal='^"([^"\\]|\\.)*"$' found=0
  while IFS= read -r line || [[ -n $line ]]; do
    case $line in
    '  "'*)
      item=${line#  }
      item=${item%,}
      [[ $item =~ $literal ]] || continue
      case $section in
      notes) NOTES+=("$item") ;;
      done_actions) DONE_ACTIONS+=("$item") ;;
      esac
      ;;
    ' "step": '*)
      item=${line#' "step": '}
      item=${item%,}
      [[ $item =~ ^[0-9]+$ ]] && STEP=$item && found=1
      section=""
      ;;
    ' "notes": [') section=notes ;;
    ' "done_actions": [') section=done_actions ;;
    *) section="" ;;
    esac
  done <"$CHECKPOINT"
  if ((!found)); then
    STEP=0 NOTES=() DONE_ACTIONS=()
    NOTES+=("$(json_string "checkpoint at $CHECKPOINT could not be read; starting over")")
  fi
}

save_checkpoint() { # whole or not at all: temp file, sync, mv, sync the folder
  local folder temp next="done"
  folder=$(dirname "$CHECKPOINT")
  mkdir -p "$folder"
  ((STEP < ${#STEPS[@]})) && next=${STEPS[STEP]}
  temp=$(mktemp "$folder/.checkpoint-XXXXXX.tmp")
  if {
    printf '{\n'
    printf ' "done": %s,\n' "$(json_list "${DONE_NAMES[@]}")"
    printf ' "done_actions": %s,\n' "$(json_list "${DONE_ACTIONS[@]}")"
    printf ' "next": %s,\n' "$(json_string "$next")"
    printf ' "notes": %s,\n' "$(json_list "${NOTES[@]}")"
    printf ' "plan": %s,\n' "$(json_list "${PLAN[@]}")"
    printf ' "step": %d\n}' "$STEP"
  } >"$temp" && sync "$temp" && mv -f "$temp" "$CHECKPOINT"; then
    sync "$folder" 2>/dev/null || true # make the rename itself durable
  else
    rm -f "$temp"
    echo "could not save the checkpoint" >&2
    exit 1
  fi
}

note() { NOTES+=("$(json_string "$1")"); }

# --- the ledger: the outside world -------------------------------------------------------------

post() { # PATH BODY -> the service's answer
  curl --silent --show-error --fail --noproxy '*' --max-time 10 \
    --retry 5 --retry-connrefused --retry-delay 1 \
    -H 'Content-Type: application/json' --data-binary "$2" "${LEDGER_URL%/}/$1"
}

act() { # STEP ACTION DETAIL -> status 0 when done now, 1 when its key shows it done before
  local key item answer
  key=$(json_string "$RUN_ID-step-$1")
  for item in "${DONE_ACTIONS[@]}"; do
    [[ $item == "$key" ]] && return 1
  done
  if [[ -n $LEDGER_URL ]]; then
    # No answer is not "done before": end this attempt (set -e does not reach into an `if`),
    # and its restart asks again with the same key.
    answer=$(post actions "{\"key\": $key, \"action\": $(json_string "$2"), \"detail\": $(json_string "$3")}") || {
      echo "the ledger did not answer for $key: ending this attempt" >&2
      exit 1
    }
  elif grep -qF "{\"key\": $key," "$LEDGER_FILE" 2>/dev/null; then
    answer='{"done": false}'
  else
    mkdir -p "$(dirname "$LEDGER_FILE")"
    printf '{"key": %s, "action": %s, "detail": %s, "at": %s}\n' "$key" \
      "$(json_string "$2")" "$(json_string "$3")" "$(date +%s)" >>"$LEDGER_FILE"
    answer='{"done": true}'
  fi
  DONE_ACTIONS+=("$key") # saved with the step's checkpoint
  [[ $answer == *'"done": true'* ]]
}

once() { # SWITCH -> status 0 the first time it is reached in this run
  if [[ -n $LEDGER_URL ]]; then
    [[ $(post once "{\"run_id\": $(json_string "$RUN_ID"), \"switch\": $(json_string "$1")}") \
      == *'"first": true'* ]]
  else
    mkdir -p "$(dirname "$LEDGER_FILE")"
    (set -o noclobber && : >"$(dirname "$LEDGER_FILE")/.$RUN_ID.$1") 2>/dev/null
  fi
}

# --- git ---------------------------------------------------------------------------------------

export GIT_AUTHOR_NAME="overnight shell agent" GIT_AUTHOR_EMAIL=agent@overnight.invalid
export GIT_COMMITTER_NAME="overnight shell agent" GIT_COMMITTER_EMAIL=agent@overnight.invalid

commit_step() { # STEP NAME -> what happened
  git rev-parse --git-dir >/dev/null 2>&1 || {
    echo "not a git repository: nothing committed"
    return
  }
  git add -A
  git commit --allow-empty -q -m "step $1: $2" || {
    echo "commit failed"
    return
  }
  if git remote get-url origin >/dev/null 2>&1; then
    # Push so a new sandbox cloned from origin starts from the work the checkpoint lists.
    git push -q origin "HEAD:refs/heads/$(git rev-parse --abbrev-ref HEAD)" >/dev/null 2>&1 || true
  fi
  echo committed
}

# --- the five steps: each sets OUTCOME ---------------------------------------------------------

step_1() { OUTCOME="read $(find . -path ./.git -prune -o -type f -print | wc -l) file(s)"; }

step_2() {
  mkdir -p "$(dirname "$MIGRATION")"
  echo "ALTER TABLE tasks ADD COLUMN due_date TEXT;" >"$MIGRATION"
  OUTCOME="wrote $MIGRATION"
}

step_3() {
  if [[ ! -d tests ]] || ! command -v python3 >/dev/null; then
    OUTCOME="no tests to run"
  elif python3 -m unittest discover -s tests -q >/dev/null 2>&1; then
    OUTCOME="tests passed"
  else
    OUTCOME="tests failed"
  fi
}

step_4() {
  if act 4 open_pull_request "branch $(git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)"; then
    OUTCOME="opened the pull request"
  else
    OUTCOME="pull request already open: not reopened"
  fi
}

step_5() {
  if act 5 post_summary "${#NOTES[@]} notes; migration added"; then
    OUTCOME="posted the summary"
  else
    OUTCOME="summary already posted: not reposted"
  fi
}

# --- main --------------------------------------------------------------------------------------

mapfile -t PLAN < <(strings "${STEPS[@]}")
load_checkpoint
if [[ -n $REASON ]]; then
  note "attempt $ATTEMPT resumed at step $((STEP + 1)): $REASON"
fi
echo "attempt $ATTEMPT: resuming after step $STEP"

for ((n = STEP + 1; n <= ${#STEPS[@]}; n++)); do
  name=${STEPS[n - 1]}
  if [[ ${AGENT_STALL_AT:-} == "$n" ]] && once "stalled-at-$n"; then
    echo "stalling at step $n ($name)"
    while :; do sleep 3600; done
  fi
  if [[ -n ${AGENT_STEP_DELAY:-} ]]; then sleep "$AGENT_STEP_DELAY"; fi
  "step_$n"
  echo "step $n ($name): $OUTCOME; $(commit_step "$n" "$name")"
  if [[ ${AGENT_DIE_AFTER:-} == "$n" ]] && once "died-after-$n"; then
    echo "dying after step $n, before its checkpoint" >&2
    exit "$CRASH_EXIT_CODE"
  fi
  note "step $n: $OUTCOME"
  STEP=$n
  mapfile -t DONE_NAMES < <(strings "${STEPS[@]:0:n}")
  save_checkpoint
  if [[ ${AGENT_FRESH_CONTEXT_AFTER:-} == "$n" ]] && once "fresh-after-$n"; then
    echo "context full after step $n: asking for a fresh start"
    note "context full after step $n: ${#NOTES[@]} notes"
    save_checkpoint
    exit "$FRESH_CONTEXT_EXIT_CODE"
  fi
done
echo "all steps done"
