/*
 * whole.c — several compiled programs (a model's decoder layers) into one
 * bundle of format 2 (docs/bundle.md §5): one PTX module per target holding
 * every distinct kernel once, one manifest and one weight range per program.
 *
 *	program layer.0: k0 k1 k2   ptx A          ptx:sm_90a   k0 k1 k2 k0_p1
 *	program layer.1: k0 k1 k2   ptx B    =>    manifest     layer.0 (k0 k1 k2)
 *	program layer.2: k0 k1 k2   ptx A                       layer.1 (k0_p1 k1 k2)
 *	                                                        layer.2 (k0 k1 k2)
 *
 * Kernels are shared by content: two entries whose text is the same on
 * every target, up to their own name and the numbering of their block
 * labels, are one kernel.  An entry whose name is taken by a different
 * kernel is renamed NAME_pI (I: the first program using it); module-level
 * data (.const tables, the shared-memory symbol) is merged the same way per
 * target.  Everything is decided in program order, so the bundle is
 * byte-identical for the same inputs.
 */
#define CG_INTERNAL
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "codegen.h"

/* A top-level item of a PTX module: a kernel entry, or a declaration. */
typedef struct {
	char *name;
	char *text;		/* with its newline(s) */
	int entry;
} Item;

typedef struct {
	char *head;		/* comments, .version, .target, .address_size */
	VEC(Item) item;
} Ptx;

typedef VEC(char) Text;

/* A name taken in the merged module, and the content it stands for. */
typedef struct {
	char *name;
	char *key;		/* text up to names and labels */
} Taken;

typedef struct {
	char *from, *to;
} Rename;

static int
ident(int c)
{
	return isalnum(c) || c == '_' || c == '$';
}

static char *
dupn(const char *s, size_t n)
{
	char *r = xmalloc(n + 1);

	memcpy(r, s, n);
	r[n] = 0;
	return r;
}

/* The identifier ending right before s[end] (skipping blanks). */
static char *
name_before(const char *s, size_t end)
{
	size_t e = end, b;

	while (e > 0 && (s[e - 1] == ' ' || s[e - 1] == '\t'))
		e--;
	for (b = e; b > 0 && ident((unsigned char)s[b - 1]); b--)
		;
	return b < e ? dupn(s + b, e - b) : NULL;
}

/* The symbol an item defines: before the last '(' of an entry or function,
 * else before the first '[', '=' or ';' of a declaration. */
static char *
item_name(const char *line, size_t n, int func)
{
	size_t k;

	if (func) {
		for (k = n; k > 0 && line[k - 1] != '('; k--)
			;
		return k ? name_before(line, k - 1) : NULL;
	}
	k = strcspn(line, "[=;");
	return k < n ? name_before(line, k) : NULL;
}

static void
ptx_free(Ptx *p)
{
	free(p->head);
	p->head = NULL;
	for (size_t i = 0; i < p->item.n; i++)
		free(p->item.v[i].name), free(p->item.v[i].text);
	vec_free(&p->item);
}

static int
starts(const char *s, const char *pre)
{
	return strncmp(s, pre, strlen(pre)) == 0;
}

/* Split LLVM's PTX into its header and top-level items. */
static int
ptx_parse(const char *t, size_t len, Ptx *p, Diag *d)
{
	const char *end = t + len, *l = t, *hd = NULL;

	memset(p, 0, sizeof *p);
	while (l < end) {
		const char *nl = memchr(l, '\n', (size_t)(end - l));
		size_t n = nl ? (size_t)(nl - l) : (size_t)(end - l);
		const char *next = nl ? nl + 1 : end;
		int entry = starts(l, ".visible .entry") || starts(l, ".entry");
		int func = entry || starts(l, ".func") || starts(l, ".visible .func") ||
			   starts(l, ".weak .func");	/* a body, to "}" */
		if (!p->item.n && !hd && (n == 0 || starts(l, "//") || starts(l, ".version") ||
					  starts(l, ".target") || starts(l, ".address_size"))) {
			l = next;
			continue;
		}
		if (!hd)
			p->head = dupn(t, (size_t)(l - t)), hd = l;
		if (n == 0 || starts(l, "\t//") || starts(l, "//")) {	/* "// .globl NAME" */
			l = next;
			continue;
		}
		/* a body runs to the "}" that closes its "{" (inline asm nests
		 * braces), a declaration to a line ending in ';' */
		const char *e = l;
		int depth = 0, opened = 0;
		for (;;) {
			const char *enl = memchr(e, '\n', (size_t)(end - e));
			size_t en = enl ? (size_t)(enl - e) : (size_t)(end - e);
			const char *enext = enl ? enl + 1 : end;
			for (size_t k = 0; k < en && func; k++)
				depth += e[k] == '{' ? (opened = 1) : e[k] == '}' ? -1 : 0;
			e = enext;
			if ((func && opened && depth == 0) || (!func && en && e[-1 - (enl != NULL)] == ';') ||
			    e == end)
				break;
		}
		Item it = {item_name(l, n, func), dupn(l, (size_t)(e - l)), entry};
		if (!it.name) {
			free(it.text);
			ptx_free(p);
			return diag_error(d, LOC_NONE, "merging PTX: cannot tell what '%.60s' defines",
					  l);
		}
		vec_push(&p->item, it);
		l = e;
	}
	if (!p->head)
		p->head = dupn(t, len);
	return 0;
}

/* text with every identifier token renamed by r[] (an entry's parameter
 * names NAME_param_N follow NAME); labels $L__BBn_ as $L__BB_ when norm. */
static char *
rename_text(const char *t, const Rename *r, int nr, int norm)
{
	Text o = {0};
	size_t n = strlen(t);

	for (size_t i = 0; i < n;) {
		if (!ident((unsigned char)t[i]) || (i > 0 && ident((unsigned char)t[i - 1]))) {
			vec_push(&o, t[i]);
			i++;
			continue;
		}
		size_t j = i;
		while (j < n && ident((unsigned char)t[j]))
			j++;
		const char *tok = t + i, *rep = NULL;
		size_t tn = j - i, keep = 0;
		for (int k = 0; k < nr && !rep; k++) {
			size_t fn = strlen(r[k].from);
			if (tn >= fn && !memcmp(tok, r[k].from, fn) &&
			    (tn == fn || (tn > fn + 7 && !memcmp(tok + fn, "_param_", 7))))
				rep = r[k].to, keep = fn;
		}
		if (!rep && norm && tn > 6 && !memcmp(tok, "$L__BB", 6)) {
			size_t k = 6;
			while (k < tn && isdigit((unsigned char)tok[k]))
				k++;
			rep = "$L__BB", keep = k;
		}
		if (rep) {
			for (const char *c = rep; *c; c++)
				vec_push(&o, *c);
			tok += keep, tn -= keep;
		}
		for (size_t k = 0; k < tn; k++)
			vec_push(&o, tok[k]);
		i = j;
	}
	vec_push(&o, '\0');
	return o.v;
}

/* The key of an item: its text with its own name as "@" and labels unnumbered. */
static char *
item_key(const Item *it)
{
	Rename r = {it->name, "@"};

	return rename_text(it->text, &r, 1, 1);
}

static const Taken *
taken_name(const Taken *t, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(t[i].name, name))
			return &t[i];
	return NULL;
}

static const Taken *
taken_key(const Taken *t, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(t[i].key, key))
			return &t[i];
	return NULL;
}

/* A free name for `base` in program i: base, else base_pI, base_pI_2, ... */
static char *
free_name(const Taken *t, size_t n, const char *base, int i)
{
	char *s;

	if (!taken_name(t, n, base))
		return xstrdup(base);
	for (int k = 1;; k++) {
		if ((k == 1 ? asprintf(&s, "%s_p%d", base, i) : asprintf(&s, "%s_p%d_%d", base, i, k)) < 0)
			die("out of memory");
		if (!taken_name(t, n, s))
			return s;
		free(s);
	}
}

typedef struct {
	int narch;		/* bundle targets */
	const char *aname[8];	/* their names */
	int nprog;
	Ptx *ptx;		/* [prog * narch + arch] */
	Text out[8];		/* the merged PTX per target */
	VEC(Taken) decl[8];	/* module-level symbols per target */
	VEC(Taken) kern;	/* entries: key over every target */
	Rename **ren;		/* per program and target: its declarations' renames */
	int *nren;
	const char **kname;	/* per program, per manifest kernel: the merged name */
	int *kbase;
} Merge;

static void
append(Text *o, const char *s)
{
	for (; *s; s++)
		vec_push(o, *s);
}

static void
add_rename(Merge *g, int r, const char *from, const char *to)
{
	if (!strcmp(from, to))
		return;
	g->ren[r] = xrealloc(g->ren[r], (size_t)(g->nren[r] + 1) * sizeof *g->ren[r]);
	g->ren[r][g->nren[r]++] = (Rename){xstrdup(from), xstrdup(to)};
}

/* Program i's declarations on target a: shared when the same, renamed when
 * their name is taken by different data. */
static void
merge_decls(Merge *g, int i, int a)
{
	Ptx *p = &g->ptx[i * g->narch + a];

	for (size_t k = 0; k < p->item.n; k++) {
		Item *it = &p->item.v[k];
		if (it->entry)
			continue;
		char *key = item_key(it);
		const Taken *t = taken_key(g->decl[a].v, g->decl[a].n, key);
		if (t) {
			add_rename(g, i * g->narch + a, it->name, t->name);
			free(key);
			continue;
		}
		Taken nt = {free_name(g->decl[a].v, g->decl[a].n, it->name, i), key};
		Rename r = {it->name, nt.name};
		char *text = rename_text(it->text, &r, 1, 0);
		append(&g->out[a], text);
		free(text);
		add_rename(g, i * g->narch + a, it->name, nt.name);
		vec_push(&g->decl[a], nt);
	}
}

static const Item *
find_entry(const Ptx *p, const char *name)
{
	for (size_t k = 0; k < p->item.n; k++)
		if (p->item.v[k].entry && !strcmp(p->item.v[k].name, name))
			return &p->item.v[k];
	return NULL;
}

/* Kernel k of m is built for target a (not every kernel is: k_gemm_ws.c). */
static int
on_target(const Merge *g, const MKernel *k, int a)
{
	for (int t = 0; t < k->ntarget; t++)
		if (!strcmp(k->target[t], g->aname[a]))
			return 1;
	return 0;
}

/* Program i's kernels: each one's key is its text on every target that
 * holds it, after the program's declaration renames; a kernel seen before
 * is shared. */
static int
merge_kernels(Merge *g, int i, const Manifest *m, Diag *d)
{
	for (int k = 0; k < m->nk; k++) {
		const Item *it[8] = {0};
		Text key = {0};
		for (int a = 0; a < g->narch; a++) {
			if (!on_target(g, &m->k[k], a)) {
				append(&key, "-\n");
				continue;
			}
			if (!(it[a] = find_entry(&g->ptx[i * g->narch + a], m->k[k].name)))
				return diag_error(d, LOC_NONE, "merging PTX: kernel '%s' of program %d "
						  "is not in its PTX", m->k[k].name, i);
			int ri = i * g->narch + a;
			char *t = rename_text(it[a]->text, g->ren[ri], g->nren[ri], 0);
			Item tmp = {it[a]->name, t, 1};
			char *kk = item_key(&tmp);
			append(&key, kk);
			vec_push(&key, '\n');
			free(kk), free(t);
		}
		vec_push(&key, '\0');
		const Taken *t = taken_key(g->kern.v, g->kern.n, key.v);
		if (t) {
			g->kname[g->kbase[i] + k] = t->name;
			vec_free(&key);
			continue;
		}
		Taken nt = {free_name(g->kern.v, g->kern.n, m->k[k].name, i), key.v};
		vec_push(&g->kern, nt);
		g->kname[g->kbase[i] + k] = nt.name;
		for (int a = 0; a < g->narch; a++) {
			int ri = i * g->narch + a;
			if (!it[a])
				continue;
			Rename *r = xmalloc((size_t)(g->nren[ri] + 1) * sizeof *r);
			if (g->nren[ri])
				memcpy(r, g->ren[ri], (size_t)g->nren[ri] * sizeof *r);
			r[g->nren[ri]] = (Rename){(char *)m->k[k].name, nt.name};
			char *text = rename_text(it[a]->text, r, g->nren[ri] + 1, 0);
			append(&g->out[a], text);
			free(text), free(r);
		}
	}
	return 0;
}

static void
merge_free(Merge *g)
{
	for (int i = 0; i < g->nprog * g->narch; i++)
		ptx_free(&g->ptx[i]);
	for (int a = 0; a < 8; a++) {
		vec_free(&g->out[a]);
		for (size_t k = 0; k < g->decl[a].n; k++)
			free(g->decl[a].v[k].name), free(g->decl[a].v[k].key);
		vec_free(&g->decl[a]);
	}
	for (size_t k = 0; k < g->kern.n; k++)
		free(g->kern.v[k].name), free(g->kern.v[k].key);
	vec_free(&g->kern);
	for (int i = 0; g->ren && i < g->nprog * g->narch; i++) {
		for (int k = 0; k < g->nren[i]; k++)
			free(g->ren[i][k].from), free(g->ren[i][k].to);
		free(g->ren[i]);
	}
	free(g->ren), free(g->nren), free(g->ptx), free(g->kname), free(g->kbase);
}

/* Program i's manifest with the merged kernel names; two kernels of the
 * program that are one in the merged module become one kernel line. */
static char *
manifest_text(const Merge *g, CgProgram *p, int i, size_t *len)
{
	Manifest m = *cg_program_manifest(p);
	MKernel *k = xcalloc((size_t)m.nk + 1, sizeof *k);
	MStep *s = xcalloc((size_t)m.nstep + 1, sizeof *s);
	char *text;
	int nk = 0;

	for (int j = 0; j < m.nk; j++) {
		const char *name = g->kname[g->kbase[i] + j];
		int dup = 0;
		for (int q = 0; q < nk && !dup; q++)
			dup = !strcmp(k[q].name, name);
		if (dup)
			continue;
		k[nk] = m.k[j];
		k[nk++].name = name;
	}
	for (int j = 0; j < m.nstep; j++) {
		s[j] = m.step[j];
		if (s[j].kind == STEP_INIT || s[j].kind == STEP_LAUNCH)
			s[j].kernel = g->kname[g->kbase[i] + bundle_find_kernel(&m, s[j].kernel)];
	}
	m.k = k, m.nk = nk, m.step = s;
	text = bundle_manifest_print(&m, len);
	free(k), free(s);
	return text;
}

/* An earlier program with the same PTX on every target and the same kernel
 * names in its manifest, or -1. */
static int
same_code(CgProgram **p, const int *arch, int na, int i)
{
	const Manifest *mi = cg_program_manifest(p[i]);

	for (int j = 0; j < i; j++) {
		const Manifest *mj = cg_program_manifest(p[j]);
		int same = mi->nk == mj->nk;
		for (int k = 0; same && k < mi->nk; k++)
			same = !strcmp(mi->k[k].name, mj->k[k].name);
		for (int a = 0; same && a < na; a++) {
			size_t li, lj;
			const char *ti = cg_program_ptx(p[i], arch[a], &li);
			const char *tj = cg_program_ptx(p[j], arch[a], &lj);
			same = ti && tj && li == lj && !memcmp(ti, tj, li);
		}
		if (same)
			return j;
	}
	return -1;
}

int
cg_programs_bundle(CgProgram **p, const char *const *name, int n, const char *report,
		   const char *path, int *nkernels, Diag *d)
{
	const CgCompileOpts *o = cg_program_opts(p[0]);
	int arch[8], na = 0, rc = -1, total = 0;
	Merge g = {0};
	BundleWriter w;
	BundleProgram *bp = xcalloc((size_t)n + 1, sizeof *bp);
	Text man = {0};
	struct {
		unsigned char *v;
		uint64_t n;
	} wts = {0};
	CgPtxasResult cub[8] = {{0}};
	char *prog = NULL, secname[16][BUNDLE_NAMELEN];
	size_t plen;

	for (int a = 0; a < o->narch; a++)
		if (strcmp(o->arch[a], "emu"))
			arch[na++] = a;
	if (!na) {
		free(bp);
		return diag_error(d, LOC_NONE, "an emulator program cannot be written as a bundle");
	}
	g.narch = na, g.nprog = n;
	for (int a = 0; a < na; a++)
		g.aname[a] = o->arch[arch[a]];
	g.ptx = xcalloc((size_t)(n * na) + 1, sizeof *g.ptx);
	g.ren = xcalloc((size_t)(n * na) + 1, sizeof *g.ren);
	g.nren = xcalloc((size_t)(n * na) + 1, sizeof *g.nren);
	g.kbase = xcalloc((size_t)n + 1, sizeof *g.kbase);
	for (int i = 0; i < n; i++)
		g.kbase[i] = total, total += cg_program_manifest(p[i])->nk;
	g.kname = xcalloc((size_t)total + 1, sizeof *g.kname);
	/* parse, then merge program by program in order; a program whose code
	 * is an earlier one's (the codegen cache made it) takes its names */
	for (int i = 0; i < n; i++) {
		int same = same_code(p, arch, na, i);
		if (same >= 0) {
			const Manifest *m = cg_program_manifest(p[i]);
			for (int k = 0; k < m->nk; k++)
				g.kname[g.kbase[i] + k] = g.kname[g.kbase[same] + k];
			continue;
		}
		for (int a = 0; a < na; a++) {
			size_t len;
			const char *t = cg_program_ptx(p[i], arch[a], &len);
			if (!t || ptx_parse(t, len, &g.ptx[i * na + a], d))
				goto out;
			if (!g.out[a].n)
				append(&g.out[a], g.ptx[i * na + a].head);
			merge_decls(&g, i, a);
		}
		if (merge_kernels(&g, i, cg_program_manifest(p[i]), d))
			goto out;
	}
	*nkernels = (int)g.kern.n;
	/* manifests and weights, each program's after the one before */
	for (int i = 0; i < n; i++)
		wts.n += BUNDLE_ALIGN_UP(cg_program_weight_bytes(p[i]));
	if (wts.n && (wts.n > SIZE_MAX / 2 || !(wts.v = calloc(1, (size_t)wts.n)))) {
		diag_error(d, loc_file(path), "cannot hold %llu bytes of weights",
			   (unsigned long long)wts.n);
		goto out;
	}
	wts.n = 0;
	for (int i = 0; i < n; i++) {
		size_t mlen;
		char *mt = manifest_text(&g, p[i], i, &mlen);
		uint64_t wb = cg_program_weight_bytes(p[i]);
		const unsigned char *wd = cg_program_weights(p[i]);
		bp[i] = (BundleProgram){name[i], NULL, man.n, mlen, wts.n, wb};
		for (size_t k = 0; k < mlen; k++)
			vec_push(&man, mt[k]);
		free(mt);
		if (wb)
			memcpy(wts.v + wts.n, wd, (size_t)wb);
		wts.n += BUNDLE_ALIGN_UP(wb);
	}
	prog = bundle_programs_print(bp, n, &plen);
	bundle_writer_init(&w, MOEC_VERSION);
	w.version = BUNDLE_VERSION_PROGRAMS;
	if (bundle_add(&w, "manifest", man.v, man.n, d) ||
	    bundle_add(&w, "programs", prog, plen, d) ||
	    (report && bundle_add(&w, "report", report, strlen(report), d)))
		goto out;
	for (int a = 0; a < na; a++) {
		snprintf(secname[a], sizeof secname[a], "ptx:%s", o->arch[arch[a]]);
		if (bundle_add(&w, secname[a], g.out[a].v, g.out[a].n, d))
			goto out;
	}
	if (o->cubin && cg_ptxas_path()) {	/* the merged modules assembled once more */
		CgPtxasJob job[8];
		for (int a = 0; a < na; a++)
			job[a] = (CgPtxasJob){g.out[a].v, g.out[a].n, o->arch[arch[a]], 1};
		if (cg_ptxas_many(job, na, cub, d))
			goto out;
		for (int a = 0; a < na; a++) {
			snprintf(secname[8 + a], sizeof secname[8 + a], "cubin:%s", o->arch[arch[a]]);
			if (cub[a].cubin && bundle_add(&w, secname[8 + a], cub[a].cubin,
						       cub[a].cubin_len, d))
				goto out;
		}
	}
	if (wts.n && bundle_add(&w, "weights", wts.v, wts.n, d))
		goto out;
	rc = bundle_write_file(&w, path, d);
out:
	for (int a = 0; a < 8; a++)
		cg_ptxas_free(&cub[a]);
	merge_free(&g);
	vec_free(&man);
	free(wts.v);
	free(prog);
	free(bp);
	return rc;
}
