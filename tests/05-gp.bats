#!/usr/bin/env bats
# 05-gp.bats: lib/gp.c, the Gaussian process of kg-propose's model proposer: its objective
# and gradient against a NumPy computation of the same formulas (pinned here), the gradient
# against finite differences, a fit that lowers the objective, predictions that make sense,
# leave-one-out predictions as refits give them.

load test_helper

# close A B: the numbers of two lines agree within 1e-6.
close() {
	awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x); split(b, y); for (i = 1; i <= n; i++) {
		d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-6) exit 1 } }'
}

@test "objective and gradient at the prior's mode agree with NumPy; the gradient with finite differences" {
	run_tool 0 "$LIBTEST" gp "$FIXTURES/gp/smooth.txt"
	assert_line --index 0 "objective at the mode -2.8133674031"
	close "${lines[1]#gradient }" "2.30219795 -4.40082082 -1.63644507 0.87236062"
	assert_line --index 2 "finite differences within 1e-5"
	run_tool 0 "$LIBTEST" gp "$FIXTURES/gp/mixed.txt"
	assert_line --index 0 "objective at the mode 0.5504870698"
	close "${lines[1]#gradient }" "17.31529395 0.06058688 -7.57083251 1.37329566"
	assert_line --index 2 "finite differences within 1e-5"
}

@test "the fit lowers the objective; predictions: near the data sure, far from it unsure" {
	run_tool 0 "$LIBTEST" gp "$FIXTURES/gp/smooth.txt"
	awk '/^fitted objective/ { exit !($3 < $7 + 0) }' <<<"$output"
	# the minimum of the function (0.3, 0.7) is predicted low and sure; the corner (1, 0) high and unsure
	low=$(awk '/^at 0.3 0.7:/ { print $5 }' <<<"$output") sd_low=$(awk '/^at 0.3 0.7:/ { print $7 }' <<<"$output")
	high=$(awk '/^at 1 0:/ { print $5 }' <<<"$output") sd_high=$(awk '/^at 1 0:/ { print $7 }' <<<"$output")
	awk -v a="$low" -v b="$high" -v s="$sd_low" -v t="$sd_high" 'BEGIN { exit !(a < -1 && b > 1 && s < t) }'
	# a category never seen with this value is unsure; EI is positive there
	run_tool 0 "$LIBTEST" gp "$FIXTURES/gp/mixed.txt"
	awk '/^at 0.5 1:/ { exit !($7 > 0.5 && $NF > 0) }' <<<"$output"
}

@test "leave-one-out predictions are those of the model refitted without each point" {
	run_tool 0 "$LIBTEST" gp "$FIXTURES/gp/smooth.txt"
	assert_line "leave-one-out matches the refits without each point"
	run_tool 0 "$LIBTEST" gp "$FIXTURES/gp/mixed.txt"
	assert_line "leave-one-out matches the refits without each point"
}

@test "history: a source is calibrated onto the run by a line, and weighed by the pairs it ranks right" {
	# a source in the run's order, one reversed, one partly right; against a ranker that knows
	# nothing. A misordered pair counts by how far apart the run has it (of 35 here, all pairs).
	run_tool 0 "$LIBTEST" transfer 1,2,3,4,5,6 2,4,6,8,10,12 6,5,4,3,2,1 3,1,2,6,5,4
	assert_output "$(printf '%s\n' \
		"source 1: y = 0 + 0.5 h, residual variance 2.91667e-06, misordered 0 of 35" \
		"source 2: y = 3.5 + 0 h, residual variance 4.375, misordered 35 of 35" \
		"source 3: y = 1.4 + 0.6 h, residual variance 2.8, misordered 7 of 35" \
		"weights 0.999 0.000 0.000 0.001")"
	# the reversed source alone: worse than chance in 95 % of the draws, it gets nothing
	run_tool 0 "$LIBTEST" transfer 1,2,3,4,5,6 6,5,4,3,2,1
	assert_line --index 1 "weights 0.000 1.000"
	# two points: a shift only; a source that misorders the one pair does worse than chance
	# does in 3 draws of 4, and gets nothing
	run_tool 0 "$LIBTEST" transfer 1,2 5,1
	assert_output "$(printf '%s\n' "source 1: y = -1.5 + 1 h, residual variance nan, misordered 1 of 1" "weights 0.000 1.000")"
	# ten points, a source with 6 of 45 pairs wrong: far better than chance, it gets it all
	run_tool 0 "$LIBTEST" transfer 1,2,3,4,5,6,7,8,9,10 3,1,2,6,5,4,7,9,8,10
	assert_line --index 1 "weights 1.000 0.001"
	# no pair to rank (equal times): no one knows more than chance
	run_tool 0 "$LIBTEST" transfer 1,1,1 1,2,3
	assert_line --index 1 "weights 0.500 0.500"
}

@test "history: swaps of near-equal times cost a source little" {
	# two swaps of times 1 % apart against one swap of 5 and 9: counted by pairs, the first
	# source misordered more and got nothing; counted by how far apart they are, it ranks
	# the run better than the second does and gets the weight
	run_tool 0 "$LIBTEST" transfer 1,1.01,1.02,1.03,5,9 1.01,1,1.03,1.02,5,9 1,1.01,1.02,1.03,9,5
	assert_output "$(printf '%s\n' \
		"source 1: y = 1.07961e-05 + 0.999996 h, residual variance 9.99998e-05, misordered 0.02 of 51.98" \
		"source 2: y = 0.863689 + 0.71306 h, residual variance 6.85224, misordered 4 of 51.98" \
		"weights 0.991 0.000 0.009")"
}
