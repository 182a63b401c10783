/*
 * emulate.c — run a compiled program's launch plan on the CPU emulator:
 * the same kernels, arguments, grids and memory plan the runtime uses on a
 * GPU, with host memory.  `moec test --emulate` checks generated code
 * against the reference outputs on a machine without a GPU.
 */
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "codegen.h"

typedef struct {
	unsigned char **w;	/* per weight */
	unsigned char *arena;
	const Tensor *in;
	Tensor *out;
	CgEmuBuf *buf;
	int nbuf;
} Mem;

static unsigned char *
pointer(const Manifest *m, Mem *mm, const MArg *a)
{
	switch (a->kind) {
	case ARG_IN: return mm->in[a->index].data;
	case ARG_OUT: return mm->out[a->index].data;
	case ARG_W: return mm->w[a->index];
	case ARG_BUF: return mm->arena + m->buf[a->index].offset + a->off;
	default: return NULL;
	}
}

/* Tensormap line t over this run's memory at T, in the emulator's encoding. */
static int
encode_tmap(const Manifest *m, Mem *mm, const MTmap *t, int64_t T, void *out, Diag *d)
{
	CgTmap c = {t->name, t->dt, t->rank, {{0}}, {0}, {1, 1, 1}, t->swizzle};

	for (int i = 0; i < t->rank; i++) {
		c.dims[i] = (CgExpr){t->dim[i].a, t->dim[i].b, t->dim[i].div};
		c.box[i] = t->box[i];
		if (i + 1 < t->rank)
			c.strides[i] = t->stride[i];
	}
	return cg_emu_tmap_encode(&c, pointer(m, mm, &t->of), T, out, d);
}

/* The clusters kernel's launches ask for (its kernel line's cluster=N), as the
 * runtime launches them (run.c launch_ex); 1: none.  By name: a manifest
 * built in memory has no step kidx (the parser fills it). */
static int
cluster_of(const Manifest *m, const char *kernel)
{
	int i = bundle_find_kernel(m, kernel);

	return i < 0 ? 1 : MAX(m->k[i].cluster, 1);
}

static int
run_step(CgModule *mod, const Manifest *m, Mem *mm, const MStep *s, int64_t T, Diag *d)
{
	uint64_t args[BUNDLE_MAXARGS];
	static _Alignas(64) unsigned char maps[BUNDLE_MAXARGS][128];
	CgEmuLaunch l;

	memset(&l, 0, sizeof l);
	for (int i = 0; i < 3; i++) {
		int64_t v;
		if (bundle_expr_eval(&s->grid[i], T, &v) || v < 1 || v > INT32_MAX)
			return diag_error(d, LOC_NONE, "kernel %s: grid dim %d out of range at T=%lld",
					  s->kernel, i, (long long)T);
		l.grid[i] = (int)v;
		l.block[i] = s->block[i];
	}
	for (int i = 0; i < s->narg; i++) {
		const MArg *a = &s->arg[i];
		switch (a->kind) {
		case ARG_T: args[i] = (uint64_t)T; break;
		case ARG_I32: case ARG_I64: args[i] = (uint64_t)a->v.i; break;
		case ARG_U64: args[i] = a->v.u; break;
		case ARG_F32: { uint32_t b; memcpy(&b, &a->v.f, 4); args[i] = b; break; }
		case ARG_TMAP:
			if (encode_tmap(m, mm, &m->tmap[a->index], T, maps[i], d) < 0)
				return diag_error(d, LOC_NONE, "kernel %s: tensormap %s", s->kernel,
						  m->tmap[a->index].name);
			args[i] = (uint64_t)(uintptr_t)maps[i];
			break;
		default: args[i] = (uint64_t)(uintptr_t)pointer(m, mm, a); break;
		}
	}
	l.smem = s->smem;
	l.cluster = cluster_of(m, s->kernel);
	l.args = args;
	l.nargs = s->narg;
	l.buf = mm->buf;
	l.nbuf = mm->nbuf;
	return cg_emu_run(mod, s->kernel, &l, d);
}

static void
add_buf(Mem *mm, const void *p, size_t n)
{
	mm->buf[mm->nbuf++] = (CgEmuBuf){p, n};
}

static int
memset_step(const Manifest *m, Mem *mm, const MStep *s, int64_t T, Diag *d)
{
	int64_t n;

	if (bundle_expr_eval(&s->bytes, T, &n) || n < 0)
		return diag_error(d, LOC_NONE, "memset of %s: size out of range", s->dst.name);
	memset(pointer(m, mm, &s->dst), 0, (size_t)n);
	return 0;
}

/* One program's memory for a run: arena, generated weights, the caller's
 * inputs and outputs. */
typedef struct {
	CgProgram *p;
	const Manifest *m;
	CgModule *mod;
	unsigned char *gen;
	Mem mm;
	int next;		/* the next step to run */
} Run;

static void
run_free(Run *r)
{
	free(r->gen);
	free(r->mm.w);
	free(r->mm.buf);
	free(r->mm.arena);
}

static int
run_init(Run *r, CgProgram *p, const Tensor *in, Tensor *out, int64_t T, Diag *d)
{
	const Manifest *m = cg_program_manifest(p);
	const unsigned char *weights = cg_program_weights(p);
	Mem *mm = &r->mm;

	memset(r, 0, sizeof *r);
	r->p = p, r->m = m;
	if (!(r->mod = cg_program_module(p, "emu")))
		return diag_error(d, LOC_NONE, "the program was not compiled for the emulator (--arch=emu)");
	if (T < 1 || T > m->max_tokens)
		return diag_error(d, LOC_NONE, "T=%lld is outside 1..%lld", (long long)T,
				  (long long)m->max_tokens);
	mm->in = in;
	mm->out = out;
	mm->w = xcalloc((size_t)m->nw + 1, sizeof *mm->w);
	mm->buf = xcalloc((size_t)(m->nw + m->nin + m->nout + 2), sizeof *mm->buf);
	mm->arena = xcalloc(m->arena + 16, 1);
	add_buf(mm, mm->arena, m->arena);
	/* the workspace holds garbage, as a workspace shared with other programs
	 * does on the device: its flags must be zeroed by the plan (a memset, or
	 * the front: program.c's close_chain) */
	for (int i = 0; i < m->nbuf; i++)
		if (!strcmp(m->buf[i].name, "splitk$ws")) {
			int64_t n;
			if (!bundle_expr_eval(&m->buf[i].bytes, T, &n) && n > 0)
				memset(mm->arena + m->buf[i].offset, 0xa5, (size_t)n);
		}
	/* generated weights share one region as on the device, so a wrong
	 * lifetime plan shows here too; real weights are read in place */
	uint64_t *goff = xcalloc((size_t)m->nw + 1, sizeof *goff);
	uint64_t gsize = bundle_generated_layout(m, goff);
	if (gsize == UINT64_MAX || (uint64_t)(size_t)gsize != gsize) {
		free(goff);
		run_free(r);
		return diag_error(d, LOC_NONE, "generated weights overflow the address space");
	}
	r->gen = xcalloc((size_t)gsize + 16, 1);
	for (int i = 0; i < m->nw; i++) {
		mm->w[i] = m->w[i].synth ? r->gen + goff[i] : (unsigned char *)weights + m->w[i].at;
		add_buf(mm, mm->w[i], m->w[i].bytes);
	}
	free(goff);
	for (int i = 0; i < m->nin; i++)
		add_buf(mm, in[i].data, tensor_nbytes(&in[i]));
	for (int i = 0; i < m->nout; i++)
		add_buf(mm, out[i].data, tensor_nbytes(&out[i]));
	return 0;
}

/* Run steps up to the next all_to_all (left for the caller: r->next is it)
 * or the end (r->next == nstep). */
static int
run_until_exchange(Run *r, int64_t T, Diag *d)
{
	for (; r->next < r->m->nstep; r->next++) {
		const MStep *s = &r->m->step[r->next];
		if (!bundle_step_runs(s, T))
			continue;
		if (s->kind == STEP_ALL_TO_ALL)
			return 0;
		if (s->kind == STEP_MEMSET ? memset_step(r->m, &r->mm, s, T, d)
					   : run_step(r->mod, r->m, &r->mm, s, T, d))
			return -1;
	}
	return 0;
}

/*
 * The all_to_all step every rank has reached: chunk d of rank s's src to
 * chunk s of rank d's dst, as NCCL's grouped send/recv would.  Every rank
 * must be at the same step with the same chunk size.
 */
static int
exchange(Run *r, int n, int64_t T, Diag *d)
{
	int64_t chunk[IR_EP_MAX_RANKS];

	for (int i = 0; i < n; i++) {
		const MStep *s = r[i].next < r[i].m->nstep ? &r[i].m->step[r[i].next] : NULL;
		if (!s || bundle_expr_eval(&s->bytes, T, &chunk[i]) || chunk[i] < 0 ||
		    (i && chunk[i] != chunk[0]))
			return diag_error(d, LOC_NONE, "rank %d: %s", i, s ? "its all_to_all moves other "
					  "chunks than rank 0's" : "its plan has fewer all_to_all steps "
					  "than rank 0's");
	}
	for (int dst = 0; dst < n; dst++) {
		const MStep *s = &r[dst].m->step[r[dst].next];
		unsigned char *to = pointer(r[dst].m, &r[dst].mm, &s->dst);
		for (int src = 0; src < n; src++) {
			const MStep *t = &r[src].m->step[r[src].next];
			const unsigned char *from = pointer(r[src].m, &r[src].mm, &t->src);
			memcpy(to + (size_t)src * (size_t)chunk[0], from + (size_t)dst * (size_t)chunk[0],
			       (size_t)chunk[0]);
		}
	}
	for (int i = 0; i < n; i++)
		r[i].next++;
	return 0;
}

/* The bytes of every when=shared memset are 0 after the run, as the
 * runtime's skipping them on its own arena needs (the next run's flags). */
static int
kept_zero(Run *r, int64_t T, Diag *d)
{
	for (int i = 0; i < r->m->nstep; i++) {
		const MStep *s = &r->m->step[i];
		int64_t n;
		if (s->kind != STEP_MEMSET || !s->shared_only || !bundle_step_runs(s, T) ||
		    bundle_expr_eval(&s->bytes, T, &n))
			continue;
		const unsigned char *at = pointer(r->m, &r->mm, &s->dst);
		for (int64_t j = 0; j < n; j++)
			if (at[j])
				return diag_error(d, LOC_NONE, "memset of %s (step %d, when=shared): byte "
						  "%lld is %d after the run, not 0: a run on the program's "
						  "own arena, which skips it, would start with it set",
						  s->dst.name, i, (long long)j, at[j]);
	}
	return 0;
}

int
cg_programs_emulate(CgProgram *const *p, int n, const Tensor *const *in, Tensor *const *out,
		    int64_t T, Diag *d)
{
	Run r[IR_EP_MAX_RANKS];
	int rc = -1, ready = 0;

	if (n < 1 || n > IR_EP_MAX_RANKS)
		return diag_error(d, LOC_NONE, "ranks must be in 1..%d, not %d", IR_EP_MAX_RANKS, n);
	for (int i = 0; i < n; i++) {
		int ranks = cg_program_manifest(p[i])->ep_ranks;
		if (ranks > 1 && ranks != n)
			return diag_error(d, LOC_NONE, "program %d is a rank of %d, not of the %d run "
					  "together", i, ranks, n);
	}
	for (; ready < n; ready++)
		if (run_init(&r[ready], p[ready], in[ready], out[ready], T, d))
			goto out;
	for (;;) {	/* every rank to its next exchange, then the exchange */
		int done = 0;
		for (int i = 0; i < n; i++) {
			if (run_until_exchange(&r[i], T, d)) {
				if (n > 1)
					diag_error(d, LOC_NONE, "rank %d failed (above)", i);
				goto out;
			}
			done += r[i].next == r[i].m->nstep;
		}
		if (done == n)
			break;
		if (exchange(r, n, T, d))
			goto out;
	}
	for (int i = 0; i < n; i++)
		if (kept_zero(&r[i], T, d))
			goto out;
	rc = 0;
out:
	for (int i = 0; i < ready; i++)
		run_free(&r[i]);
	return rc;
}

int
cg_program_emulate(CgProgram *p, const Tensor *in, Tensor *out, int64_t T, Diag *d)
{
	return cg_programs_emulate(&p, 1, &in, &out, T, d);
}
