/*
 * cache.c — codegen results kept for the rest of a compile, keyed by what
 * determines them: a module's LLVM IR as emitted (before any pass), its
 * target, the -O level and whether a cubin was asked for.  Layers of one
 * model whose kernels are the same emit the same IR, so a whole-model
 * compile (moec compile --layers) runs the O3 pipeline, the NVPTX backend
 * and ptxas once per distinct layer, not once per layer.
 *
 *	layer 3: emit -> IR text --miss--> O3, PTX, ptxas --> stored
 *	layer 4: emit -> IR text --hit---> PTX and ptxas's stats copied
 *
 * The key is the whole text, compared byte for byte (its hash only finds
 * the candidates), so a hit is exactly the result the compile would have
 * computed: bundles stay byte-identical with or without the cache.  Quoted
 * value names (%"in:model.layers.3.mlp.gate.weight": the kernel's parameter
 * names, which carry the layer) are numbered in order of first use first:
 * names reach neither the PTX nor ptxas, but would keep every layer apart.
 */
#define CG_INTERNAL
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

typedef struct {
	uint64_t hash;
	char *key;		/* "sm_90a O3 cubin\n" + the IR */
	char *ptx;
	size_t ptxlen;
	CgPtxasResult r;	/* n == 0 when ptxas did not run */
} Entry;

struct CgCache {
	VEC(Entry) e;
	int hits, misses;
};

CgCache *
cg_cache_new(void)
{
	return xcalloc(1, sizeof(CgCache));
}

void
cg_cache_free(CgCache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->e.n; i++) {
		free(c->e.v[i].key);
		free(c->e.v[i].ptx);
		cg_ptxas_free(&c->e.v[i].r);
	}
	vec_free(&c->e);
	free(c);
}

void
cg_cache_stats(const CgCache *c, int *hits, int *misses)
{
	*hits = c ? c->hits : 0;
	*misses = c ? c->misses : 0;
}

/* ir with each distinct %"NAME" as %"N", N its order of first use. */
static char *
number_names(const char *ir)
{
	VEC(char) o = {0};
	VEC(const char *) seen = {0};
	VEC(size_t) len = {0};

	for (const char *p = ir; *p;) {
		const char *q;
		if (p[0] != '%' || p[1] != '"' || !(q = strchr(p + 2, '"'))) {
			vec_push(&o, *p++);
			continue;
		}
		size_t n = (size_t)(q - p - 2), k = 0;
		while (k < seen.n && (len.v[k] != n || memcmp(seen.v[k], p + 2, n)))
			k++;
		if (k == seen.n) {
			vec_push(&seen, p + 2);
			vec_push(&len, n);
		}
		char num[32];
		snprintf(num, sizeof num, "%%\"%zu\"", k);
		for (const char *c = num; *c; c++)
			vec_push(&o, *c);
		p = q + 1;
	}
	vec_push(&o, '\0');
	vec_free(&seen);
	vec_free(&len);
	return o.v;
}

char *
cg_cache_key(CgModule *m, int want_cubin)
{
	char *ir = cg_module_llvm_ir(m), *names = number_names(ir), *key = NULL;

	if (asprintf(&key, "%s O%d%s\n%s", m->t.sm, m->t.opt, want_cubin ? " cubin" : "", names) < 0)
		die("out of memory");
	free(ir);
	free(names);
	return key;
}

static Entry *
find(CgCache *c, const char *key, uint64_t h)
{
	for (size_t i = 0; i < c->e.n; i++)
		if (c->e.v[i].hash == h && !strcmp(c->e.v[i].key, key))
			return &c->e.v[i];
	return NULL;
}

static void
copy_result(CgPtxasResult *dst, const CgPtxasResult *src)
{
	memset(dst, 0, sizeof *dst);
	dst->n = src->n;
	if (src->n) {
		dst->k = xmalloc((size_t)src->n * sizeof *dst->k);
		memcpy(dst->k, src->k, (size_t)src->n * sizeof *dst->k);
	}
	if (src->cubin) {
		dst->cubin = xmalloc(src->cubin_len + 1);
		memcpy(dst->cubin, src->cubin, src->cubin_len);
		dst->cubin_len = src->cubin_len;
	}
	dst->log = src->log ? xstrdup(src->log) : NULL;
}

int
cg_cache_get(CgCache *c, const char *key, CgModule *m, CgPtxasResult *r)
{
	Entry *e = find(c, key, hash_bytes(key, strlen(key), 0));

	if (!e)
		return 0;
	c->hits++;
	cg_module_set_ptx(m, e->ptx, e->ptxlen);
	copy_result(r, &e->r);
	cg_module_take_stats(m, r);
	return 1;
}

void
cg_cache_put(CgCache *c, char *key, CgModule *m, const CgPtxasResult *r)
{
	Entry e = {hash_bytes(key, strlen(key), 0), key, NULL, 0, {0}};
	size_t n;
	const char *ptx = cg_module_ptx(m, &n, NULL);

	c->misses++;
	if (!ptx || find(c, key, e.hash)) {
		free(key);
		return;
	}
	e.ptx = xmalloc(n + 1);
	memcpy(e.ptx, ptx, n + 1);
	e.ptxlen = n;
	copy_result(&e.r, r);
	vec_push(&c->e, e);
}
