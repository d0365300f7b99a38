#!/usr/bin/env bash
# relabel_accuracy.sh: kg-relabel's accuracy on one half of tests/fixtures/relabel/phrasings.tsv,
# each phrasing relabelled alone against the seed catalog, as the first name of a run would be.
#
# Usage: relabel_accuracy.sh FIXTURE dev|held-out [KG-RELABEL OPTION]...
# Prints one line per miss ("miss: LABEL: want EXPECTED, got CANONICAL (HOW SCORE)"), then
# "CORRECT TOTAL". A phrasing labelled NEW is right when kg-relabel makes it a new method.
set -euo pipefail
fixture=$1 half=$2
shift 2
case $half in
dev) keep=1 ;;
held-out) keep=0 ;;
*) echo "relabel_accuracy.sh: the half is dev or held-out, not '$half'" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
correct=0 total=0 line=0
while IFS=$'\t' read -r want label; do
	line=$((line + 1))
	[ $((line % 2)) -eq "$keep" ] || continue
	total=$((total + 1))
	rm -f "$tmp/methods.json"
	got=$(jq -cn --arg m "$label" '{candidate: {method: $m}}' | kg-relabel --catalog "$tmp/methods.json" "$@" |
		jq -r '.method | "\(.canonical)\t\(.how)\t\(.score * 100 | round / 100)"')
	IFS=$'\t' read -r canonical how score <<<"$got"
	if { [ "$want" = NEW ] && [ "$how" = new ]; } || { [ "$want" = "$canonical" ] && [ "$how" != new ]; }; then
		correct=$((correct + 1))
	else
		echo "miss: $label: want $want, got $canonical ($how $score)"
	fi
done < <(grep -v '^#' "$fixture")
echo "$correct $total"
