#!/bin/sh
# upper.sh: the handler of the example skill "upper". It reads the call's
# input on stdin, {"text": "...", "delayMs": 0}, and prints {"text": "..."}
# with the text's ASCII letters upper-cased, after waiting delayMs (to try
# heartbeats, timeouts and cancels). Input without a string "text" fails
# with category invalid_input, which planbus does not retry.
set -u
input=$(cat)
if ! printf '%s' "$input" | jq -e '(.text | type == "string") and ((.delayMs // 0) | type == "number" and . >= 0)' >/dev/null 2>&1; then
	echo '{"code": "INVALID_INPUT", "category": "invalid_input", "message": "upper: want input {\"text\": string, \"delayMs\": number}"}'
	exit 1
fi
ms=$(printf '%s' "$input" | jq '.delayMs // 0 | floor')
if [ "$ms" -gt 0 ]; then
	# The worker sends SIGTERM on a timeout or a cancel; stop the sleep too.
	trap 'kill "$sleeper" 2>/dev/null; exit 143' TERM
	sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))" &
	sleeper=$!
	wait "$sleeper"
fi
printf '%s' "$input" | jq -c '{text: (.text | ascii_upcase)}'
