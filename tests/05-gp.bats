#!/usr/bin/env bats
# 05-gp.bats: lib/gp.c, the Gaussian process of kg-propose's model proposer: its objective
# and gradient against a NumPy computation of the same formulas (pinned here), the gradient
# against finite differences, a fit that lowers the objective, predictions that make sense.

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
