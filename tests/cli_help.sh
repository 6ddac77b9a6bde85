#!/usr/bin/env bash
# Every subcommand answers --help: `backplane CMD --help`, `backplane CMD FILE --help` (a --help
# after other arguments) and `backplane help CMD` exit 0 with "usage: backplane CMD" on stdout.
# The commands are read from `backplane --help` (the commands.def table), so a command added
# there is checked without a change here. Also `backplane --version`'s form. $1 = CLI.
set -u
cli=${1:?usage: cli_help.sh path/to/backplane}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

"$cli" --help > "$tmp/top" || { echo "FAIL: backplane --help exited non-zero"; fail=1; }
cmds=$(sed -n '/^commands:/,/^$/p' "$tmp/top" | awk 'NF >= 2 && $1 ~ /^[a-z]/ { print $1 }')
n=$(echo "$cmds" | wc -w)
[ "$n" -ge 6 ] || { echo "FAIL: only $n commands listed by backplane --help"; fail=1; }
for c in $cmds; do
    for form in "$c --help" "$c no-such-file.gguf --help" "help $c"; do
        # shellcheck disable=SC2086
        if ! "$cli" $form > "$tmp/out" 2> "$tmp/err"; then
            echo "FAIL: backplane $form exited non-zero: $(head -3 "$tmp/err")"; fail=1; continue
        fi
        head -1 "$tmp/out" | grep -q "^usage: backplane $c\b" ||
            { echo "FAIL: backplane $form: stdout does not start with 'usage: backplane $c': $(head -1 "$tmp/out")"; fail=1; }
    done
done
"$cli" --version > "$tmp/v" || { echo "FAIL: backplane --version exited non-zero"; fail=1; }
grep -qx 'backplane [0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*' "$tmp/v" ||
    { echo "FAIL: backplane --version printed '$(cat "$tmp/v")', not 'backplane X.Y.Z'"; fail=1; }
echo "help: $n commands, each answers --help three ways; --version: $(cat "$tmp/v")"
exit $fail
