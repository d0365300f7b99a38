# report-page.sh: kg-report's page, sourced by it: report/index.html from what kg-report
# computed (the rows in $rows and $evaluated, summary, the plots and graph in $report) and
# from trace.md's closing line, the kernels of the fastest variants and the baseline.
# Reads name, run, report, work, device, replayed, best_dir, best_methods, top, in_run; writes
# and publishes index.html. Nothing here reads the run's log.
# shellcheck shell=bash disable=SC2154 # kg-report sets what it reads (above)

# config_changes($from; $to): "key from → to" for each parameter $to changes (jq).
# shellcheck disable=SC2016 # a jq program: its $names are jq's
config_changes='def config_changes($from; $to): [($to // {}) | to_entries[] | select($from[.key] != .value)
	| "\(.key) \($from[.key] // "-" | tostring) → \(.value | tostring)"];'

# Replayed or measured, and on what: a replayed run ran nothing, whatever its table's device.
if [ "$replayed" = true ]; then
	measured="replayed: no kernel ran; the times are a table's${device:+, measured on the $device}"
else
	measured="measured${device:+ on the $device}"
fi
# trace.md from the page: beside the report in the run, else where the run is.
if [ "$in_run" -eq 1 ]; then trace_link=../trace.md; else trace_link=$(realpath -m -- "$run/trace.md"); fi

# stopped: why the search stopped, or that it may go on, as kg-select --summary closed
# trace.md (kg-tune runs it at the end of every search); not a closing line that candidates
# followed (the search went on, by hand or kg-iterate, past a budget it then raised, say).
stopped() {
	local why
	why=$(awk '/^The search (is over|may go on)/ { why = $0; rows = 0; next }
		/^\| [0-9]+ \| / { rows++ }
		END { if (why != "" && rows > 0) printf "The search went on after the last closing summary of trace.md: %d build%s since (kg-select --summary RUN closes it again).", rows, rows == 1 ? "" : "s"; else print why }' \
		"$run/trace.md" 2>/dev/null)
	printf '<p id="stopped"><strong>%s</strong></p>\n' "$(html "${why:-The search has no closing summary in trace.md yet (kg-select --summary writes it).}")"
}

# proposers: who proposed what: per proposer, the candidates tried, failed, and the best
# speedup among them.
proposers() {
	jq -rn '
		def x3: (if . >= 100 then 0 elif . >= 10 then 1 elif . >= 1 then 2 else 3 end) as $d
			| (. * pow(10; $d) | round | tostring) as $s
			| if $d == 0 then $s + "x" else ((("0" * ($d + 1 - ($s | length))) // "") + $s) as $p
			  | $p[:($p | length) - $d] + "." + $p[($p | length) - $d:] + "x" end;
		[inputs] as $all
		| ($all | map(select(.update.root)) | first | .bench.median_ms) as $base
		| [$all[] | select(.update.root | not)
		 | {who: (.candidate.proposer // "unknown"), ok: (.bench.status == "ok" and (.bench.median_ms | type) == "number")}
		   + {speedup: (if .bench.median_ms and $base then $base / .bench.median_ms else null end)}]
		| group_by(.who) | sort_by(-length)
		| "<h2 id=\"proposers\">Who proposed what</h2>\n<table class=\"proposers\">\n<tr><th>proposer</th><th>tried</th><th>failed</th><th>best speedup</th></tr>\n"
		  + (map("<tr><td>\(.[0].who | @html)</td><td>\(length)</td><td>\(map(select(.ok | not)) | length)</td><td>\(map(select(.ok) | .speedup) | max // null | if . == null then "-" else x3 end)</td></tr>") | join("\n"))
		  + "\n</table>"' "$rows"
}

# failures: the page's table of the candidates that failed, by what failed, each kind with
# its count and the first line that says why (the compiler's first error line: NVRTC writes
# "error:", ptxas "error   :"), as kg-select's trace.md gives it row by row.
failures() {
	jq -rn '
		def telling: split("\n") as $l | ([$l[] | select(test("error *:"))] + [$l[] | select(test("\\S"))] + [""])[0];
		[inputs | select(.update.root | not)
		 | if (.build.status // "") != "ok" then {s: (.build.status // "not built"), why: (.build.error // "")}
		   elif (.bench.status // "") != "ok" then {s: (.bench.status // "not measured"),
		        why: (.bench.check.why // .bench.error
		              // (if .bench.check.argument then "\(.bench.check.argument): \(.bench.check.bad_elements // "some") elements wrong" else "" end))}
		   else empty end
		 | .why |= telling]
		| if length == 0 then "<h2 id=\"failures\">Failures</h2>\n<p>None: every candidate built and measured.</p>"
		  else "<h2 id=\"failures\">Failures</h2>\n<p>\(length) candidates failed; the first reason of each kind (trace.md has every one):</p>\n<table class=\"failures\">\n<tr><th>what failed</th><th>candidates</th><th>first reason</th></tr>\n"
		       + (group_by(.s) | sort_by(-length) | map("<tr><td>\(.[0].s | @html)</td><td>\(length)</td><td><code>\(.[0].why | @html)</code></td></tr>") | join("\n"))
		       + "\n</table>" end' "$rows"
}

# The page. An SVG goes in inline, after its XML prolog, its ids prefixed so that the plots'
# (gnuplot names its point shapes alike in every plot) stay apart.
inline_svg() { # inline_svg FILE PREFIX
	sed -n '/<svg/,$p' "$1" | sed -e "s/\\bid=\\(['\"]\\)/id=\\1$2-/g" -e "s/href=\\(['\"]\\)#/href=\\1#$2-/g" -e "s/url(#/url(#$2-/g"
}
html() { # html TEXT: TEXT escaped for HTML
	jq -rn --arg t "$1" '$t | @html'
}
# variant_change STATE: how the variant differs from the baseline: its configuration, then
# its kernel as a unified diff.
root_state=$(awk -F'\t' 'NR == 1 { print $12 }' "$evaluated")
root_config=$(awk -F'\t' 'NR == 1 { print $10 }' "$evaluated")
variant_change() {
	local config
	config=$(awk -F'\t' -v s="$1" '$12 == s { print $10; exit }' "$evaluated")
	jq -rn --argjson from "$root_config" --argjson to "$config" "$config_changes"'
		config_changes($from; $to)
		| if length == 0 then "configuration: the baseline'"'"'s" else "configuration: " + join(", ") end'
	if [ ! -f "$run/variants/$1/kernel.cu" ] || [ ! -f "$run/variants/$root_state/kernel.cu" ]; then
		echo "kernel: not kept"
	elif cmp -s "$run/variants/$root_state/kernel.cu" "$run/variants/$1/kernel.cu"; then
		echo "kernel: the baseline's source"
	else
		diff -u --label "baseline/kernel.cu" --label "${1:0:8}/kernel.cu" "$run/variants/$root_state/kernel.cu" "$run/variants/$1/kernel.cu"
	fi
}
{
	cat <<EOF
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>$(html "kernelgraph report: $name")</title>
<style>
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f0f0f0; }
pre { background: #f6f8fa; padding: 0.8em; overflow-x: auto; font-size: 85%; }
figure { margin: 1em 0; }
figure svg { max-width: 100%; height: auto; }
table.fastest td:last-child { font-family: monospace; font-size: 85%; }
.graph { overflow: auto; max-height: 900px; border: 1px solid #ddd; }
.graph svg { max-width: none; }
</style>
</head>
<body>
<h1>$(html "$name"): what the search found</h1>
<p>Run <code>$(html "$run")</code>; best variant <code>$(html "$best_dir")</code> ($(html "$best_methods")); $(html "$measured"). The search candidate by candidate: <a href="$(html "$trace_link")">trace.md</a>.</p>
<h2 id="summary">Summary</h2>
$(summary html)
$(stopped)
$(proposers)
$(failures)
<h2 id="plots">Plots</h2>
<figure id="convergence">$(inline_svg "$report/convergence.svg" convergence)</figure>
EOF
	if [ -f "$report/roofline.svg" ]; then
		printf '<figure id="roofline">%s</figure>\n' "$(inline_svg "$report/roofline.svg" roofline)"
	else
		printf '<p>No roofline: the measurements carry no bandwidth.</p>\n'
	fi
	printf '<h2 id="graph">Search graph</h2>\n'
	if [ -f "$report/graph.svg" ]; then
		printf '<figure class="graph">%s</figure>\n' "$(inline_svg "$report/graph.svg" graph)"
	else
		printf '<p>Graphviz (dot) is not installed: the graph is in <code>graph.dot</code>.</p>\n'
	fi
	printf '<h2 id="variants">The fastest variants against the baseline</h2>\n'
	awk -F'\t' 'NR == 1 { base = $3 } $3 != "NaN" && NR > 1 { v = base / $3; d = v >= 100 ? 0 : v >= 10 ? 1 : v >= 1 ? 2 : 3
		printf "%s\t%s\t%." d "fx\t%s\t%s\n", $3, $1, v, $12, $13 }' "$evaluated" |
		sort -g -k1,1 | awk -F'\t' '!seen[$4]++' | head -n "$top" |
		while IFS=$'\t' read -r ms build speedup state chain; do
			printf '<h3>build %s, %s: %s ms, %s</h3>\n<p>%s</p>\n<pre class="diff">%s</pre>\n' "$build" "$(html "${state:0:8}")" \
				"$ms" "$speedup" "$(html "$chain")" "$(html "$(variant_change "$state")")"
		done
	printf '</body>\n</html>\n'
} >"$work/index.html" || kg_die "$KG_EXIT_IO" "cannot write $report/index.html"
publish index.html
