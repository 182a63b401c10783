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
 *
 * With a folder (moec compile --cache-dir=DIR) each result is also a file
 * DIR/<hash>-<target>.moecc, so a later compile finds it: magic "MOECC1",
 * the sizes, the key, the PTX, ptxas's stats and cubin, and a CRC-32C of all
 * before it.  A file that is short, corrupt or holds another key is a miss
 * (and is rewritten); files are written atomically (util's file_create).
 */
#define CG_INTERNAL
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <llvm-c/BitWriter.h>

#include "bundle.h"
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
	char *dir;		/* NULL: in memory only */
};

CgCache *
cg_cache_new(const char *dir)
{
	CgCache *c = xcalloc(1, sizeof(CgCache));

	c->dir = dir ? xstrdup(dir) : NULL;
	return c;
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
	free(c->dir);
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
	const char *px = cg_ptxas_path();
	struct stat st = {0};
	char head[PATH_MAX + 160];
	int h;

	if (px)		/* another ptxas, or another build of it, computes anew */
		stat(px, &st);
	h = snprintf(head, sizeof head, "%s O%d%s moec %s ptxas %s %lld %lld\n", m->t.sm, m->t.opt,
		     want_cubin ? " cubin" : "", MOEC_VERSION, px ? px : "none",
		     (long long)st.st_size, (long long)st.st_mtime);
	if (h < 0 || (size_t)h >= sizeof head)
		h = snprintf(head, sizeof head, "%s O%d%s\n", m->t.sm, m->t.opt, want_cubin ? " cubin" : "");
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

/* --- the folder ------------------------------------------------------------ */

#define MAGIC "MOECC1\n"
typedef VEC(unsigned char) Bytes;
#define NSTAT 7		/* regs, barriers, smem, cmem, stack, spill stores, spill loads */

static char *
entry_path(const CgCache *c, uint64_t h, const char *key)
{
	char *p = NULL;

	if (asprintf(&p, "%s/%016llx-%.*s.moecc", c->dir, (unsigned long long)h,
		     (int)strcspn(key, " "), key) < 0)
		die("out of memory");
	return p;
}

static void
put64(Bytes *o, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		vec_push(o, (unsigned char)(v >> 8 * i));
}

static void
put_bytes(Bytes *o, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		vec_push(o, ((const unsigned char *)p)[i]);
}

static uint64_t
get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void
disk_put(const CgCache *c, const Entry *e)
{
	Bytes o = {0};
	char *path = entry_path(c, e->hash, e->key);
	uint32_t crc;
	FileOut f;
	FILE *fp;
	Diag quiet;

	put_bytes(&o, MAGIC, 8);
	put64(&o, e->keylen), put64(&o, e->ptxlen), put64(&o, (uint64_t)e->r.n);
	put64(&o, e->r.cubin_len);
	put_bytes(&o, e->key, e->keylen);
	put_bytes(&o, e->ptx, e->ptxlen);
	for (int i = 0; i < e->r.n; i++) {
		const CgPtxasInfo *k = &e->r.k[i];
		int64_t st[NSTAT] = {k->regs, k->barriers, k->smem, k->cmem, k->stack,
				     k->spill_stores, k->spill_loads};
		put_bytes(&o, k->name, sizeof k->name);
		for (int j = 0; j < NSTAT; j++)
			put64(&o, (uint64_t)st[j]);
	}
	put_bytes(&o, e->r.cubin, e->r.cubin_len);
	crc = crc32c(0, o.v, o.n);
	put_bytes(&o, &crc, 4);	/* little-endian hosts only write caches */
	diag_init(&quiet, NULL);
	if ((fp = file_create(&f, path, &quiet))) {
		fwrite(o.v, 1, o.n, fp);
		file_commit(&f, &quiet);	/* a cache that cannot be written is no error */
	}
	vec_free(&o);
	free(path);
}

/* The entry stored for key, read into e (malloc'd fields); 0 if none. */
static int
disk_get(const CgCache *c, const char *key, size_t n, uint64_t h, Entry *e)
{
	char *path = entry_path(c, h, key);
	size_t len;
	Diag quiet;
	unsigned char *b;
	uint64_t kl, pl, nk, cl, need;
	int ok = 0;

	diag_init(&quiet, NULL);
	b = file_exists(path) ? (unsigned char *)file_read(path, &len, &quiet) : NULL;
	free(path);
	if (!b || len < 8 + 32 + 4 || memcmp(b, MAGIC, 8))
		goto out;
	kl = get64(b + 8), pl = get64(b + 16), nk = get64(b + 24), cl = get64(b + 32);
	if (kl != n || pl > len || nk > len || cl > len)
		goto out;
	need = 40 + kl + pl + nk * (128 + 8 * NSTAT) + cl + 4;
	if (need != len || bundle_get32(b + len - 4) != crc32c(0, b, len - 4) ||
	    memcmp(b + 40, key, n))
		goto out;
	memset(e, 0, sizeof *e);
	e->ptx = xmalloc(pl + 1);
	memcpy(e->ptx, b + 40 + kl, pl);
	e->ptx[pl] = 0;
	e->ptxlen = pl;
	e->r.n = (int)nk;
	e->r.k = xcalloc(nk + 1, sizeof *e->r.k);
	for (uint64_t i = 0; i < nk; i++) {
		const unsigned char *q = b + 40 + kl + pl + i * (128 + 8 * NSTAT);
		CgPtxasInfo *k = &e->r.k[i];
		memcpy(k->name, q, sizeof k->name);
		k->name[sizeof k->name - 1] = 0;
		int *st[NSTAT] = {&k->regs, &k->barriers, &k->smem, &k->cmem, &k->stack,
				  &k->spill_stores, &k->spill_loads};
		for (int j = 0; j < NSTAT; j++)
			*st[j] = (int)get64(q + 128 + 8 * j);
	}
	if (cl) {
		e->r.cubin = xmalloc(cl);
		memcpy(e->r.cubin, b + len - 4 - cl, cl);
		e->r.cubin_len = cl;
	}
	ok = 1;
out:
	free(b);
	return ok;
}

int
cg_cache_get(CgCache *c, const char *key, size_t n, CgModule *m, CgPtxasResult *r)
{
	uint64_t h = hash_bytes(key, n, 0);
	Entry *e = find(c, key, n, h), d;

	if (!e && c->dir && disk_get(c, key, n, h, &d)) {	/* kept in memory from now on */
		d.hash = h;
		d.key = xmalloc(n + 1);
		memcpy(d.key, key, n + 1);
		d.keylen = n;
		vec_push(&c->e, d);
		e = &c->e.v[c->e.n - 1];
	}
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
	if (c->dir)
		disk_put(c, &c->e.v[c->e.n - 1]);
}
