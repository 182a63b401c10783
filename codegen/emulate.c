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

int
cg_program_emulate(CgProgram *p, const Tensor *in, Tensor *out, int64_t T, Diag *d)
{
	const Manifest *m = cg_program_manifest(p);
	CgModule *mod = cg_program_module(p, "emu");
	const unsigned char *weights = cg_program_weights(p);
	int rc = -1;
	unsigned char *gen = NULL;
	Mem mm;

	if (!mod)
		return diag_error(d, LOC_NONE, "the program was not compiled for the emulator (--arch=emu)");
	if (T < 1 || T > m->max_tokens)
		return diag_error(d, LOC_NONE, "T=%lld is outside 1..%lld", (long long)T,
				  (long long)m->max_tokens);
	memset(&mm, 0, sizeof mm);
	mm.in = in;
	mm.out = out;
	mm.w = xcalloc((size_t)m->nw + 1, sizeof *mm.w);
	mm.buf = xcalloc((size_t)(m->nw + m->nin + m->nout + 2), sizeof *mm.buf);
	mm.arena = xcalloc(m->arena + 16, 1);
	add_buf(&mm, mm.arena, m->arena);
	/* generated weights share one region as on the device, so a wrong
	 * lifetime plan shows here too; real weights are read in place */
	uint64_t *goff = xcalloc((size_t)m->nw + 1, sizeof *goff);
	uint64_t gsize = bundle_generated_layout(m, goff);
	if (gsize == UINT64_MAX || (uint64_t)(size_t)gsize != gsize) {
		free(goff);
		free(mm.w), free(mm.buf), free(mm.arena);
		return diag_error(d, LOC_NONE, "generated weights overflow the address space");
	}
	gen = xcalloc((size_t)gsize + 16, 1);
	for (int i = 0; i < m->nw; i++) {
		mm.w[i] = m->w[i].synth ? gen + goff[i] : (unsigned char *)weights + m->w[i].at;
		add_buf(&mm, mm.w[i], m->w[i].bytes);
	}
	free(goff);
	for (int i = 0; i < m->nin; i++)
		add_buf(&mm, in[i].data, tensor_nbytes(&in[i]));
	for (int i = 0; i < m->nout; i++)
		add_buf(&mm, out[i].data, tensor_nbytes(&out[i]));
	for (int i = 0; i < m->nstep; i++) {
		const MStep *s = &m->step[i];
		if (!bundle_step_runs(s, T))
			continue;
		if (s->kind == STEP_MEMSET ? memset_step(m, &mm, s, T, d)
					   : run_step(mod, m, &mm, s, T, d))
			goto out;
	}
	rc = 0;
out:
	free(gen);
	free(mm.w);
	free(mm.buf);
	free(mm.arena);
	return rc;
}
