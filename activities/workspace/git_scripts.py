"""The shell scripts that keep a workspace in git and put it back, and what their output means.

Everything in the workspace is the agent's and may be hostile: its `.git` (hooks, an fsmonitor,
a broken index), symlinks, huge files, odd names. So every git call runs with hooks, the
fsmonitor, auto-gc and signing off; a keep's push reads none of the agent's git config but its
credential entries (it cannot be sent elsewhere: `url.*.pushInsteadOf`, `remote.*.pushurl`), and
the worker believes it only once the origin holds it (activities/workspace/origin_refs.py); the
agent's own index, HEAD, branch and commits are never touched (an index of its own, `write-tree`,
`commit-tree`); what would be hashed is measured before it is, and what would be pushed before
it is; git's own output goes to a file of which only a tail is shown. Each script prints one
line `overnight-workspace <word> ...`.

The kept commit: its tree is the workspace, its first parent the agent's HEAD then (none on an
unborn branch), its second a root commit whose tree holds `checkpoint.json`, the checkpoint file
as it was just before the workspace was read (none when there was no usable one). Its message
names both, and the run's base, in trailers; it holds nothing else (no secret).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime

from activities.sandbox_base.setup import APP_DIR

MARK = "overnight-workspace"
# Where a restore notes it was done, so a retried create does not undo the agent's work.
RESTORED_MARK = "/workspace/.overnight/workspace-restored"
CHECKPOINT_ENTRY = "checkpoint.json"
# The keeps' own index (never the agent's), kept between keeps in the sandbox.
KEEP_INDEX = "/workspace/.overnight/workspace.index"
# What a keep's push takes of the sandbox's own git config (system and global): credentials
# (helpers, and headers some hosts authenticate by) and which repositories git trusts (a local
# origin another user owns), nothing that says where a push goes.
KEPT_KEYS = r"^(credential\..*|http\.(.*\.)?extraheader|safe\.directory)$"
# git's words shown at most (a tail; the rest is in the sandbox's temporary file, then gone).
TAIL_BYTES = 600

_PRELUDE = f"""set -u
export GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false SSH_ASKPASS=/bin/false
export GIT_OPTIONAL_LOCKS=0
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_CONFIG_PARAMETERS
export GIT_AUTHOR_NAME=overnight GIT_AUTHOR_EMAIL=overnight@localhost
export GIT_COMMITTER_NAME=overnight GIT_COMMITTER_EMAIL=overnight@localhost
g() {{
  git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.untrackedCache=false \\
    -c gc.auto=0 -c maintenance.auto=false -c commit.gpgSign=false -c core.splitIndex=false \\
    -c submodule.recurse=false -c push.recurseSubmodules=no -c protocol.ext.allow=never "$@"
}}
log=$(mktemp) || exit 1
say() {{ printf '{MARK} %s\\n' "$*"; }}
tail_of() {{ tail -c {TAIL_BYTES} "$log" | tr '\\n\\r\\t' '   '; }}
cd {APP_DIR} 2>/dev/null || {{ say failed "no clone at {APP_DIR}"; exit 0; }}
if [ -L .git ]; then say failed ".git is a symlink"; exit 0; fi
"""


def keep_script(
    *,
    repo: str,
    ref: str,
    message: str,
    at: datetime,
    max_bytes: int,
    checkpoint_path: str,
    max_checkpoint_bytes: int,
    previous: str | None,
    branch_work: bool = False,
) -> str:
    """Commit the workspace and push it to `ref` of `repo` (within `max_bytes` of new
    objects). Prints `pushed <commit> <bytes> <has checkpoint 0|1>`, `over <bytes> <where>`
    or `failed <why>`.

    `branch_work`: the commit is the run's work for its branch (a finish's push): no
    checkpoint parent, the agent's HEAD itself when the workspace holds nothing it did not
    commit, and no forced push (the branch moves only forward: a commit a person or another
    push put there is never thrown away)."""
    when = f"@{int(at.timestamp())} +0000"
    prev = shlex.quote(previous or "")
    keeps_checkpoint = "0" if branch_work else "1"
    same_head = "1" if branch_work else "0"
    force = "" if branch_work else "+"
    return (
        _PRELUDE
        + f"""idx={KEEP_INDEX}
mkdir -p "$(dirname "$idx")"
push=""
trap 'rm -f "$idx.lock" "$log"; [ -z "$push" ] || rm -rf -- "$push"' EXIT
export GIT_AUTHOR_DATE={shlex.quote(when)} GIT_COMMITTER_DATE={shlex.quote(when)}
cp={shlex.quote(checkpoint_path)}
cpc=""
if [ {keeps_checkpoint} = 1 ] && [ -f "$cp" ] && [ ! -L "$cp" ] &&
   [ "$(stat -c %s -- "$cp")" -le {max_checkpoint_bytes} ]; then
  blob=$(g hash-object -w --no-filters -- "$cp" 2>>"$log") &&
  tree=$(printf '100644 blob %s\\t{CHECKPOINT_ENTRY}\\n' "$blob" | g mktree 2>>"$log") &&
  cpc=$(printf 'overnight: checkpoint\\n' | g commit-tree "$tree" 2>>"$log") || cpc=""
fi
head=$(g rev-parse --verify -q 'HEAD^{{commit}}' 2>>"$log") || head=""
src=$(g rev-parse --git-path index 2>>"$log") || src=""
# Our own index, kept between keeps (what it knows of each file's stat spares rehashing it);
# the first keep starts from a copy of the agent's. A link, or one git cannot read, is
# started afresh (empty: every file is then measured, and hashed, as new).
if [ -L "$idx" ] || [ ! -f "$idx" ]; then
  rm -f "$idx"
  if [ -n "$src" ] && [ -f "$src" ] && [ ! -L "$src" ]; then cp -- "$src" "$idx" 2>/dev/null; fi
fi
if ! GIT_INDEX_FILE="$idx" g ls-files --stage >/dev/null 2>>"$log"; then rm -f "$idx"; fi
# What `add` would hash (changed and untracked files, .gitignore honoured), measured first.
new=$(GIT_INDEX_FILE="$idx" g ls-files -z --others --modified --exclude-standard 2>>"$log" |
  xargs -0 -r stat -c %s -- 2>/dev/null | awk '{{s+=$1}} END {{printf "%.0f", s}}')
if [ "${{new:-0}}" -gt {max_bytes} ]; then say over "$new" "files"; exit 0; fi
GIT_INDEX_FILE="$idx" g add -A -- . >>"$log" 2>&1 || {{ say failed "git add: $(tail_of)"; exit 0; }}
tree=$(GIT_INDEX_FILE="$idx" g write-tree 2>>"$log") ||
  {{ say failed "write-tree: $(tail_of)"; exit 0; }}
parents=""
[ -n "$head" ] && parents="-p $head"
[ -n "$cpc" ] && parents="$parents -p $cpc"
msg={shlex.quote(message)}
msg="$msg

Overnight-Head: ${{head:-none}}
Overnight-Checkpoint: ${{cpc:-none}}"
commit=""
# The branch's work with nothing left uncommitted is the agent's own HEAD.
if [ {same_head} = 1 ] && [ -n "$head" ] &&
   [ "$tree" = "$(g rev-parse --verify -q "$head^{{tree}}" 2>>"$log")" ]; then commit=$head; fi
[ -n "$commit" ] || commit=$(printf '%s\\n' "$msg" | g commit-tree "$tree" $parents 2>>"$log") ||
  {{ say failed "commit-tree: $(tail_of)"; exit 0; }}
# What the push sends at most: objects neither the remote's branches nor the last kept hold.
# (The last kept commit is no ancestor: its tree is named too, or its objects would count.)
not="--remotes"
prev={prev}
if [ -n "$prev" ] && g cat-file -e "$prev^{{commit}}" 2>/dev/null; then
  not="$not $prev $prev^{{tree}}"
fi
bytes=$(g rev-list --objects "$commit" --not $not 2>>"$log" | cut -d' ' -f1 |
  g cat-file --batch-check='%(objectsize:disk)' 2>>"$log" |
  awk '{{s+=$1}} END {{printf "%.0f", s}}')
if [ "${{bytes:-0}}" -gt {max_bytes} ]; then say over "$bytes" "push"; exit 0; fi
# The push goes where the worker says, whatever the agent configured: from a scratch git dir
# that borrows the workspace's objects (the clone's .git/config, and any url.*.insteadOf,
# url.*.pushInsteadOf or remote.*.pushurl in it, is never read), with no system config and a
# global one of ours holding only the credential (and safe.directory) entries of the sandbox's.
objects=$(g rev-parse --path-format=absolute --git-common-dir 2>>"$log")/objects ||
  {{ say failed "git objects: $(tail_of)"; exit 0; }}
# (Made by hand, not `git init`: the same four entries in a tenth of the time.)
push=$(mktemp -d) && mkdir -p "$push/objects/info" "$push/refs" &&
  printf 'ref: refs/heads/none\\n' > "$push/HEAD" &&
  printf '[core]\\n\\tbare = true\\n' > "$push/config" &&
  printf '%s\\n' "$objects" > "$push/objects/info/alternates" ||
  {{ say failed "no scratch folder for the push"; exit 0; }}
: > "$push/global.gitconfig"
GIT_DIR="$push" g config -z --get-regexp '{KEPT_KEYS}' 2>/dev/null |
  while IFS= read -r -d '' entry; do
    key=${{entry%%$'\\n'*}}; value=true
    [ "$key" != "$entry" ] && value=${{entry#*$'\\n'}}
    git config --file "$push/global.gitconfig" --add "$key" "$value" 2>>"$log"
  done
GIT_DIR="$push" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL="$push/global.gitconfig" \\
  g push --quiet --no-verify --no-recurse-submodules -- {shlex.quote(repo)} \\
  "{force}$commit:{ref}" >>"$log" 2>&1 || {{ say failed "git push: $(tail_of)"; exit 0; }}
say pushed "$commit" "${{bytes:-0}}" "$([ -n "$cpc" ] && echo 1 || echo 0)"
"""
    )


def restore_script(
    *,
    repo: str,
    ref: str,
    commit: str,
    rewind: bool,
    checkpoint_path: str,
) -> str:
    """Put the kept `commit` back after a fresh clone: the branch at its first parent (the
    agent's HEAD then, unpushed commits and all) unless the remote's branch is already past it
    (a rewind goes back all the same), the working tree from its tree, the index the branch's.
    A rewind writes the checkpoint from it too. Prints `restored [checkpoint]`, `skipped <why>`
    or `failed <why>`; once per sandbox (a retried create finds the mark and says it again)."""
    c = shlex.quote(commit)
    return (
        _PRELUDE
        + f"""trap 'rm -f "$log"' EXIT
# A retried create: restored already (the mark says whether the checkpoint was too).
if [ -e {RESTORED_MARK} ]; then say restored $(head -c 20 {RESTORED_MARK}); exit 0; fi
g fetch --quiet --no-tags --no-recurse-submodules -- {shlex.quote(repo)} \\
  "+{ref}:{ref}" >>"$log" 2>&1 || {{ say failed "git fetch: $(tail_of)"; exit 0; }}
got=$(g rev-parse --verify -q "{ref}^{{commit}}") || got=""
if [ "$got" != {c} ]; then say failed "{ref} is $got, not the kept commit"; exit 0; fi
body=$(g log -1 --format=%B {c})
head=$(printf '%s\\n' "$body" | sed -n 's/^Overnight-Head: //p' | head -n 1)
cpc=$(printf '%s\\n' "$body" | sed -n 's/^Overnight-Checkpoint: //p' | head -n 1)
now=$(g rev-parse --verify -q 'HEAD^{{commit}}') || now=""
if [ "$head" != none ] && [ -n "$head" ] && [ "$head" != "$now" ]; then
  if [ -n "$now" ] && ! g merge-base --is-ancestor "$now" "$head" 2>/dev/null &&
     [ {int(rewind)} = 0 ]; then
    say skipped "the branch has moved past the kept workspace's commit"; exit 0
  fi
  g reset --quiet --hard "$head" >>"$log" 2>&1 || {{ say failed "reset: $(tail_of)"; exit 0; }}
fi
g read-tree -u --reset {c} >>"$log" 2>&1 || {{ say failed "read-tree: $(tail_of)"; exit 0; }}
# The index is the branch's again: what the agent had not committed shows as not committed.
if g rev-parse --verify -q HEAD >/dev/null; then g reset --quiet >>"$log" 2>&1
else g read-tree --empty >>"$log" 2>&1; fi
written=""
if [ {int(rewind)} = 1 ] && [ -n "$cpc" ] && [ "$cpc" != none ]; then
  cp={shlex.quote(checkpoint_path)}
  g cat-file blob "$cpc:{CHECKPOINT_ENTRY}" > "$cp.overnight-tmp" 2>>"$log" &&
    mv -f -- "$cp.overnight-tmp" "$cp" && written=checkpoint
fi
mkdir -p "$(dirname {RESTORED_MARK})" && printf '%s' "$written" > {RESTORED_MARK}
say restored $written
"""
    )


@dataclass(frozen=True)
class ScriptSaid:
    word: str
    args: list[str]
    text: str


def said(stdout: str) -> ScriptSaid | None:
    """The script's last `overnight-workspace` line (None: it printed none)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARK + " "):
            rest = line[len(MARK) + 1 :]
            word, _, text = rest.partition(" ")
            return ScriptSaid(word=word, args=text.split(), text=text)
    return None
