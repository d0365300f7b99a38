/* fuzz_pyexpr.c: a libFuzzer harness for the expression evaluator: each input is an
 * expression, compiled with the names a, b and c bound (an int, a float and a list, as the
 * corpus tests bind them) and evaluated; a refused or failing expression is an expected
 * result, not a finding. */
#include "common.h"

#include <stdint.h>

#include "pyexpr.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {"a", "b", "c", "s"};
	char *source = xmalloc(size + 1);
	memcpy(source, data, size);
	source[size] = '\0'; /* an embedded NUL ends the expression, as in a C string */

	struct pyarena *arena = pyarena_new();
	struct pyval items[] = {pyval_int(1), pyval_int(2)};
	struct pyval globals[] = {pyval_int(3), pyval_float(-2.5), pyval_list(arena, items, 2),
				  pyval_str(arena, "x\xbfy", 3)};
	struct pyexpr_error err;
	struct pyexpr *e = pyexpr_compile(source, names, ARRAY_SIZE(names), &err);
	struct pyval v;
	if (e && pyexpr_eval(e, globals, arena, &v, &err) == 0) {
		/* Repr walks the value as a tree; a list's items may share one list millions of
		 * times, so only what is not a list is shown, as error messages show results. */
		if (v.kind != PY_LIST) {
			struct strbuf sb;
			strbuf_init(&sb);
			pyval_repr(&sb, &v);
			strbuf_release(&sb);
		}
		(void)pyval_truthy(&v);
	} else {
		(void)pyexpr_error_column(source, &err);
	}
	pyexpr_free(e);
	pyarena_free(arena);
	free(source);
	return 0;
}
