#!/usr/bin/env bats
# 00-build.bats: the Makefile targets a user relies on: install, uninstall, the CUDA check,
# and the GPU suite's wiring.

load test_helper

# Nested make must not inherit the outer make's variables (SANITIZE=1 in test-sanitize, which
# make also puts in the environment of what it runs).
kmake() {
	env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u SANITIZE make --no-print-directory -C "$KG_ROOT" "$@"
}

@test "make cuda-check accepts the toolkit in CUDA_HOME" {
	run_tool 0 env -u MAKEFLAGS -u MAKELEVEL make --no-print-directory -s -C "$KG_ROOT" cuda-check CUDA_HOME=/usr/local/cuda
	assert_output "kernelgraph: the CUDA toolkit is in CUDA_HOME=/usr/local/cuda (/usr/local/cuda/include/nvrtc.h)"
	# building the tools checks it too, silently when it is there
	run_tool 0 env -u MAKEFLAGS -u MAKELEVEL -u SANITIZE make --no-print-directory -s -C "$KG_ROOT" all CUDA_HOME=/usr/local/cuda
	assert_output ""
}

@test "make cuda-check names the missing toolkit" {
	run -2 kmake -s cuda-check CUDA_HOME=/nonexistent/cuda
	assert_output --partial "kernelgraph: no CUDA toolkit in CUDA_HOME=/nonexistent/cuda (/nonexistent/cuda/include/nvrtc.h is missing); install the CUDA toolkit (README.md, \"Set up\") or run make CUDA_HOME=/path/to/cuda"
	# Debian 12's own toolkit (11.8): NVRTC, but no CUPTI range profiler
	mkdir -p "$BATS_TEST_TMPDIR/cuda/include"
	touch "$BATS_TEST_TMPDIR/cuda/include/nvrtc.h" "$BATS_TEST_TMPDIR/cuda/include/cupti_pcsampling.h"
	run -2 kmake -s cuda-check CUDA_HOME="$BATS_TEST_TMPDIR/cuda"
	assert_output --partial "kernelgraph: the CUDA toolkit in CUDA_HOME=$BATS_TEST_TMPDIR/cuda has no CUPTI range profiler (cupti_range_profiler.h); kernelgraph needs CUDA 13 (README.md, \"Set up\")"
}

@test "make install puts every tool under DESTDIR/PREFIX and uninstall removes them" {
	root="$BATS_TEST_TMPDIR/root"
	run kmake -s install DESTDIR="$root" PREFIX=/opt/kg
	assert_success
	for tool in "$KG_ROOT"/tools/*/main.c; do
		name=$(basename "$(dirname "$tool")")
		[ -x "$root/opt/kg/bin/kg-$name" ]
	done
	run "$root/opt/kg/bin/kg-propose" --version
	assert_success
	assert_output "kg-propose (kernelgraph) $(sed -n 's/^VERSION *= *//p' "$KG_ROOT/Makefile")"
	for script in "$KG_ROOT"/pipelines/kg-*; do # with common.sh from share/kernelgraph
		name=$(basename "$script")
		run_tool 0 "$root/opt/kg/bin/$name" --version
		assert_output "$name (kernelgraph) $(sed -n 's/^VERSION *= *//p' "$KG_ROOT/Makefile")"
		assert_stderr_empty
	done

	run kmake -s uninstall DESTDIR="$root" PREFIX=/opt/kg
	assert_success
	[ -z "$(ls -A "$root/opt/kg/bin")" ]
}

@test "make test-gpu runs the GPU suite in tests/gpu" {
	run kmake -n test-gpu
	assert_success
	assert_output --partial "bats tests/gpu"
	ls "$KG_ROOT"/tests/gpu/*.bats
}

@test "make deps installs what running needs, nothing of the tests'; make deps-test adds the tests' packages" {
	run kmake -n deps
	assert_success
	install=$(grep 'apt-get install' <<<"$output")
	for p in gcc libcurl4-openssl-dev libcjson-dev libssl-dev jq patch gnuplot-nox graphviz; do
		[[ " $install " == *" $p "* ]] || { echo "make deps lacks $p" >&2; return 1; }
	done
	for p in bats parallel clang chromium munge slurmctld slurmd cmake python3-venv; do
		[[ " $install " != *" $p "* ]] || { echo "make deps installs $p, a test dependency" >&2; return 1; }
	done
	run kmake -n deps-test
	assert_success
	install=$(grep 'apt-get install' <<<"$output")
	for p in gcc jq patch bats bats-assert parallel python3 clang chromium munge slurmctld slurmd cmake python3-venv curl; do
		[[ " $install " == *" $p "* ]] || { echo "make deps-test lacks $p" >&2; return 1; }
	done
	grep -qx 'make deps-test check DEVELOPER=1' "$KG_ROOT/.ci/run"
	grep -qx '    make deps-test check DEVELOPER=1' "$KG_ROOT/README.md" # the README's test command, as CI runs it
}

@test "make help lists every target it names, llm-server among them" {
	run kmake help
	assert_success
	assert_line --regexp '^make llm-server +build llama-server for the tests'
	assert_line --regexp '^make benchtools +build the GPU benchmark helpers'
}

@test "make test runs the fast files at once; test-full adds tests/check/ after building the llama-server; check runs each compiler's suite once" {
	run kmake -n test
	assert_success
	refute_output --partial "llm-server"
	assert_output --regexp " bats .*--jobs [0-9]+.* tests$"
	run kmake -n test-full
	assert_success
	assert_output --partial "llm-server"
	assert_output --partial "KG_TINY_GGUF=$KG_ROOT/build/llm/tiny.gguf"
	assert_output --regexp " bats .*--jobs [0-9]+.* tests tests/check$"
	run kmake -n check
	assert_success
	# the whole suite once built with cc, once with clang under the sanitizers, never the fast one apart
	[ "$(grep -c "^KG_BIN_DIR=$KG_ROOT/bin .* tests tests/check$" <<<"$output")" -eq 1 ]
	[ "$(grep -c "^KG_BIN_DIR=$KG_ROOT/build/san/bin .* tests tests/check$" <<<"$output")" -eq 1 ]
	refute_output --regexp " tests$"
}

@test "make llm-server fetches only llama-cpp-python as an sdist: its build requirements come as wheels" {
	# with --no-binary :all:, pip built them from source to read the sdist's metadata: over
	# 9 minutes on a fresh Debian 12 root, against 5 s
	grep -q -- '--no-binary llama-cpp-python ' "$KG_ROOT/tests/tools/llm_server_build.sh"
	run grep -c -- '--no-binary :all:' "$KG_ROOT/tests/tools/llm_server_build.sh"
	assert_output 0
}

@test "every tool's --help lists each of its long options" {
	for bin in "$KG_BIN_DIR"/kg-*; do
		src="$KG_ROOT/tools/$(basename "$bin" | sed 's/^kg-//')/main.c"
		[ -f "$src" ] || continue
		run "$bin" --help
		assert_success
		for opt in $(grep -o '{"[a-z-]*", [a-z_]*_argument' "$src" | sed 's/{"\([a-z-]*\)".*/\1/'); do
			assert_output --partial -- "--$opt"
		done
	done
}

@test "every tool and pipeline takes -q, -v, --help and --version, as the README says, and its help prints no doubled percent sign" {
	grep -q 'Every tool takes `--help`, `--version`, `-q` and `-v`.' "$KG_ROOT/README.md"
	for bin in "$KG_BIN_DIR"/kg-*; do
		name=$(basename "$bin")
		run_tool 0 "$bin" --help
		assert_line --regexp '^ +-q, --quiet +'
		assert_line --regexp '^ +-v, --verbose +'
		assert_line --regexp '^ +-h, --help +'
		assert_line --regexp '^ +-V, --version +'
		refute_output --partial '%%'
		# each is taken: --version after them, so that nothing else runs
		for flag in -q -v --quiet --verbose; do
			run_tool 0 "$bin" "$flag" --version
			assert_output "$name (kernelgraph) $(sed -n 's/^VERSION *= *//p' "$KG_ROOT/Makefile")"
		done
	done
}

@test "the README's table of options is every tool's --help; a short letter stands for one long name in every tool (-o: the output), a long name for one letter" {
	declare -A long_of=() short_of=()
	for bin in "$KG_BIN_DIR"/kg-*; do
		name=$(basename "$bin")
		# the options --help lists at the start of a line, as the README's row lists them
		listed=$("$bin" --help | grep -oE '^ {1,8}(-[a-zA-Z], )?--[a-z][a-z0-9-]*' | sed -E 's/^ +//; s/^(-[a-zA-Z]), (--[a-z0-9-]+)/\2 \1/' | sort -u)
		row=$(sed -n '/^## Options$/,/^## /p' "$KG_ROOT/README.md" | grep -E "^\| \`$name\` \| ")
		[ -n "$row" ] || { echo "the README's options table has no row for $name" >&2; return 1; }
		inreadme=$(grep -oE '`--[a-z0-9-]+`( \(`-[a-zA-Z]`\))?' <<<"${row#*| * | }" | tr -d '`()' | sort -u)
		diff <(echo "$listed") <(echo "$inreadme") || { echo "$name: --help (<) and the README (>) differ" >&2; return 1; }
		while read -r long short; do
			[ -n "$short" ] || continue
			if [ -n "${long_of[$short]:-}" ] && [ "${long_of[$short]}" != "$long" ] && [ "$short" != -o ]; then
				echo "$short is ${long_of[$short]} in one tool and $long in $name" >&2
				return 1
			fi
			if [ -n "${short_of[$long]:-}" ] && [ "${short_of[$long]}" != "$short" ]; then
				echo "$long is ${short_of[$long]} in one tool and $short in $name" >&2
				return 1
			fi
			long_of[$short]=$long short_of[$long]=$short
		done <<<"$listed"
	done
	# kg-tune and kg-iterate take kg-propose's names, and their old spellings
	for p in kg-tune kg-iterate; do
		for o in --rules --llm --no-llm; do
			run_tool 2 "$p" "$o" --bogus
			assert_stderr "$(printf '%s\n' "$p: unknown option '--bogus'" "Try '$p --help' for more information.")"
		done
	done
}

@test "every short letter NEWS.md says was removed is refused, status 2, and its long name is in the tool's --help" {
	rows=$(grep -E '^\| `kg-[a-z]+` \| `-[a-zA-Z]` \| `--[a-z-]+` \|' "$KG_ROOT/NEWS.md")
	[ "$(wc -l <<<"$rows")" -eq 6 ]
	while IFS='|' read -r _ tool letter long _; do
		tool=$(tr -d ' `' <<<"$tool") letter=$(tr -d ' `' <<<"$letter") long=$(tr -d ' `' <<<"$long")
		run_tool 2 "$KG_BIN_DIR/$tool" "$letter" </dev/null
		assert_output ""
		assert_stderr "$(printf '%s\n' "$tool: unknown option '$letter'" "Try '$tool --help' for more information.")"
		"$KG_BIN_DIR/$tool" --help | grep -qE "^ {1,8}$long( |$)"
	done <<<"$rows"
}

@test "the README's exit-status table names, for 5 and 6, the tools whose --help gives them, and every tool's --help gives its statuses" {
	table=$(sed -n '/^## Exit codes$/,/^## /p' "$KG_ROOT/README.md")
	for code in 5 6; do
		row=$(grep "^| $code | " <<<"$table")
		for bin in "$KG_BIN_DIR"/kg-*; do
			name=$(basename "$bin")
			statuses=$("$bin" --help | sed -n '/^Exit status/,$p' | tr '\n' ' ')
			[ -n "$statuses" ] || { echo "$name: --help gives no exit statuses" >&2; return 1; }
			# a status is given as "; N " or "(N " after the first
			if grep -qE "[;(] ?$code (the|another|a |another)" <<<"$statuses"; then
				[[ "$row" == *"\`$name\`"* ]] || { echo "$name gives status $code; the README's row does not name it" >&2; return 1; }
			else
				[[ "$row" != *"\`$name\`"* ]] || { echo "the README names $name for status $code; its --help does not give it" >&2; return 1; }
			fi
		done
	done
}

@test "make lint: a bats line starting with '! ' that is not its test's last command is named" {
	printf '@test "a" {\n\t! false\n\ttrue\n}\n@test "b" {\n\trun ! false\n\t! true\n}\n' >"$BATS_TEST_TMPDIR/t.bats"
	run_tool 1 "$KG_ROOT/tests/lint-bats.sh" "$BATS_TEST_TMPDIR/t.bats"
	[ "$output" = "$BATS_TEST_TMPDIR/t.bats:2: a check that cannot fail: \"! \" on a line that is not the test's last (write \"run ! cmd\" or \"! cmd || false\")" ]
	run_tool 0 "$KG_ROOT/tests/lint-bats.sh" "$KG_ROOT"/tests/*.bats "$KG_ROOT"/tests/check/*.bats "$KG_ROOT"/tests/gpu/*.bats
}

@test "a tool loads libcurl only when it makes a request: kg-propose and kg-relabel start once per build" {
	for tool in kg-propose kg-relabel kg-select; do
		run --separate-stderr env LD_DEBUG=libs "$tool" --version
		[ "$status" -eq 0 ]
		[[ "$stderr" == *"calling init: "* ]] # the loader says what it loads
		[[ "$stderr" != *libcurl* ]]
	done
}

@test "no object file of a tool or of lib/ needs one that needs it back: each links without a cycle" {
	build=${KG_TEST_DRIVER%/tests/kg-libtest}
	[ -d "$build/lib" ] || skip "no build at $build (KG_TEST_DRIVER names its kg-libtest)"
	run_tool 0 python3 "$KG_ROOT/tests/tools/link_cycles.py" "$build"
	[[ "$output" == "no cycle among the object files of "*" folders" ]]
	# two files that call each other are named, with the symbols that close the cycle
	cd "$BATS_TEST_TMPDIR" # (not the checkout: these files were once committed from it)
	mkdir -p fake/tools/pair
	echo 'void b(void); void a(void) { b(); }' >a.c
	echo 'void a(void); void b(void) { a(); }' >b.c
	cc -c a.c -o fake/tools/pair/a.o && cc -c b.c -o fake/tools/pair/b.o
	run_tool 1 python3 "$KG_ROOT/tests/tools/link_cycles.py" fake
	assert_output "$(printf '%s\n' "tools/pair: a cycle: a.o, b.o" "  a.o -> b.o: b" "  b.o -> a.o: a")"
}
