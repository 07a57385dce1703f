#!/bin/sh
# worker.sh: a planbus tool worker made of the stock nats CLI (v0.5.0), jq,
# coreutils and this POSIX shell script. It serves one skill, one call at a
# time, following docs/protocol.md:
#
#   1. puts the skill's manifest in the KV bucket planbus-skills;
#   2. makes sure the skill's durable pull consumer skill-<skill> exists on
#      the stream PLANBUS_TOOLS (creating it as the Go worker would);
#   3. pulls one call (nats consumer next --no-ack), runs HANDLER on its
#      input with the call's deadline, sends +WPI heartbeats while it runs
#      and watches planbus.cancel.<planId> for a cancel whose token matches
#      the call's cancelDigest;
#   4. publishes the result to JetStream on planbus.results.<planId> with
#      the call's Nats-Msg-Id, waits for the stream's acknowledgement, and
#      only then acknowledges the call.
#
# Usage: worker.sh MANIFEST HANDLER
#
# HANDLER is any executable. It reads the call's input (a JSON object) on
# stdin and gets PLANBUS_PLAN_ID, PLANBUS_REQUEST_ID, PLANBUS_TOOL_ID,
# PLANBUS_SKILL, PLANBUS_ATTEMPT, PLANBUS_IDEMPOTENCY_KEY and
# PLANBUS_TIMEOUT_MS in its environment. Exit 0 with one JSON value on
# stdout (or nothing) is success; any other exit is a failure, described by
# a JSON object {"code", "message", "category"} on stdout if it prints one
# (else TOOL_FAILED, category internal, with the end of its stderr). On a
# timeout or a cancel it gets SIGTERM, and SIGKILL 2s later.
#
# Environment:
#   NATS_URL, NATS_NKEY, NATS_CREDS   read by the nats CLI (with planner serve
#                                     --auth: NATS_NKEY=<data-dir>/auth/worker.nk)
#   PLANBUS_WORKER_ID     the workerId in results and events (cli-<host>-<pid>)
#   PLANBUS_ACK_WAIT      AckWait of the consumer, if this worker creates it (30s)
#   PLANBUS_MAX_DELIVER   deliveries before a call is reported WORKER_CRASH (5)
#   PLANBUS_OUTPUT_CAP    largest output in bytes (1048576)
#
# It stops after the call it holds when it gets SIGTERM or SIGINT.
set -u

die() {
	echo "cli-worker: $*" >&2
	exit 2
}

[ $# -eq 2 ] || die "usage: worker.sh MANIFEST HANDLER"
manifest=$1
handler=$2
for tool in nats jq sha256sum base64 od; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is not on PATH"
done
[ -f "$handler" ] && [ -x "$handler" ] || die "handler $handler is not an executable file"
skill=$(jq -er '.name | select(type == "string" and test("^[A-Za-z0-9_-]{1,64}$"))' "$manifest" 2>/dev/null) ||
	die "manifest $manifest: want a JSON object whose name matches ^[A-Za-z0-9_-]{1,64}\$"

worker_id=${PLANBUS_WORKER_ID:-cli-$(uname -n)-$$}
ack_wait=${PLANBUS_ACK_WAIT:-30s}
max_deliver=${PLANBUS_MAX_DELIVER:-5}
output_cap=${PLANBUS_OUTPUT_CAP:-1048576}
stream=PLANBUS_TOOLS
consumer=skill-$skill

# Replies (JetStream API answers, publish acknowledgements, pulled calls)
# come to the worker role's own inbox prefix: with authorization on, that
# is the only inbox a worker may receive on.
natsw() {
	nats --inbox-prefix _INBOX_worker "$@"
}

log() {
	echo "$(date -u +%H:%M:%S) $worker_id $skill: $*" >&2
}

tmp=$(mktemp -d) || die "cannot make a temporary directory"
trap 'rm -rf "$tmp"' EXIT
stopping=0
trap 'stopping=1' TERM INT

# Times with milliseconds where date knows %N (GNU, busybox), else seconds.
case $(date +%N) in
*N*) subsec=false ;;
*) subsec=true ;;
esac
now_ms() {
	if $subsec; then date +%s%3N; else echo $(($(date +%s) * 1000)); fi
}
now_iso() {
	if $subsec; then date -u +%Y-%m-%dT%H:%M:%S.%3NZ; else date -u +%Y-%m-%dT%H:%M:%SZ; fi
}

# nap sleeps in the background so that a TERM trap can stop it at once.
nap() {
	sleep "$1" &
	napping=$!
	wait "$napping"
}

# hex_of_base64url prints the bytes of an unpadded base64url string in hex.
hex_of_base64url() {
	pad=
	case $((${#1} % 4)) in
	2) pad="==" ;;
	3) pad="=" ;;
	esac
	printf '%s%s' "$1" "$pad" | tr -- '-_' '+/' | base64 -d 2>/dev/null | od -An -tx1 | tr -d ' \n'
}

# 1. The manifest, so planners and dispatchers know the skill. The bucket
# is made by the planner or a dispatcher; a worker started first waits.
value=$(jq -c . "$manifest") || die "manifest $manifest is not JSON"
until natsw kv put planbus-skills "$skill" "$value" >/dev/null 2>"$tmp/err"; do
	[ "$stopping" = 0 ] || exit 0
	log "cannot register the manifest yet: $(tail -n 1 "$tmp/err"); trying again"
	nap 2
done

# 2. The skill's consumer: used as it is when it exists (the Go worker
# sets it up the same way, with its own AckWait), else created.
until natsw consumer info "$stream" "$consumer" --json >"$tmp/consumer" 2>"$tmp/err"; do
	[ "$stopping" = 0 ] || exit 0
	pending=$(jq -r '.concurrency // 100000' "$manifest")
	if natsw consumer add "$stream" "$consumer" --pull --defaults \
		--description "planbus: calls of skill $skill, shared by its workers" \
		--filter "planbus.tools.$skill" --deliver all --replay instant --ack explicit \
		--wait "$ack_wait" --max-deliver $((max_deliver + 10)) \
		--max-pending "$pending" --max-waiting 4096 >/dev/null 2>"$tmp/err"; then
		continue
	fi
	log "cannot create consumer $consumer yet: $(tail -n 1 "$tmp/err"); trying again"
	nap 2
done
ack_wait_ns=$(jq -r '.config.ack_wait' "$tmp/consumer")
heartbeat=$((ack_wait_ns / 3000000000)) # whole seconds: AckWait/3
if [ "$heartbeat" -lt 1 ]; then
	log "the consumer's AckWait is under 3s; heartbeats every second may not keep calls"
	heartbeat=1
fi

# The ack subject of the call being handled (set by pull).
ack=

# send publishes one acknowledgement (+ACK, +WPI, -NAK..., +TERM...) of
# the call being handled on its ack subject.
send() {
	natsw pub --no-templates "$ack" "$1" >/dev/null 2>&1 || log "could not send $1"
}

# stop ends the handler: SIGTERM, and SIGKILL if it is still there 2s later.
stop() {
	kill "$hpid" 2>/dev/null
	nap 2
	kill -KILL "$hpid" 2>/dev/null
}

# watch runs beside the handler: a heartbeat every $heartbeat seconds, and
# each second a look at the messages that arrived on planbus.cancel.<planId>.
# A cancel stops the call only if it names the call's plan and the SHA-256
# of its cancelToken is the call's cancelDigest; then watch writes the
# reason and stops the handler. Anything else is logged (five times at
# most) and ignored.
watch() {
	trap 'kill "$napping" 2>/dev/null; exit 0' TERM
	want=$(hex_of_base64url "$digest")
	ticks=0
	seen=0
	ignored=0
	while :; do
		nap 1
		ticks=$((ticks + 1))
		[ $((ticks % heartbeat)) -ne 0 ] || send "+WPI"
		n=$(wc -l <"$tmp/cancels")
		[ "$n" -gt "$seen" ] || continue
		head -n "$n" "$tmp/cancels" | tail -n $((n - seen)) >"$tmp/new"
		seen=$n
		while IFS= read -r line; do
			tok=$(printf '%s' "$line" | jq -r --arg p "$plan" 'select(type == "object" and .planId == $p)
				| .cancelToken | select(type == "string" and test("^[A-Za-z0-9_-]{43}$"))' 2>/dev/null)
			if [ "${#line}" -le 1024 ] && [ -n "$tok" ] &&
				[ "$(printf '%s' "$tok" | sha256sum | cut -d' ' -f1)" = "$want" ]; then
				echo cancelled >"$tmp/why"
				stop
				exit 0
			fi
			ignored=$((ignored + 1))
			[ "$ignored" -gt 5 ] ||
				log "plan $plan tool $tool attempt $attempt: ignoring a cancel that is not its dispatcher's (${#line} bytes; token does not match the call's cancelDigest)"
		done <"$tmp/new"
	done
}

# deadline stops the handler when the call's timeoutMs is up.
deadline() {
	trap 'kill "$napping" 2>/dev/null; exit 0' TERM
	nap "$((timeout_ms / 1000)).$(printf '%03d' $((timeout_ms % 1000)))"
	echo timeout >"$tmp/why"
	stop
}

# result writes the result of the call in $tmp/call.json to $tmp/result:
# result STATE [ERROR-JSON [OUTPUT-FILE]].
result() {
	finished_ms=$(now_ms)
	jq -c --arg state "$1" --argjson error "${2:-null}" --arg worker "$worker_id" \
		--arg started "$started_iso" --arg finished "$(now_iso)" \
		--argjson ms "$((finished_ms - started_ms))" \
		--slurpfile out "${3:-/dev/null}" '
		{planId, requestId, toolId, skill, attempt, token, state: $state,
		 workerId: $worker, startedAt: $started, finishedAt: $finished, durationMs: $ms}
		+ (if $error != null then {error: $error} else {} end)
		+ (if ($out | length) == 1 then {output: $out[0]} else {} end)' "$tmp/call.json" >"$tmp/result"
}

# finish publishes the result and waits for JetStream to store it, then
# acknowledges the call. If the result cannot be stored the call is handed
# back (a nak with a delay) to run again: never acked without its result.
finish() {
	tries_left=5
	until natsw pub --jetstream --no-templates -H "Nats-Msg-Id:$msgid" "planbus.results.$plan" \
		--force-stdin <"$tmp/result" >"$tmp/puback" 2>&1; do
		tries_left=$((tries_left - 1))
		if [ "$tries_left" -eq 0 ]; then
			log "plan $plan tool $tool attempt $attempt: cannot store the result ($(tail -n 1 "$tmp/puback")); handing the call back"
			send '-NAK {"delay": 5000000000}'
			return
		fi
		nap 1
	done
	send "+ACK"
	log "plan $plan tool $tool attempt $attempt: $(jq -r '.state + (if .error then " (" + .error.code + ": " + .error.message + ")" else "" end)' "$tmp/result")"
}

# handle runs the call pulled into $tmp/msg.
handle() {
	# The CLI prints "[hh:mm:ss] subj: S / tries: N / cons seq: C / str seq: S / pending: P",
	# the headers, then the body as the last line. The call's ack subject is
	# $JS.ACK.<stream>.<consumer>.<tries>.<stream seq>.<consumer seq>.<time>.<pending>;
	# the server reads the first three numbers only.
	set -- $(sed -n '1s|^\[[^]]*\] subj: [^ ]* / tries: \([0-9]*\) / cons seq: \([0-9]*\) / str seq: \([0-9]*\) / .*|\1 \2 \3|p' "$tmp/msg")
	if [ $# -ne 3 ]; then
		# A status instead of a call (408: the pull expired): nothing to do.
		grep -q '^  Status: ' "$tmp/msg" ||
			log "cannot read the delivery line of a pulled message: $(head -n 1 "$tmp/msg")"
		return
	fi
	tries=$1
	ack="\$JS.ACK.$stream.$consumer.$1.$3.$2.0.0"
	msgid=$(sed -n 's/^  Nats-Msg-Id: //p' "$tmp/msg" | head -n 1)
	tail -n 1 "$tmp/msg" >"$tmp/call.json"

	# The fields the worker uses, checked as the schema says: ids end up
	# in subjects, so they must be subject tokens.
	if ! fields=$(jq -er --arg skill "$skill" '
		select(type == "object" and .skill == $skill
			and (.planId | type == "string" and test("^[A-Za-z0-9_-]{1,128}$"))
			and (.requestId | type == "string" and test("^[A-Za-z0-9_-]{1,128}$"))
			and (.toolId | type == "string" and test("^[A-Za-z0-9_.:-]{1,128}$"))
			and (.attempt | type == "number" and . >= 1 and . == floor)
			and (.timeoutMs | type == "number" and . >= 1 and . <= 86400000 and . == floor)
			and (.idempotencyKey | type == "string")
			and (.token | type == "string" and test("^[A-Za-z0-9_-]{43}$"))
			and (.cancelDigest | type == "string" and test("^[A-Za-z0-9_-]{43}$"))
			and (.input | type == "object"))
		| @sh "plan=\(.planId) request=\(.requestId) tool=\(.toolId) attempt=\(.attempt) timeout_ms=\(.timeoutMs) key=\(.idempotencyKey) digest=\(.cancelDigest)"' "$tmp/call.json" 2>/dev/null); then
		log "dropping a message that is not a valid call of $skill"
		send "+TERM not a valid tool call of skill $skill"
		return
	fi
	eval "$fields"
	case $msgid in
	"$key"/*) ;;
	*)
		log "dropping call $key: its Nats-Msg-Id ${msgid:-(none)} is not a dispatcher's"
		send "+TERM the call has no Nats-Msg-Id <idempotencyKey>/<tag>"
		return
		;;
	esac
	started_ms=$(now_ms)
	started_iso=$(now_iso)

	# Delivered too often: its workers died running it. Report, do not run.
	if [ "$tries" -gt "$max_deliver" ]; then
		result failed "$(jq -nc --arg m "delivered $((tries - 1)) times without a result: the workers it went to died, hung or were stopped while running it" \
			'{code: "WORKER_CRASH", category: "internal", message: $m}')"
		finish
		return
	fi

	: >"$tmp/cancels"
	# Not through natsw: a function in the background is a subshell, and
	# killing it would leave the nats process running.
	nats --inbox-prefix _INBOX_worker sub --raw "planbus.cancel.$plan" >"$tmp/cancels" 2>/dev/null &
	spid=$!

	# tool.started, for people watching (best effort, like every event).
	jq -c --arg time "$started_iso" --arg worker "$worker_id" \
		'{type: "tool.started", time: $time, requestId, planId, toolId, skill, attempt, workerId: $worker}' "$tmp/call.json" |
		natsw pub --no-templates "planbus.events.$request.tool.started" --force-stdin >/dev/null 2>&1
	rm -f "$tmp/why"
	jq -c .input "$tmp/call.json" >"$tmp/in"
	PLANBUS_PLAN_ID=$plan PLANBUS_REQUEST_ID=$request PLANBUS_TOOL_ID=$tool PLANBUS_SKILL=$skill \
		PLANBUS_ATTEMPT=$attempt PLANBUS_IDEMPOTENCY_KEY=$key PLANBUS_TIMEOUT_MS=$timeout_ms \
		"$handler" <"$tmp/in" >"$tmp/out" 2>"$tmp/stderr" &
	hpid=$!
	watch &
	wpid=$!
	deadline &
	dpid=$!
	wait "$hpid"
	status=$?
	while kill -0 "$hpid" 2>/dev/null; do # a trapped signal interrupted wait
		wait "$hpid"
		status=$?
	done
	kill "$wpid" "$dpid" "$spid" 2>/dev/null
	wait "$wpid" "$dpid" "$spid" 2>/dev/null
	why=
	[ "$status" -le 128 ] || why=$(cat "$tmp/why" 2>/dev/null)

	case $why in
	cancelled)
		# The plan has ended: its dispatcher ignores any result now.
		send "+ACK"
		log "plan $plan tool $tool attempt $attempt: cancelled; dropped the call"
		return
		;;
	timeout)
		result timeout "$(jq -nc --arg m "Tool exceeded ${timeout_ms}ms timeout" '{code: "TOOL_TIMEOUT", category: "timeout", message: $m}')"
		;;
	*)
		if [ "$status" -ne 0 ]; then
			err=$(jq -ce 'select(type == "object" and (.code | type == "string" and length > 0) and (.message | type == "string")
				and (.category | IN("timeout", "network", "transient", "invalid_input", "permanent", "internal", "cancelled", "dependency")))
				| {code, message, category}' "$tmp/out" 2>/dev/null) ||
				err=$(tail -c 4096 "$tmp/stderr" | jq -Rsc --arg s "$status" \
					'{code: "TOOL_FAILED", category: "internal", message: ("exit status " + $s + (if . == "" then "" else ": " + rtrimstr("\n") end))}')
			result failed "$err"
		elif [ "$(wc -c <"$tmp/out")" -gt "$output_cap" ]; then
			result failed "$(jq -nc --arg m "output of $(wc -c <"$tmp/out") bytes exceeds the worker's cap of $output_cap" '{code: "OUTPUT_TOO_LARGE", category: "permanent", message: $m}')"
		elif ! jq -se 'length <= 1' "$tmp/out" >/dev/null 2>&1; then
			result failed '{"code": "OUTPUT_NOT_JSON", "category": "internal", "message": "the handler printed something other than one JSON value"}'
		else
			result succeeded null "$tmp/out"
		fi
		;;
	esac
	finish
}

log "serving skill $skill on consumer $consumer (heartbeat every ${heartbeat}s)"
while [ "$stopping" = 0 ]; do
	if natsw consumer next "$stream" "$consumer" --no-ack --timeout 5s >"$tmp/msg" 2>"$tmp/err"; then
		handle
	elif ! grep -q 'no message received' "$tmp/err"; then
		[ "$stopping" = 0 ] || break
		log "pull failed: $(tail -n 1 "$tmp/err"); trying again"
		nap 1
	fi
done
log "stopped"
