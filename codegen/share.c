/*
 * share.c — a kernel that two targets' modules hold alike goes through LLVM once.
 *
 *	module sm_80:   k0 k1 k2 k3(mma.sync) ...     LLVM -> PTX (the donor)
 *	module sm_90a:  k0 k1 k2 k3(wgmma) ...        k0 k1 k2 emptied (ret), LLVM -> PTX,
 *	                                              then each emptied entry's text
 *	                                              replaced by the donor's
 *
 * Most of a block's kernels (the router GEMM on CUDA cores, routing,
 * permutation, norms, sums, casts, init) build to the same IR for every
 * target, and the NVPTX backend writes the same PTX for each: a third of a
 * Mixtral layer's LLVM time went into the second copy.  A kernel is shared
 * when its function prints the same before O3 in both modules, its launch
 * bounds are the same (LLVM 20 and older keep them out of the function, in
 * nvvm.annotations), it names no global but the dynamic shared memory (a
 * module's own constant tables are not in the other's PTX), and the
 * donor's PTX is valid for the receiver (cg_target_ptx_fits: the lower sm
 * and PTX ISA, no arch-specific features).  The receiver then assembles
 * the donor's text in its own module: the same bytes as its own backend
 * would have written for the Mixtral and DeepSeek layers (checked: their
 * bundles are byte-identical with and without sharing).
 */
#define CG_INTERNAL
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

struct CgShare {
	int donor;		/* module index; -1: nothing shared */
	int n;
	char **names;		/* per module: its shared kernels' names, '\0'-separated, "" ended */
};

/* The function prints with no global but itself, moec_smem and intrinsics. */
static int
self_contained(const char *ir, const char *self)
{
	for (const char *p = strchr(ir, '@'); p; p = strchr(p + 1, '@')) {
		size_t n = strspn(p + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.$");
		if (n == strlen(self) && !strncmp(p + 1, self, n))
			continue;
		if ((n == 9 && !strncmp(p + 1, "moec_smem", 9)) || !strncmp(p + 1, "llvm.", 5))
			continue;
		return 0;
	}
	return 1;
}

static int
same_bounds(const CgKernel *a, const CgKernel *b)
{
	return a->block[0] == b->block[0] && a->block[1] == b->block[1] && a->block[2] == b->block[2] &&
	       a->min_ctas == b->min_ctas;
}

/* Empty fn's body to `ret void`: every value's uses first, then the
 * instructions, then the blocks (no branch refers to them any more). */
static void
stub(CgModule *m, LLVMValueRef fn)
{
	LLVMBuilderRef B;

	for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
		for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i))
			if (LLVMGetTypeKind(LLVMTypeOf(i)) != LLVMVoidTypeKind)
				LLVMReplaceAllUsesWith(i, LLVMGetPoison(LLVMTypeOf(i)));
	for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
		for (LLVMValueRef i = LLVMGetLastInstruction(bb); i;) {
			LLVMValueRef prev = LLVMGetPreviousInstruction(i);
			LLVMInstructionEraseFromParent(i);
			i = prev;
		}
	while (LLVMGetFirstBasicBlock(fn))
		LLVMDeleteBasicBlock(LLVMGetFirstBasicBlock(fn));
	B = LLVMCreateBuilderInContext(m->C);
	LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(m->C, fn, "entry"));
	LLVMBuildRetVoid(B);
	LLVMDisposeBuilder(B);
}

static void
name_add(char **list, size_t *len, const char *name)
{
	size_t n = strlen(name) + 1;

	*list = xrealloc(*list, *len + n + 1);
	memcpy(*list + *len, name, n);
	*len += n;
	(*list)[*len] = 0;
}

CgShare *
cg_share_plan(CgModule **m, int n)
{
	CgShare *s = xcalloc(1, sizeof *s);
	int d = -1;

	s->n = n;
	s->donor = -1;
	s->names = xcalloc((size_t)n + 1, sizeof *s->names);
	for (int i = 0; i < n; i++) {	/* the donor: PTX that fits every other module */
		int fits = !m[i]->emu;
		for (int k = 0; k < n && fits; k++)
			fits = k == i || (!m[k]->emu && cg_target_ptx_fits(&m[i]->t, &m[k]->t));
		if (fits) {
			d = i;
			break;
		}
	}
	if (d < 0 || n < 2)
		return s;
	s->donor = d;
	for (int i = 0; i < n; i++) {
		size_t len = 0;
		if (i == d || m[i]->keep_ir)
			continue;
		for (int k = 0; k < m[i]->nkern; k++) {
			const CgKernel *a = &m[i]->kern[k], *b = cg_module_find(m[d], a->name);
			LLVMValueRef fa = LLVMGetNamedFunction(m[i]->M, a->name);
			LLVMValueRef fb = LLVMGetNamedFunction(m[d]->M, a->name);
			char *ta, *tb;
			int same;
			if (!b || !fa || !fb || !same_bounds(a, b) || LLVMCountBasicBlocks(fa) != LLVMCountBasicBlocks(fb))
				continue;
			ta = LLVMPrintValueToString(fa);
			tb = LLVMPrintValueToString(fb);
			same = strcmp(ta, tb) == 0 && self_contained(ta, a->name);
			LLVMDisposeMessage(ta);
			LLVMDisposeMessage(tb);
			if (!same)
				continue;
			stub(m[i], fa);
			name_add(&s->names[i], &len, a->name);
		}
	}
	return s;
}

int
cg_share_donor(const CgShare *s, int i)
{
	return s && s->donor >= 0 && i != s->donor && s->names[i] ? s->donor : -1;
}

int
cg_share_count(const CgShare *s, int i)
{
	int k = 0;

	for (const char *p = cg_share_donor(s, i) >= 0 ? s->names[i] : ""; *p; p += strlen(p) + 1)
		k++;
	return k;
}

/* [*b, *e): entry `name` of the PTX, from its .entry line to its closing
 * brace; 0 when it has none. */
static int
entry_span(const char *ptx, const char *name, const char **b, const char **e)
{
	size_t n = strlen(name);

	for (const char *l = ptx; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *p = cg_ptx_entry_name(l);
		const char *next, *close = NULL;
		if (!p || strncmp(p, name, n) || p[n] != '(')
			continue;
		next = strstr(p, "\n.visible .entry ");	/* LLVM writes entries so */
		if (!next)
			next = p + strlen(p);
		for (const char *c = strstr(p, "\n}\n"); c && c < next; c = strstr(c + 1, "\n}\n"))
			close = c;
		if (!close)
			return 0;
		*b = l;
		*e = close + 3;
		return 1;
	}
	return 0;
}

/* The first entry of the PTX (its end when it has none). */
static const char *
first_entry(const char *ptx)
{
	const char *e = strstr(ptx, "\n.visible .entry ");

	return e ? e + 1 : ptx + strlen(ptx);
}

/*
 * The dynamic shared memory's declaration, when the donor's PTX has it and
 * the receiver's lost it (LLVM drops it with the last kernel that used
 * it: the receiver's users may all be emptied), goes where LLVM writes it,
 * before the first entry.  *at: where the copy of rptx has got to.
 */
static void
smem_decl(const char *dptx, const char *rptx, char *out, size_t *at, const char **r)
{
	static const char decl[] = ".extern .shared .align 128 .b8 moec_smem[];\n";
	const char *dh = first_entry(dptx), *rh = first_entry(rptx), *p = strstr(dptx, decl);

	int blank = rh - rptx >= 2 && rh[-1] == '\n' && rh[-2] == '\n';	/* the blank line before it */

	if (!p || p > dh || (strstr(rptx, decl) && strstr(rptx, decl) < rh))
		return;
	if (blank)	/* "// .globl k\n" decl "\n" ".visible .entry k(" */
		rh--;
	memcpy(out + *at, rptx, (size_t)(rh - rptx));
	*at += (size_t)(rh - rptx);
	memcpy(out + *at, decl, sizeof decl - 1);
	*at += sizeof decl - 1;
	if (!blank)
		out[(*at)++] = '\n';
	*r = rh;
}

int
cg_share_splice(const CgShare *s, CgModule **m, int i, Diag *d)
{
	const char *dptx, *rptx, *r;
	char *out;
	size_t dlen, rlen, cap, at = 0;
	int k = cg_share_donor(s, i);

	if (k < 0)
		return 0;
	if (!(dptx = cg_module_ptx(m[k], &dlen, d)) || !(rptx = cg_module_ptx(m[i], &rlen, d)))
		return -1;
	cap = rlen + dlen + 128;
	out = xmalloc(cap);
	r = rptx;
	smem_decl(dptx, rptx, out, &at, &r);
	for (const char *name = s->names[i]; ; name += strlen(name) + 1) {
		const char *rb, *re, *db, *de;
		if (!*name) {	/* the rest of the receiver's text */
			memcpy(out + at, r, strlen(r) + 1);
			break;
		}
		if (!entry_span(r, name, &rb, &re) || !entry_span(dptx, name, &db, &de)) {
			free(out);
			return diag_error(d, LOC_NONE, "internal: the shared kernel %s is not in the PTX of %s "
					  "and %s", name, m[k]->t.sm, m[i]->t.sm);
		}
		memcpy(out + at, r, (size_t)(rb - r));
		at += (size_t)(rb - r);
		memcpy(out + at, db, (size_t)(de - db));
		at += (size_t)(de - db);
		r = re;
	}
	cg_module_set_ptx(m[i], out, strlen(out));
	free(out);
	return 0;
}

void
cg_share_free(CgShare *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n; i++)
		free(s->names[i]);
	free(s->names);
	free(s);
}
