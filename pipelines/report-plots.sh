# report-plots.sh: kg-report's plots, sourced by it: gnuplot draws report/convergence.svg and,
# when the measurements carry a bandwidth, report/roofline.svg from the rows kg-report
# computed ($evaluated, one tab-separated row per evaluated candidate, the baseline first).
# Reads name, device, best_state, peak, run, work, report; publishes the plots and adds them
# to plots (the markdown links trace.md's summary gives). Nothing here reads the run's log.
# shellcheck shell=bash disable=SC2154 # kg-report sets what it reads (above)
plot() { # plot FILE: gnuplot draws FILE (in $work) from the script on stdin
	gnuplot 2>"$work/gnuplot.log" || {
		cat "$work/gnuplot.log" >&2
		kg_die "$KG_EXIT_IO" "gnuplot could not draw $report/$1"
	}
	publish "$1"
}
# Text in gnuplot's single quotes: a quote doubled. The terminal is noenhanced, so that an
# underscore in a kernel's name stays an underscore.
gp_quote() {
	printf "'%s'" "${1//\'/\'\'}"
}
terminal="set terminal svg size 900,600 fixed noenhanced font 'sans,12' background '#ffffff'"

# The time axis holds the fastest and ends a little above the slower of the baseline and nine
# candidates in ten, so that a few very slow ones do not flatten the rest: those are drawn on
# the top edge.
base_ms=$(awk -F'\t' 'NR == 1 { print $3 }' "$evaluated")
read -r ybottom ytop < <(awk -F'\t' '$3 != "NaN" { print $3 }' "$evaluated" | sort -g |
	awk -v base="$base_ms" '{ t[NR] = $1 } END { q = t[int(0.9 * (NR - 1)) + 1]; printf "%.3g %.3g\n", t[1] * 0.9, (q > base ? q : base) * 1.15 }')
plot convergence.svg <<EOF
$terminal
set output $(gp_quote "$work/convergence.svg")
set title $(gp_quote "$name: the fastest median so far, by build")
set xlabel 'builds (0: the baseline)'
set ylabel 'median time (ms)'
set yrange [$ybottom:$ytop]
set y2label 'speedup against the baseline'
set link y2 via $base_ms / y inverse $base_ms / y
set y2tics ($(awk -v b="$base_ms" -v t="$ytop" -v f="$ybottom" 'BEGIN {
	# gnuplot places no automatic tics on a linked axis, and even steps of speedup crowd where
	# times are short: round speedups, each at least a twelfth of the axis from the last
	split("1 1.02 1.05 1.1 1.2 1.25 1.5 2 2.5 3 4 5 6 8", m, " ")
	last = -1
	for (e = -3; e <= 3; e++) for (i = 1; i <= 14; i++) {
		s = m[i] * 10 ^ e; y = b / s
		if (y < f || y > t || (last >= 0 && last - y < (t - f) / 12)) continue
		printf "%s%g", last < 0 ? "" : ", ", s; last = y
	}
}'))
set format y2 '%gx'
set ytics nomirror
set datafile separator '\t'
set datafile missing 'NaN'
set key below left Left reverse maxcols 1
set grid
plot $(gp_quote "$evaluated") using 1:(\$3 <= $ytop ? \$3 : NaN) with points pt 7 ps 0.6 lc rgb '#999999' title 'each candidate', \
     '' using 1:(\$3 > $ytop ? $ytop : NaN) with points pt 9 ps 1 lc rgb '#999999' title 'slower than $ytop ms (off the scale)', \
     '' using 1:4 with steps lw 2 lc rgb '#1f77b4' title 'fastest so far', \
     '' using (strcol(12) eq '$best_state' ? \$1 : NaN):3 with points pt 3 ps 2 lw 2 lc rgb '#d62728' title 'best (best.json)'
EOF

# The roofs. Memory: the copy bandwidth kg-bench --calibrate measured, from a record that has
# both figures (the baseline's, measured first). Compute: --peak-tflops, else the datasheet
# peak of the device for the spec's datatype.
copy_bw=$(awk -F'\t' '$6 != "NaN" && $7 != "NaN" && $7 > 0 { printf "%.6g", $6 * 100 / $7; exit }' "$evaluated")
# Dense peaks (no sparsity) in TFLOP/s from NVIDIA's datasheets, by the name CUDA reports
# (the first prefix that matches): FP64, FP32 (CUDA cores), FP16 (tensor cores).
device_peaks() {
	cat <<'EOF'
NVIDIA H100 80GB HBM3	33.5	66.9	989.4
NVIDIA H100 PCIe	25.6	51.2	756.5
NVIDIA H100 NVL	30	60	835.5
NVIDIA H200 NVL	30	60	835.5
NVIDIA H200	33.5	66.9	989.4
NVIDIA A100	9.7	19.5	312
EOF
}
# The datatype the spec computes in: the widest floating type of its arrays, half first (a
# kernel on half data that wants its peak uses the tensor cores).
datatype=$(jq -r '[.KernelSpecification.Arguments[]? | select(.MemoryType == "Vector") | .Type // "" | scan("^(half|float|double)")[0]]
	| if index("half") then "FP16" elif index("double") then "FP64" elif index("float") then "FP32" else empty end' \
	"$run/spec.json" 2>/dev/null)
if [ -n "$peak" ]; then
	compute_roof=$peak compute_from="--peak-tflops"
else
	compute_roof=$(device_peaks | awk -F'\t' -v d="$device" -v t="$datatype" '
		d != "" && index(d, $1) == 1 { print t == "FP64" ? $2 : t == "FP32" ? $3 : t == "FP16" ? $4 : ""; exit }')
	case $datatype in
	FP16) compute_from="FP16 tensor-core peak of the $device (datasheet, dense)" ;;
	*) compute_from="$datatype peak of the $device (datasheet)" ;;
	esac
fi
memory_from="the copy bandwidth kg-bench --calibrate measured${device:+ on the $device}"
if [ -z "$compute_roof" ]; then
	if [ -z "$datatype" ]; then
		compute_note="no compute roof: the spec's arrays are not floating point (--peak-tflops draws one)"
	else
		compute_note="no compute roof: no datasheet peak known for the ${device:-device} (--peak-tflops draws one)"
	fi
fi
memory_note="no memory roof: the copy bandwidth was never measured (kg-bench --calibrate on the GPU)"

has() { # has COLUMN: some candidate has that figure
	awk -F'\t' -v c="$1" '$c != "NaN" { found = 1 } END { exit !found }' "$evaluated"
}
plots="[convergence](report/convergence.svg)"
rm -f "$report/roofline.svg"
if ! has 6; then
	kg_info "$run: the measurements carry no bandwidth (gbps): no roofline plot"
elif has 8; then
	# Axes that hold every point, both roofs and the ridge point between them, with room.
	read -r xlo xhi ylo yhi shared best_x best_y < <(awk -F'\t' -v bw="${copy_bw:-0}" -v peak="${compute_roof:-0}" -v best="$best_state" '
		$8 != "NaN" && $9 != "NaN" && $9 > 0 {
			n++
			if (n == 1 || $8 < xmin) xmin = $8
			if (n == 1 || $8 > xmax) xmax = $8
			if (n == 1 || $9 < ymin) ymin = $9
			if (n == 1 || $9 > ymax) ymax = $9
			if ($12 == best) { bx = $8; by = $9 }
			seen[sprintf("%.4g", $8)]++
		}
		END {
			lo = xmin; hi = xmax
			if (bw > 0 && peak > 0) { ridge = peak * 1000 / bw; if (ridge < lo) lo = ridge; if (ridge > hi) hi = ridge }
			lo /= 4; hi *= 4
			if (bw > 0 && bw * xmin / 1000 < ymin) ymin = bw * xmin / 1000
			if (peak > ymax) ymax = peak
			for (i in seen) k++
			printf "%g %g %g %g %d %s %s\n", lo, hi, ymin / 4, ymax * 3, k == 1 ? n : 0, bx == "" ? "NaN" : bx, by == "" ? "NaN" : by
		}' "$evaluated")
	roofs='' notes='' roof=NaN # roof: the lower of the two at x, for the best's share of it
	if [ -n "$copy_bw" ]; then
		if [ -n "$compute_roof" ]; then
			memory_line="($copy_bw * x / 1000 <= $compute_roof ? $copy_bw * x / 1000 : NaN)"
			roof="($copy_bw * x / 1000 < $compute_roof ? $copy_bw * x / 1000 : $compute_roof)"
		else
			memory_line="$copy_bw * x / 1000" roof=$memory_line
		fi
		roofs="$roofs, $memory_line with lines lw 2 lc rgb '#d62728' title $(gp_quote "memory roof $(printf %.0f "$copy_bw") GB/s: $memory_from")"
	else
		notes=$memory_note
	fi
	if [ -n "$compute_roof" ]; then
		compute_line=$compute_roof
		[ -n "$copy_bw" ] || roof=$compute_roof
		[ -z "$copy_bw" ] || compute_line="($copy_bw * x / 1000 >= $compute_roof ? $compute_roof : NaN)"
		roofs="$roofs, $compute_line with lines lw 2 lc rgb '#2ca02c' title $(gp_quote "compute roof $compute_roof TFLOP/s: $compute_from")"
	else
		notes="${notes:+$notes\\n}$compute_note"
	fi
	if [ "$shared" -gt 1 ]; then
		notes="${notes:+$notes\\n}all $shared variants share one arithmetic intensity, $(printf %.4g "$best_x") FLOP/byte\\n(their FLOPs and bytes do not depend on the configuration)"
	fi
	plot roofline.svg <<EOF
$terminal
set output $(gp_quote "$work/roofline.svg")
set title $(gp_quote "$name: roofline")
set xlabel 'arithmetic intensity (FLOP/byte)'
set ylabel 'TFLOP/s'
set logscale xy
set xrange [$xlo:$xhi]
set yrange [$ylo:$yhi]
set samples 1000
set datafile separator '\t'
set datafile missing 'NaN'
set key below left Left reverse maxcols 1
set grid
set label 1 "$notes" at graph 0.98, graph 0.14 right front
roof(x) = $roof
$([ "$best_x" = NaN ] || echo "set label 2 sprintf('best: %.3g TFLOP/s%s', $best_y, roof($best_x) == roof($best_x) ? sprintf(', %.0f%% of the roof', 100 * $best_y / roof($best_x)) : '') at $best_x, $best_y offset 1.5, -0.2 front tc rgb '#d62728'")
plot $(gp_quote "$evaluated") using 8:9 with points pt 7 ps 0.7 lc rgb '#1f77b4' title 'each variant', \
     '' using (\$1 == 0 ? \$8 : NaN):9 with points pt 6 ps 2 lw 2 lc rgb '#000000' title 'the baseline', \
     '' using (strcol(12) eq '$best_state' ? \$8 : NaN):9 with points pt 3 ps 2.5 lw 2 lc rgb '#d62728' title 'best (best.json)'$roofs
EOF
else
	roofs='' notes=''
	if [ -n "$copy_bw" ]; then
		roofs=", $copy_bw with lines lw 2 lc rgb '#d62728' title $(gp_quote "memory roof $(printf %.0f "$copy_bw") GB/s: $memory_from")"
	else
		notes=$memory_note
	fi
	plot roofline.svg <<EOF
$terminal
set output $(gp_quote "$work/roofline.svg")
set title $(gp_quote "$name: achieved bandwidth (no KernelGraph.Flops: no arithmetic intensity)")
set xlabel 'builds (0: the baseline)'
set ylabel 'GB/s'
set yrange [0:$(awk -F'\t' -v top="${copy_bw:-0}" '$6 != "NaN" && $6 > top { top = $6 } END { print top * 1.15 }' "$evaluated")]
set datafile separator '\t'
set datafile missing 'NaN'
set key below left Left reverse maxcols 1
set grid
set label 1 "$notes" at graph 0.02, graph 0.04 left front
$(awk -F'\t' -v best="$best_state" -v bw="$copy_bw" '$12 == best && $6 != "NaN" {
	printf "set label 2 \"best (build %d): %.0f GB/s%s\" at graph 0.02, graph 0.1 left front tc rgb \"#d62728\"\n",
	       $1, $6, bw == "" ? "" : sprintf(", %.0f%% of the memory roof", 100 * $6 / bw); exit }' "$evaluated")
plot $(gp_quote "$evaluated") using 1:6 with points pt 7 ps 0.7 lc rgb '#1f77b4' title 'each variant', \
     '' using (strcol(12) eq '$best_state' ? \$1 : NaN):6 with points pt 3 ps 2.5 lw 2 lc rgb '#d62728' title 'best (best.json)'$roofs
EOF
fi
[ ! -f "$report/roofline.svg" ] || plots="$plots, [roofline](report/roofline.svg)"
