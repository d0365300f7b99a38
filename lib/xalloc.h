/* xalloc.h: allocation that cannot fail, and a growable string buffer.
 * Out of memory, every x* function prints "kg-NAME: out of memory" and exits with KG_EXIT_ENV. */
#ifndef KG_XALLOC_H
#define KG_XALLOC_H

#include "common.h"

#include <stdarg.h>
#include <stddef.h>

/* Reports "out of memory" and exits with KG_EXIT_ENV; for allocations made elsewhere
 * (cJSON's, say) that can fail. */
NORETURN void xalloc_die(void);

/* Each returns memory the caller frees with free(); none returns NULL. */
void *xmalloc(size_t size);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *ptr, size_t size);
/* xreallocarray dies as well when count * size overflows. */
void *xreallocarray(void *ptr, size_t count, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) PRINTF_LIKE(1, 2);

/* A NUL-terminated string that grows as text is added; buf is never NULL after
 * strbuf_init. strbuf_release frees it; strbuf_detach hands buf to the caller. */
struct strbuf {
	char *buf;  /* the text, always NUL-terminated */
	size_t len; /* bytes before the NUL */
	size_t cap; /* bytes allocated */
};

void strbuf_init(struct strbuf *sb);
void strbuf_release(struct strbuf *sb);
char *strbuf_detach(struct strbuf *sb);
void strbuf_reset(struct strbuf *sb);
void strbuf_add(struct strbuf *sb, const void *data, size_t len);
void strbuf_addstr(struct strbuf *sb, const char *s);
void strbuf_addch(struct strbuf *sb, char c);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...) PRINTF_LIKE(2, 3);
void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap) PRINTF_LIKE(2, 0);

#endif
