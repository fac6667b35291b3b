# shellcheck shell=bash
# End-to-end: projects in four tiers with git as the record.
#
# A project opens from each tier with its files (hot as it is, warm woken
# with its processes, cool from its snapshot with even uncommitted files,
# cold from git), a Vite project's page answers after each; a missing
# snapshot falls back to cold; two opens at once make one sandbox; commits
# become versions that log, diff, restore (a new version) and remix (a new
# project, the source untouched) work on; the planner's dry run changes
# nothing and its apply demotes the least recently edited warm projects,
# leaving hot ones; a demote killed by SIGKILL at any point is finished by
# the next; the events say what happened. The upstream push and the
# credential are tests/security/92-projects.sh's.
# Sourced by tests/run-e2e, which provides lib.sh.

PRJ_FIXTURE=$(cd "$(dirname "${BASH_SOURCE[0]}")/../fixtures/vite-app" && pwd)

daemon_args() {
  # The planner runs only when asked; three live places, one kept free.
  echo --plan-interval 0 --plan-slots 3 --plan-free 1
}

restart_warrend() {
  # shellcheck disable=SC2046 # words, on purpose
  start_daemon $(daemon_args)
}

prj() { "$WARREN" project "$@"; }

prj_json() { # NAME
  api GET "/v1/projects/$1"
}

prj_tier() { # NAME
  prj_json "$1" | jq -r .tier
}

# Open and return the JSON reply.
prj_open() { # NAME
  prj open "$1" --json || fail "open $1"
}

prj_rm_all() {
  local p
  for p in $(api GET /v1/projects | jq -r '.projects[].name'); do
    prj rm "$p" >/dev/null 2>&1 || true
  done
}

# Only projects' sandboxes stay (the planner counts the others).
others_rm_all() {
  local s
  for s in $("$WARREN" ls --json | jq -r '.[].name' | grep -v '^project-'); do
    "$WARREN" rm -f "$s" >/dev/null 2>&1 || true
  done
}

test_create_ls_inspect_and_bad_input() {
  local out
  prj_rm_all
  out=$(prj create cl-one --image base --label owner=ann) || fail "$out"
  assert_contains "$out" "cl-one: created (cold, template base)"
  out=$(prj ls)
  assert_contains "$out" "NAME"
  assert_line "$(grep cl-one <<<"$out" | awk '{print $1, $2, $3}')" \
    "cl-one cold base" "ls"
  assert_eq ann "$(prj_json cl-one | jq -r .labels.owner)"
  assert_eq /app "$(prj_json cl-one | jq -r .settings.dir)"
  assert_eq true "$(test -d "$WR_ROOT/projects/cl-one.git" && echo true)" \
    "the mirror"
  out=$(prj create cl-one --image base 2>&1) && fail "a second cl-one"
  assert_contains "$out" "already exists"
  out=$(prj create 'Bad Name' --image base 2>&1) && fail "a bad name"
  assert_contains "$out" "not a project name"
  out=$(prj create cl-two --image no-such-template 2>&1) && fail "no template"
  assert_contains "$out" "no template or image"
  out=$(prj open no-such 2>&1) && fail "open of nothing"
  assert_contains "$out" "no project"
  assert_eq 404 "$(api_status GET /v1/projects/no-such)"
  assert_eq 400 "$(api_status POST /v1/projects -d '{"template":"base"}')"
  assert_eq 400 "$(api_status POST /v1/projects/cl-one/open -d '[1]')"
  out=$(prj commit cl-one -m x 2>&1) && fail "commit of a cold project"
  assert_contains "$out" "no sandbox to commit from"
  out=$(prj create cl-three --image base --author 'no brackets' 2>&1) &&
    fail "a bad author"
  assert_contains "$out" "Name <email>"
  prj rm cl-one >/dev/null || fail "rm"
  assert_eq 404 "$(api_status GET /v1/projects/cl-one)"
  assert_eq false "$(test -e "$WR_ROOT/projects/cl-one.git" && echo true ||
    echo false)" "the mirror went"
  assert_daemon_alive
}

test_open_from_each_tier_keeps_the_files() {
  local out sb pid
  prj create ti --image base >/dev/null || fail "create"
  out=$(prj_open ti)
  assert_eq cold "$(jq -r .from <<<"$out")" "a new project opens from cold"
  sb=$(jq -r .sandbox <<<"$out")
  assert_eq project-ti "$sb"
  "$WARREN" exec "$sb" -- sh -c 'echo one > /app/committed.txt' || fail "edit"
  out=$(prj commit ti -m "One file") || fail "commit: $out"
  assert_contains "$out" "ti: version 2"
  assert_eq hot "$(jq -r .from <<<"$(prj_open ti)")" "hot as it is"
  # warm: woken, its processes carry on
  "$WARREN" exec -d --tag keep "$sb" -- sleep 600 >/dev/null || fail "bg"
  pid=$("$WARREN" ps "$sb" --json | jq -r '.[] | select(.tag == "keep") | .pid')
  "$WARREN" pause "$sb" >/dev/null || fail "pause"
  assert_eq warm "$(prj_tier ti)"
  assert_eq warm "$(jq -r .from <<<"$(prj_open ti)")" "warm is woken"
  assert_eq running "$("$WARREN" inspect --json "$sb" | jq -r .state)"
  assert_eq "$pid" "$("$WARREN" ps "$sb" --json |
    jq -r '.[] | select(.tag == "keep") | .pid')" "the same process"
  # cool: the disk, uncommitted files too
  "$WARREN" exec "$sb" -- sh -c 'echo draft > /app/draft.txt' || fail "draft"
  out=$(prj demote ti) || fail "demote: $out"
  assert_contains "$out" "ti: hot -> cool"
  assert_eq cool "$(prj_tier ti)"
  assert_eq 404 "$(api_status GET "/v1/sandboxes/$sb")" "the sandbox went"
  assert_eq cool "$(jq -r .from <<<"$(prj_open ti)")" "from the snapshot"
  assert_eq one "$("$WARREN" exec "$sb" -- cat /app/committed.txt)"
  assert_eq draft "$("$WARREN" exec "$sb" -- cat /app/draft.txt)"
  # cold: git only
  out=$(prj demote ti --to cold) || fail "demote to cold: $out"
  assert_eq cold "$(prj_tier ti)"
  assert_eq null "$(prj_json ti | jq -r .snapshot)"
  assert_eq "" "$("$WARREN" snapshot ls --json |
    jq -r '.[] | select(.name | startswith("project-ti-")) | .name')" \
    "no snapshot of ti is left"
  out=$(prj_open ti)
  assert_eq cold "$(jq -r .from <<<"$out")"
  assert_contains "$(jq -r '.steps[].step' <<<"$out")" "check out"
  assert_eq one "$("$WARREN" exec "$sb" -- cat /app/committed.txt)"
  assert_eq 2 "$("$WARREN" exec "$sb" -- sh -c 'cd /app && git rev-list --count HEAD')" \
    "the history came in"
  "$WARREN" exec "$sb" -- test ! -e /app/draft.txt ||
    fail "an uncommitted file came back from git"
  prj rm ti >/dev/null
}

test_a_missing_snapshot_falls_back_to_cold() {
  local snap out
  prj create ms --image base >/dev/null
  prj_open ms >/dev/null
  "$WARREN" exec project-ms -- sh -c 'echo kept > /app/k.txt'
  prj commit ms -m "k" >/dev/null || fail "commit"
  prj demote ms >/dev/null || fail "demote"
  snap=$(prj_json ms | jq -r .snapshot)
  "$WARREN" snapshot rm "$snap" >/dev/null || fail "rm $snap"
  out=$(prj_open ms)
  assert_eq cold "$(jq -r .from <<<"$out")" "no snapshot: from git, no error"
  assert_eq kept "$("$WARREN" exec project-ms -- cat /app/k.txt)"
  prj rm ms >/dev/null
}

test_two_opens_at_once_make_one_sandbox() {
  local a b
  prj create two --image base >/dev/null
  prj open two --json >"$WR_RUN/open-a.json" &
  a=$!
  prj open two --json >"$WR_RUN/open-b.json" &
  b=$!
  wait "$a" || fail "first open"
  wait "$b" || fail "second open"
  assert_eq "$(jq -r .sandbox "$WR_RUN/open-a.json")" \
    "$(jq -r .sandbox "$WR_RUN/open-b.json")"
  assert_eq 1 "$("$WARREN" ls --json |
    jq '[.[] | select(.name == "project-two")] | length')"
  assert_eq 1 "$("$WARREN" exec project-two -- sh -c 'cd /app && git rev-list --count HEAD')" \
    "one first commit"
  prj rm two >/dev/null
}

test_versions_log_diff_restore_remix() {
  local out id
  prj create ver --image base --author 'Ann Dev <ann@example.test>' >/dev/null
  prj_open ver >/dev/null
  out=$(prj commit ver -m "nothing yet") || fail "$out"
  assert_contains "$out" "nothing to commit"
  "$WARREN" exec project-ver -- sh -c 'echo v2 > /app/f.txt'
  prj commit ver -m "Add f" >/dev/null || fail "commit 2"
  "$WARREN" exec project-ver -- sh -c 'echo v3 > /app/f.txt; echo new > /app/g.txt'
  prj commit ver -m "Change f, add g" >/dev/null || fail "commit 3"
  out=$(prj log ver)
  assert_contains "$out" "Change f, add g"
  assert_eq 3 "$(prj log ver --json | jq length)"
  assert_eq "Ann Dev" "$(prj log ver --json | jq -r '.[0].author')"
  out=$(prj diff ver 2 3)
  assert_contains "$out" "+v3"
  assert_contains "$out" "g.txt"
  out=$(prj diff ver 9 2>&1) && fail "a version that is not"
  assert_contains "$out" "no version 9"
  out=$(prj diff ver -- '--output=/tmp/x' 2>&1) && fail "an option as a revision"
  out=$(prj restore ver 2) || fail "restore: $out"
  assert_contains "$out" "ver: version 4"
  assert_eq v2 "$("$WARREN" exec project-ver -- cat /app/f.txt)"
  "$WARREN" exec project-ver -- test ! -e /app/g.txt ||
    fail "a file of version 3 stayed"
  assert_eq "Restore version 2" "$(prj log ver --json | jq -r '.[0].subject' |
    cut -c1-17)"
  assert_eq 4 "$(prj log ver --json | jq length)" "nothing was rewritten"
  # remix: a new project from the mirror, the source untouched
  id=$("$WARREN" inspect --json project-ver | jq -r .id)
  "$WARREN" pause project-ver >/dev/null
  out=$(prj remix ver ver-copy --label owner=bob) || fail "remix: $out"
  assert_eq paused "$("$WARREN" inspect --json project-ver | jq -r .state)" \
    "the source stays paused"
  assert_eq "$id" "$("$WARREN" inspect --json project-ver | jq -r .id)"
  assert_eq cold "$(prj_tier ver-copy)"
  assert_eq bob "$(prj_json ver-copy | jq -r .labels.owner)"
  assert_eq 4 "$(prj log ver-copy --json | jq length)"
  prj_open ver-copy >/dev/null
  assert_eq v2 "$("$WARREN" exec project-ver-copy -- cat /app/f.txt)"
  prj rm ver >/dev/null
  prj rm ver-copy >/dev/null
}

# Four projects edited in order (pl-1 the oldest), all paused but pl-4.
plan_setup() {
  local i
  prj_rm_all
  others_rm_all
  for i in 1 2 3 4; do
    prj create "pl-$i" --image base >/dev/null || fail "create pl-$i"
    prj_open "pl-$i" >/dev/null
    "$WARREN" exec "project-pl-$i" -- sh -c "echo $i > /app/n.txt"
    prj commit "pl-$i" -m "edit $i" >/dev/null || fail "commit pl-$i"
    sleep 0.05
  done
  for i in 1 2 3; do "$WARREN" pause "project-pl-$i" >/dev/null; done
}

test_planner_dry_run_then_apply() {
  local out
  plan_setup
  # 4 live > 3 - 1: two go, the least recently edited warm ones first.
  out=$("$WARREN" plan)
  assert_eq "pl-1: warm -> cool (snapshot the disk, delete the sandbox)
pl-2: warm -> cool (snapshot the disk, delete the sandbox)" "$out"
  assert_eq warm "$(prj_tier pl-1)" "a dry run changes nothing"
  out=$("$WARREN" plan --apply) || fail "apply: $out"
  assert_contains "$out" "pl-1: warm -> cool (snapshot the disk, delete the sandbox): done"
  assert_eq cool "$(prj_tier pl-1)"
  assert_eq cool "$(prj_tier pl-2)"
  assert_eq warm "$(prj_tier pl-3)"
  assert_eq hot "$(prj_tier pl-4)" "hot is never moved"
  assert_contains "$("$WARREN" plan)" "nothing to do"
  # retention: a month later the cool ones go cold
  out=$("$WARREN" plan --now $(($(date +%s%3N) + 31 * 86400000)))
  assert_contains "$out" "pl-1: cool -> cold (snapshot expired, reopen from git)"
  assert_contains "$out" "pl-2: cool -> cold (snapshot expired, reopen from git)"
  out=$("$WARREN" plan --json --now $(($(date +%s%3N) + 31 * 86400000)))
  assert_eq 3 "$(jq .settings.slots <<<"$out")"
  assert_eq 1 "$(jq .settings.free <<<"$out")"
  assert_eq 1 "$(jq -r .from <<<"$(prj_open pl-1)" | grep -c cool)"
  prj_rm_all
}

test_a_demote_killed_at_any_point_is_finished_by_the_next() {
  local delay snaps
  for delay in 0 0.01 0.02 0.03 0.04 0.06 0.1 0.2; do
    prj create kd --image base >/dev/null || fail "create"
    prj_open kd >/dev/null
    "$WARREN" exec project-kd -- sh -c 'echo safe > /app/s.txt'
    prj commit kd -m s >/dev/null || fail "commit"
    "$WARREN" exec project-kd -- sh -c 'echo draft > /app/d.txt'
    "$WARREN" pause project-kd >/dev/null
    prj demote kd >/dev/null 2>&1 &
    sleep "$delay"
    kill_daemon
    wait 2>/dev/null || true
    restart_warrend
    prj demote kd >/dev/null || fail "rerun after a kill at ${delay}s"
    assert_eq cool "$(prj_tier kd)" "after ${delay}s"
    assert_eq 404 "$(api_status GET /v1/sandboxes/project-kd)"
    snaps=$("$WARREN" snapshot ls --json |
      jq -r '[.[] | select(.name | startswith("project-kd-"))] | length')
    assert_eq 1 "$snaps" "one snapshot after a kill at ${delay}s"
    prj_open kd >/dev/null
    assert_eq draft "$("$WARREN" exec project-kd -- cat /app/d.txt)" \
      "nothing lost after a kill at ${delay}s"
    prj rm kd >/dev/null || fail "rm"
  done
  assert_daemon_alive
}

test_events_say_what_happened() {
  local out
  prj create ev --image base >/dev/null
  prj_open ev >/dev/null
  "$WARREN" exec project-ev -- sh -c 'echo e > /app/e.txt'
  prj commit ev -m e >/dev/null
  prj demote ev >/dev/null
  out=$("$WARREN" events --json 2>/dev/null | jq -c 'select(.project == "ev")')
  assert_contains "$out" '"type":"opened"'
  assert_contains "$out" '"from":"cold"'
  assert_contains "$out" '"type":"committed"'
  assert_contains "$out" '"type":"demoted"'
  prj rm ev >/dev/null
}

# A Vite project: its page answers after an open from each tier, with the
# project's edit in it.
prj_page() { # SANDBOX
  "$WARREN" exec "$1" -- curl -fsS --noproxy '*' --max-time 5 \
    "http://127.0.0.1:5173/"
}

test_vite_project_answers_from_each_tier() {
  local out t
  command -v npm >/dev/null || skip "npm is not installed on the host"
  timeout 60 npm view vite@5 version >/dev/null 2>&1 ||
    skip "npm on the host cannot reach its registry"
  "$WARREN" policy init balanced >/dev/null
  "$WARREN" image build vite -f "$PRJ_FIXTURE/Dockerfile" "$PRJ_FIXTURE" \
    >"$WR_RUN/prj-vite.out" 2>&1 || fail "build: $(tail "$WR_RUN/prj-vite.out")"
  prj create web --image vite >/dev/null || fail "create"
  out=$(prj_open web)
  assert_contains "$(prj_page project-web)" 'id="root"'
  "$WARREN" exec project-web -- sh -c \
    'cd /app && sed -i "s|<title>|<title>warren-edit |" index.html' ||
    fail "edit"
  prj commit web -m "Edit the title" >/dev/null || fail "commit"
  "$WARREN" pause project-web >/dev/null
  for t in warm cool cold; do
    case $t in
    cool) prj demote web >/dev/null || fail "demote" ;;
    cold) prj demote web --to cold >/dev/null || fail "demote to cold" ;;
    esac
    out=$(prj_open web)
    assert_eq "$t" "$(jq -r .from <<<"$out")"
    echo "open from $t: $(jq -r .ms <<<"$out") ms"
    assert_contains "$(prj_page project-web)" "warren-edit" "page after $t"
    "$WARREN" pause project-web >/dev/null
  done
  "$WARREN" exec project-web -- test -d /app/node_modules/vite ||
    fail "the install left no vite"
  prj rm web >/dev/null
}

# A hot project whose sandbox someone removed opens from git with every
# commit, not from the older snapshot it was once made from.
test_a_removed_sandbox_opens_from_git_not_an_old_snapshot() {
  local out
  prj create rs --image base >/dev/null
  prj_open rs >/dev/null
  "$WARREN" exec project-rs -- sh -c 'echo one > /app/f.txt'
  prj commit rs -m one >/dev/null
  prj demote rs >/dev/null
  prj_open rs >/dev/null # from the snapshot: f.txt is "one"
  "$WARREN" exec project-rs -- sh -c 'echo two > /app/f.txt'
  prj commit rs -m two >/dev/null
  "$WARREN" rm -f project-rs >/dev/null
  assert_eq cold "$(prj_tier rs)" "no sandbox, no snapshot of its last edit"
  out=$(prj_open rs)
  assert_eq cold "$(jq -r .from <<<"$out")"
  assert_eq two "$("$WARREN" exec project-rs -- cat /app/f.txt)"
  prj rm rs >/dev/null
}

# A warm pool of the project's template serves its cold open.
test_a_pool_of_the_template_serves_a_cold_open() {
  local out
  "$WARREN" pool set base --size 1 >/dev/null
  wait_until 60 sh -c "'$WARREN' pool ls --json | jq -e '.[] | select(.image == \"base\") | .ready == 1' >/dev/null" ||
    fail "the pool did not fill"
  prj create po --image base --label team=blue >/dev/null
  out=$(prj_open po)
  assert_contains "$(jq -r '.steps[].step' <<<"$out")" "sandbox from the warm pool"
  assert_eq po "$("$WARREN" inspect --json project-po | jq -r '.labels["warren.project"]')"
  assert_eq blue "$("$WARREN" inspect --json project-po | jq -r .labels.team)"
  assert_eq 1 "$("$WARREN" exec project-po -- sh -c 'cd /app && git rev-list --count HEAD')"
  "$WARREN" pool rm base >/dev/null
  prj rm po >/dev/null
}

# More opens at once than warrend runs operations (16): the rest wait
# their turn and every one gets its sandbox.
test_many_projects_open_at_once() {
  local i pids=()
  for i in $(seq 1 20); do
    prj create "many-$i" --image base >/dev/null || fail "create many-$i"
  done
  for i in $(seq 1 20); do
    prj open "many-$i" --json >"$WR_RUN/many-$i.json" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || fail "open many-$((i + 1)): $(cat "$WR_RUN/many-$((i + 1)).json")"
  done
  for i in $(seq 1 20); do
    assert_eq "project-many-$i" "$(jq -r .sandbox "$WR_RUN/many-$i.json")"
    prj rm "many-$i" >/dev/null || fail "rm many-$i"
  done
  assert_daemon_alive
}
