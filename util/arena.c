/*
 * arena.c — chunked bump allocation, released in one call.
 *
 * Allocations are zeroed and 16-byte aligned.  Large requests get a chunk of
 * their own, so the waste per chunk stays small.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util.h"

typedef struct Chunk Chunk;
struct Chunk {
	Chunk *next;
	size_t size, used;
	_Alignas(16) unsigned char mem[];
};

struct Arena {
	Chunk *head;
	size_t chunk;
	size_t total;
	size_t held;		/* bytes of the chunks */
	size_t limit;		/* 0: none */
	const char *owner;
};

static OomHandler *oom_handler;

void
mem_set_oom_handler(OomHandler *h)
{
	oom_handler = h;
}

_Noreturn static void
oom(const char *owner, size_t bytes, size_t limit)
{
	if (oom_handler)
		oom_handler(owner, bytes, limit);
	if (limit)
		die("%s: more than the %zu-byte memory limit of one graph", owner ? owner : "arena",
		    limit);
	die("out of memory (%zu bytes)", bytes);
}

void
arena_set_limit(Arena *a, size_t bytes, const char *owner)
{
	a->limit = bytes;
	a->owner = owner;
}

Arena *
arena_new(size_t chunk)
{
	Arena *a = xcalloc(1, sizeof *a);

	a->chunk = chunk ? chunk : (size_t)64 << 10;
	return a;
}

static Chunk *
grow(Arena *a, size_t n)
{
	size_t size = n > a->chunk / 4 ? n : a->chunk;
	Chunk *c;

	/* checked before allocating: n may be a size read from a file */
	if (size > SIZE_MAX / 2 || (a->limit && (size > a->limit || a->held > a->limit - size)))
		oom(a->owner, size, a->limit);
	c = xmalloc(sizeof *c + size);
	a->held += size;

	c->size = size;
	c->used = 0;
	if (size == n && a->head) {
		/* a big block: keep the current chunk in front for small ones */
		c->next = a->head->next;
		a->head->next = c;
	} else {
		c->next = a->head;
		a->head = c;
	}
	return c;
}

void *
arena_alloc(Arena *a, size_t n)
{
	Chunk *c = a->head;
	void *p;

	if (n > SIZE_MAX / 2)
		oom(a->owner, n, a->limit);
	n = (n + 15) & ~(size_t)15;
	if (n == 0)
		n = 16;
	if (!c || c->size - c->used < n)
		c = grow(a, n);
	p = c->mem + c->used;
	c->used += n;
	a->total += n;
	memset(p, 0, n);
	return p;
}

void *
arena_realloc(Arena *a, void *p, size_t old, size_t n)
{
	void *q;

	if (n <= old)
		return p;
	q = arena_alloc(a, n);
	if (p && old)
		memcpy(q, p, old);
	return q;
}

char *
arena_strndup(Arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);

	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

char *
arena_strdup(Arena *a, const char *s)
{
	return arena_strndup(a, s, strlen(s));
}

char *
arena_printf(Arena *a, const char *fmt, ...)
{
	va_list ap;
	int n;
	char *p;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	p = arena_alloc(a, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

size_t
arena_used(const Arena *a)
{
	return a->total;
}

void
arena_free(Arena *a)
{
	Chunk *c, *next;

	if (!a)
		return;
	for (c = a->head; c; c = next) {
		next = c->next;
		free(c);
	}
	free(a);
}

void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		oom(NULL, n, 0);
	return p;
}

void *
xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);

	if (!p)
		oom(NULL, n * m, 0);
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom(NULL, n, 0);
	return p;
}

char *
xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(xmalloc(n), s, n);
}

uint64_t
mem_host_limit(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
	uint64_t lim = pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : UINT64_MAX;
	struct rlimit r;

	if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
		lim = MIN(lim, (uint64_t)r.rlim_cur);
	if (getrlimit(RLIMIT_DATA, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
		lim = MIN(lim, (uint64_t)r.rlim_cur);
	return lim;
}
