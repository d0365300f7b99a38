#!/usr/bin/env bash
# lint-bats.sh: rejects bats checks that cannot fail: a line starting with "! " inside a test
# that is not the test's last command (bats only sees the last status; write `run ! cmd`).
# Usage: tests/lint-bats.sh FILE.bats...
status=0
for f in "$@"; do
	awk -v file="$f" '
		function flush() {
			if (pending) { printf "%s:%d: a check that cannot fail: \"! \" on a line that is not the test'"'"'s last (write \"run ! cmd\" or \"! cmd || false\")\n", file, pending; bad = 1 }
			pending = 0
		}
		/^@test / { intest = 1; pending = 0; next }
		intest && /^}[[:space:]]*$/ { intest = 0; pending = 0; next }
		!intest { next }
		/^[[:space:]]*(#.*)?$/ { next }
		{ flush() }
		/^[[:space:]]*! / { pending = FNR }
		END { exit bad }
	' "$f" || status=1
done
exit "$status"
