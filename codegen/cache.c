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
 * The key is the module's bitcode (faster to write than its text), compared
 * byte for byte (its hash only finds the candidates), so a hit is exactly
 * the result the compile would have computed.  Modules built for the cache
 * keep no local value names (cg_module_discard_names): the names of kernel
 * parameters carry the layer (%"in:model.layers.3.mlp.gate.weight") and
 * would keep every layer apart, yet reach neither the PTX nor ptxas.
 */
#define CG_INTERNAL
#include <stdlib.h>
#include <string.h>

#include <llvm-c/BitWriter.h>

#include "codegen.h"

typedef struct {
	uint64_t hash;
	char *key;		/* "sm_90a O3 cubin\n" + the bitcode */
	size_t keylen;
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

char *
cg_cache_key(CgModule *m, int want_cubin, size_t *len)
{
	LLVMMemoryBufferRef bc = LLVMWriteBitcodeToMemoryBuffer(m->M);
	size_t n = LLVMGetBufferSize(bc);
	char head[64];
	int h = snprintf(head, sizeof head, "%s O%d%s\n", m->t.sm, m->t.opt, want_cubin ? " cubin" : "");
	char *key = xmalloc((size_t)h + n + 1);

	memcpy(key, head, (size_t)h);
	memcpy(key + h, LLVMGetBufferStart(bc), n);
	key[h + n] = 0;
	*len = (size_t)h + n;
	LLVMDisposeMemoryBuffer(bc);
	return key;
}

static Entry *
find(CgCache *c, const char *key, size_t n, uint64_t h)
{
	for (size_t i = 0; i < c->e.n; i++)
		if (c->e.v[i].hash == h && c->e.v[i].keylen == n && !memcmp(c->e.v[i].key, key, n))
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
cg_cache_get(CgCache *c, const char *key, size_t n, CgModule *m, CgPtxasResult *r)
{
	Entry *e = find(c, key, n, hash_bytes(key, n, 0));

	if (!e)
		return 0;
	c->hits++;
	cg_module_set_ptx(m, e->ptx, e->ptxlen);
	copy_result(r, &e->r);
	cg_module_take_stats(m, r);
	return 1;
}

void
cg_cache_put(CgCache *c, char *key, size_t keylen, CgModule *m, const CgPtxasResult *r)
{
	Entry e = {hash_bytes(key, keylen, 0), key, keylen, NULL, 0, {0}};
	size_t n;
	const char *ptx = cg_module_ptx(m, &n, NULL);

	c->misses++;
	if (!ptx || find(c, key, keylen, e.hash)) {
		free(key);
		return;
	}
	e.ptx = xmalloc(n + 1);
	memcpy(e.ptx, ptx, n + 1);
	e.ptxlen = n;
	copy_result(&e.r, r);
	vec_push(&c->e, e);
}
