# shellcheck shell=bash
# Shared by scripts/compose-smoke and scripts/cluster-chaos; sourced, not
# run. Every Docker and Compose call is bounded by a deadline, so no step can
# hang the caller.
#
# The caller sets PROJECT (the compose project name) and WORK (a scratch
# directory) before calling the functions below.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T0=$SECONDS

say() { printf '\n==> [%3ds] %s\n' $((SECONDS - T0)) "$*" >&2; }
info() { printf '    %s\n' "$*" >&2; }
bad() { printf '\nFAIL [%3ds]: %s\n' $((SECONDS - T0)) "$*" >&2; }
fail() {
  bad "$@"
  exit 1
}

# Compose v2 (`docker compose`) or v1 (`docker-compose`), whichever works.
if docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null 2>&1 && docker-compose version >/dev/null 2>&1; then
  COMPOSE=(docker-compose)
else
  echo "neither 'docker compose' nor 'docker-compose' works" >&2
  exit 1
fi

# dc runs compose on the project with a deadline of DC_TIMEOUT seconds
# (default 120).
dc() {
  timeout --kill-after=10 "${DC_TIMEOUT:-120}" "${COMPOSE[@]}" -f "$ROOT/compose.yaml" -p "$PROJECT" "$@"
}

# dk runs docker with a deadline of 60 seconds.
dk() { timeout --kill-after=10 60 docker "$@"; }

# wait_for SECONDS DESCRIPTION COMMAND...: runs COMMAND every second until it
# succeeds; fails the script when SECONDS have passed.
wait_for() {
  local secs=$1 what=$2 start=$SECONDS
  shift 2
  # A subshell, so a signal's trap (the caller's teardown) does not run
  # with its output sent to /dev/null.
  until ("$@") >/dev/null 2>&1; do
    if ((SECONDS - start >= secs)); then
      fail "$what: not done after ${secs}s"
    fi
    sleep 1
  done
  info "$what: done in $((SECONDS - start))s"
}

# healthy SERVICE: the NATS node's /healthz says ok, through its monitoring
# port published on 127.0.0.1. /healthz is ok once the node is connected to
# the JetStream meta leader and every stream and consumer replica on it is
# current.
healthy() {
  local addr
  addr=$(DC_TIMEOUT=20 dc port "$1" 8222 2>/dev/null | tail -n1) || return 1
  [[ $addr == *:* && $addr != *:0 ]] || return 1
  curl -fsS --max-time 3 "http://$addr/healthz" 2>/dev/null | grep -q '"ok"'
}

all_healthy() { healthy nats1 && healthy nats2 && healthy nats3; }

# cid SERVICE [N]: the id of the Nth (default first) container of SERVICE.
cid() { DC_TIMEOUT=20 dc ps -q "$1" | sed -n "${2:-1}p"; }

# clients SERVICE: how many client connections the NATS node has.
clients() {
  local addr
  addr=$(DC_TIMEOUT=20 dc port "$1" 8222 2>/dev/null | tail -n1)
  curl -fsS --max-time 3 "http://$addr/connz" 2>/dev/null | grep -o '"num_connections": *[0-9]*' | grep -o '[0-9]*$' || echo '?'
}

# connections: how many clients each node has (diagnostics).
connections() { echo "nats1:$(clients nats1) nats2:$(clients nats2) nats3:$(clients nats3)"; }

# The roles' seeds and the NATS users of compose.yaml (never committed).
export PLANBUS_AUTH_DIR=${PLANBUS_AUTH_DIR:-$ROOT/deploy/nats/auth}

# auth_init writes the seed of every role and the NATS users block into
# PLANBUS_AUTH_DIR with the image's `planner auth init` (it keeps seeds that
# exist), and lets the services read their seed: the seeds are 0600, so
# the services run as their owner. Run as root, the seeds the services use
# go to the image's user 65532 instead, so no container runs as root.
auth_init() {
  say "writing the roles' seeds and NATS users: planner auth init $PLANBUS_AUTH_DIR"
  mkdir -p "$PLANBUS_AUTH_DIR"
  dk run --rm --user "$(id -u):$(id -g)" -v "$PLANBUS_AUTH_DIR:/auth" --entrypoint /bin/planner "$PLANBUS_IMAGE" \
    auth init /auth | sed 's/^/    /' >&2 || fail "planner auth init failed"
  if (($(id -u) == 0)); then
    chown 65532:65532 "$PLANBUS_AUTH_DIR"/{planner,dispatcher,worker,client}.nk
    export PLANBUS_UID=65532 PLANBUS_GID=65532
  else
    PLANBUS_UID=$(id -u) PLANBUS_GID=$(id -g)
    export PLANBUS_UID PLANBUS_GID
  fi
}

# up brings the stack up on fresh volumes, with authentication (auth_init).
# nats1's client port is published on a free loopback port, so parallel
# projects do not collide.
up() {
  auth_init
  say "starting the stack: project $PROJECT (${COMPOSE[*]})"
  PLANBUS_NATS_PUBLISH=127.0.0.1: dc up -d --no-build
  say "waiting for the three NATS nodes to report healthy"
  wait_for 90 "nats1, nats2 and nats3 healthy" all_healthy
}

# down removes the project's containers, network and volumes.
down() {
  say "tearing down project $PROJECT (down -v)"
  DC_TIMEOUT=90 dc down -v --remove-orphans -t 5 >/dev/null 2>&1 ||
    info "compose down failed; remove leftovers with: ${COMPOSE[*]} -p $PROJECT down -v"
}

# diagnose prints what helps after a failure: container states and the
# recent logs of every service.
diagnose() {
  say "diagnostics for project $PROJECT"
  DC_TIMEOUT=20 dc ps >&2 || true
  DC_TIMEOUT=30 dc logs --no-color --tail=25 >&2 2>&1 || true
  # The tool queue and its consumers, as the admin sees them: a call
  # released and never delivered shows as a message pending or a consumer
  # whose delivered sequence passed it. Needs the nats CLI and URLS.
  if [ -n "${URLS:-}" ] && command -v nats >/dev/null 2>&1 && [ -f "$PLANBUS_AUTH_DIR/admin.nk" ]; then
    local n=(nats --server "$URLS" --nkey "$PLANBUS_AUTH_DIR/admin.nk" --inbox-prefix _INBOX_admin --timeout 5s)
    timeout 20 "${n[@]}" stream info PLANBUS_TOOLS >&2 2>&1 || true
    timeout 30 "${n[@]}" consumer report PLANBUS_TOOLS >&2 2>&1 || true
  fi
}

# planner NAME SECONDS ARGS...: runs `planner ARGS` in a one-off container of
# the client service (the client role), stdout to $WORK/NAME.out and stderr
# to $WORK/NAME.err; sets RC (124 when SECONDS passed first).
planner() {
  local name=$1 secs=$2
  shift 2
  RC=0
  DC_TIMEOUT=$secs dc run -T --rm client "$@" </dev/null >"$WORK/$name.out" 2>"$WORK/$name.err" || RC=$?
}

# planner_bg NAME SECONDS ARGS...: like planner, in the background, its
# stdin the file PLANNER_STDIN (default none); sets PLANNER_PID.
# planner_wait NAME collects RC.
planner_bg() {
  local name=$1 secs=$2 stdin=${PLANNER_STDIN:-/dev/null}
  shift 2
  (
    rc=0
    DC_TIMEOUT=$secs dc run -T --rm client "$@" <"$stdin" >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
    echo "$rc" >"$WORK/$name.rc"
  ) &
  PLANNER_PID=$!
}

planner_wait() {
  wait "$PLANNER_PID" || true
  RC=$(cat "$WORK/$1.rc" 2>/dev/null || echo 125)
}

# show NAME: the planner's progress, without Compose's own lines.
show() { grep -v -e '^Creating' -e '^[0-9]*$' "$WORK/$1.err" | sed 's/^/      /' >&2 || true; }

# started NAME TOOL: the progress of NAME shows TOOL started.
started() { grep -Eq "^ *[0-9.]+(µs|ms|s) +$2 +started" "$WORK/$1.err"; }

# expect_success NAME: RC is 0 and the last stdout line is an execution
# result with "success":true. Says what is wrong and returns 1 if not; call
# show first, so the planner's progress is on screen.
expect_success() {
  local name=$1 last ms
  last=$(tail -n1 "$WORK/$name.out" 2>/dev/null || true)
  if ((RC != 0)); then
    ((RC != 124)) || info "the planner did not finish before its deadline"
    bad "$name: planner exited $RC, want 0"
    return 1
  fi
  if command -v jq >/dev/null 2>&1; then
    jq -e '.success == true' <<<"$last" >/dev/null 2>&1 || {
      bad "$name: last stdout line is not JSON with \"success\":true: $last"
      return 1
    }
  elif [[ $last != \{*\} || $last != *'"success":true'* ]]; then
    bad "$name: last stdout line is not JSON with \"success\":true: $last"
    return 1
  fi
  ms=$(grep -o '"durationMs":[0-9.]*}$' <<<"$last" | grep -o '[0-9.]*' || true)
  info "$name: exit 0, success true${ms:+, plan took ${ms} ms}"
}
