#!/usr/bin/env bats
# 95-docs.bats: the repository's references hold: every docs/ page and section a file names,
# and every relative link of a Markdown file, exist; nothing cites the design notes that live
# outside the repository (tests/tools/check_docs.py, which leaves this file's cases aside).

load test_helper

@test "every docs/ reference and Markdown link resolves, and none points outside the repository" {
	run_tool 0 python3 "$TOOLS/check_docs.py" "$KG_ROOT"
	assert_output ""
	assert_stderr_empty
}

@test "the check names a missing page, a missing section, a broken link and a file outside the repository" {
	mkdir -p "$BATS_TEST_TMPDIR/tree/docs" "$BATS_TEST_TMPDIR/tree/lib"
	printf '# Page\n\n## Real section\n\n[x](other.md) [y](#real-section) [z](#gone)\n' >"$BATS_TEST_TMPDIR/tree/docs/a.md"
	printf '/* docs/a.md "Real section", docs/a.md "Missing", docs/b.md; see DESIGN.md */\n' >"$BATS_TEST_TMPDIR/tree/lib/x.h"
	# a page's bare name is fine as a link's text
	printf 'As search.md says.\nSee [design.md](docs/a.md#real-section).\n' >"$BATS_TEST_TMPDIR/tree/README.md"
	run_tool 1 python3 "$TOOLS/check_docs.py" "$BATS_TEST_TMPDIR/tree"
	assert_output "$(printf '%s\n' \
		'README.md:1: cites a file outside the repository: As search.md says.' \
		'docs/a.md:5: link to other.md: no such file' \
		'docs/a.md:5: link to #gone: no such heading' \
		'lib/x.h:1: cites a file outside the repository: /* docs/a.md "Real section", docs/a.md "Missing", docs/b.md; see DESIGN.md */' \
		'lib/x.h:1: docs/a.md has no section "Missing"' \
		'lib/x.h:1: docs/b.md does not exist')"
	assert_stderr_empty
}
