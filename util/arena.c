/*
 * arena.c — chunked bump allocation, released in one call.
 *
 * Allocations are zeroed and 16-byte aligned.  Large requests get a chunk of
 * their own, so the waste per chunk stays small.
 */
#include <stdlib.h>
#include <string.h>

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
};

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
	Chunk *c = xmalloc(sizeof *c + size);

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
		die("out of memory (%zu bytes)", n);
	return p;
}

void *
xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);

	if (!p)
		die("out of memory (%zu x %zu bytes)", n, m);
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		die("out of memory (%zu bytes)", n);
	return p;
}

char *
xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(xmalloc(n), s, n);
}
