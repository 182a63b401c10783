/*
 * str.c — hashing (FNV-1a, CRC-32C, splitmix) and string interning.
 *
 * CRC-32C guards bundle sections: any single flipped byte changes it.
 */
#include <stdlib.h>
#include <string.h>

#include "util.h"

uint64_t
hash_bytes(const void *p, size_t n, uint64_t h)
{
	const unsigned char *s = p;

	if (!h)
		h = 0xcbf29ce484222325ull;
	while (n--) {
		h ^= *s++;
		h *= 0x100000001b3ull;
	}
	return h;
}

uint64_t
hash_str(const char *s)
{
	return hash_bytes(s, strlen(s), 0);
}

static uint32_t crctab[8][256];

static void
crcinit(void)
{
	uint32_t c;
	int i, k;

	for (i = 0; i < 256; i++) {
		c = (uint32_t)i;
		for (k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crctab[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			crctab[k][i] = (crctab[k - 1][i] >> 8) ^
				       crctab[0][crctab[k - 1][i] & 0xff];
}

uint32_t
crc32c(uint32_t crc, const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t w;

	if (!crctab[0][1])
		crcinit();
	crc = ~crc;
	/* slicing by 8: bundles carry gigabytes of weights */
	while (n >= 8) {
		memcpy(&w, s, 8);
		w ^= crc;
		crc = crctab[7][w & 0xff] ^ crctab[6][(w >> 8) & 0xff] ^
		      crctab[5][(w >> 16) & 0xff] ^ crctab[4][(w >> 24) & 0xff] ^
		      crctab[3][(w >> 32) & 0xff] ^ crctab[2][(w >> 40) & 0xff] ^
		      crctab[1][(w >> 48) & 0xff] ^ crctab[0][w >> 56];
		s += 8;
		n -= 8;
	}
	while (n--)
		crc = (crc >> 8) ^ crctab[0][(crc ^ *s++) & 0xff];
	return ~crc;
}

static size_t
probe(const StrSet *s, const char *str)
{
	size_t i = hash_str(str) & (s->cap - 1);

	while (s->slot[i] && strcmp(s->slot[i], str) != 0)
		i = (i + 1) & (s->cap - 1);
	return i;
}

const char *
str_find(const StrSet *s, const char *str)
{
	if (!s->cap)
		return NULL;
	return s->slot[probe(s, str)];
}

const char *
str_intern(StrSet *s, const char *str)
{
	size_t i, j, oldcap;
	const char **old;

	if (2 * (s->n + 1) > s->cap) {
		old = s->slot;
		oldcap = s->cap;
		s->cap = s->cap ? 2 * s->cap : 64;
		s->slot = xcalloc(s->cap, sizeof *s->slot);
		for (j = 0; j < oldcap; j++)
			if (old[j])
				s->slot[probe(s, old[j])] = old[j];
		free(old);
	}
	i = probe(s, str);
	if (!s->slot[i]) {
		s->slot[i] = arena_strdup(s->arena, str);
		s->n++;
	}
	return s->slot[i];
}

/* Linear probing: delete by shifting the rest of the cluster back. */
void
str_remove(StrSet *s, const char *str)
{
	size_t i, j, k;

	if (!s->cap || !s->slot[i = probe(s, str)])
		return;
	s->slot[i] = NULL;
	s->n--;
	for (j = (i + 1) & (s->cap - 1); s->slot[j]; j = (j + 1) & (s->cap - 1)) {
		k = hash_str(s->slot[j]) & (s->cap - 1);
		/* move slot j to i unless its home k lies cyclically in (i, j] */
		if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
			s->slot[i] = s->slot[j];
			s->slot[j] = NULL;
			i = j;
		}
	}
}

void
str_free(StrSet *s)
{
	free(s->slot);
	s->slot = NULL;
	s->n = s->cap = 0;
}
