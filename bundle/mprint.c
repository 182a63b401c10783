/*
 * mprint.c — the manifest as text, in the one canonical spelling the parser
 * reads back: print(parse(text)) == text.  Lines come out in the order of
 * docs/bundle.md §2; optional header lines only when set.  Weights and
 * buffers in args are printed by name, so a compiler that fills a Manifest
 * need not resolve indices.
 */
#include <stdlib.h>
#include <string.h>

#include "bundle.h"

static const char *
nm(const char *s)
{
	return s ? s : "?";	/* unset: printed so that the parser refuses it */
}

static void
expr(FILE *f, const MExpr *e)
{
	char buf[80];

	bundle_expr_print(buf, sizeof buf, e);
	fputs(buf, f);
}

static void
dims(FILE *f, const MTensor *t)
{
	for (int i = 0; i < t->rank; i++) {
		if (i)
			fputc(',', f);
		expr(f, &t->dim[i]);
	}
}

/* Version 2 when an input or output name must be quoted, so that bundles
 * without such names read as before, and old readers refuse the others by
 * their version. */
static int
version(const Manifest *m)
{
	char buf[4 * 256 + 4];
	int v = m->version;

	for (int i = 0; i < m->nin + m->nout; i++) {
		const char *s = i < m->nin ? m->in[i].name : m->out[i - m->nin].name;
		if (s && bundle_name_quoted(buf, sizeof buf, s))
			v = MAX(v, BUNDLE_MANIFEST_QUOTED);
	}
	return v;
}

static void
header(FILE *f, const Manifest *m)
{
	fprintf(f, "moeb %d\nmoec %s\n", version(m), nm(m->moec));
	if (m->source)
		fprintf(f, "source %s\n", m->source);
	if (m->model)
		fprintf(f, "model %s\n", m->model);
	if (m->synthetic)
		fprintf(f, "synthetic %llu\n", (unsigned long long)m->seed);
	else
		fputs("synthetic none\n", f);
	fprintf(f, "max_tokens %lld\nsym T\narena %llu\n",
		(long long)m->max_tokens, (unsigned long long)m->arena);
	if (m->has_cost) {
		fputs("cost flops=", f);
		expr(f, &m->flops);
		fputs(" bytes=", f);
		expr(f, &m->bytes);
		fputc('\n', f);
	}
	if (m->precision != DT_F32)
		fprintf(f, "precision %s\n", dtype_name(m->precision));
	if (m->ep_ranks)
		fprintf(f, "ep rank=%d ranks=%d experts=%s\n", m->ep_rank, m->ep_ranks,
			nm(m->ep_experts));
}

static void
tensors(FILE *f, const char *kw, const MTensor *t, int n)
{
	char buf[4 * 256 + 4];

	for (int i = 0; i < n; i++) {
		if (t[i].name)
			bundle_name_quoted(buf, sizeof buf, t[i].name);
		fprintf(f, "%s %s %s ", kw, t[i].name ? buf : nm(NULL),
			(unsigned)t[i].dt < NDTYPE ? dtype_name(t[i].dt) : "?");
		dims(f, &t[i]);
		fputc('\n', f);
	}
}

static void
weight(FILE *f, const MWeight *w)
{
	fprintf(f, "weight %s %s ", nm(w->name),
		(unsigned)w->dt < NDTYPE ? dtype_name(w->dt) : "?");
	for (int i = 0; i < w->rank; i++)
		fprintf(f, "%s%lld", i ? "," : "", (long long)w->dim[i]);
	fprintf(f, " bytes=%llu ", (unsigned long long)w->bytes);
	if (w->synth && w->at == MW_NEXT)
		fputs("synth\n", f);
	else if (w->synth)
		fprintf(f, "synth=%llu\n", (unsigned long long)w->at);
	else
		fprintf(f, "at=%llu\n", (unsigned long long)w->at);
}

static void
kernel(FILE *f, const MKernel *k)
{
	fprintf(f, "kernel %s target=", nm(k->name));
	for (int i = 0; i < k->ntarget; i++)
		fprintf(f, "%s%s", i ? "," : "", nm(k->target[i]));
	fputs(" params=", f);
	for (int i = 0; i < k->nparam; i++)
		fprintf(f, "%s%s", i ? "," : "", bundle_mtype_name(k->param[i]));
	fprintf(f, " regs=%d smem=%d spills=%d", k->regs, k->smem, k->spills);
	if (k->cluster > 1)
		fprintf(f, " cluster=%d", k->cluster);
	if (k->pdl)
		fputs(" pdl=1", f);
	fputc('\n', f);
}

/* A weight or buffer by name, or by index when only that is set. */
static const char *
ref(const Manifest *m, const MArg *a)
{
	if (a->name)
		return a->name;
	if (a->kind == ARG_W && a->index >= 0 && a->index < m->nw)
		return nm(m->w[a->index].name);
	if (a->kind == ARG_BUF && a->index >= 0 && a->index < m->nbuf)
		return nm(m->buf[a->index].name);
	return "?";
}

static void
arg(FILE *f, const Manifest *m, const MArg *a)
{
	switch (a->kind) {
	case ARG_IN: fprintf(f, "in:%d", a->index); break;
	case ARG_OUT: fprintf(f, "out:%d", a->index); break;
	case ARG_W: fprintf(f, "w:%s", ref(m, a)); break;
	case ARG_BUF:
		fprintf(f, "buf:%s", ref(m, a));
		if (a->off)
			fprintf(f, "+%llu", (unsigned long long)a->off);
		break;
	case ARG_T: fputc('T', f); break;
	case ARG_I32:
	case ARG_I64:
		fprintf(f, "%s:%lld", a->kind == ARG_I32 ? "i32" : "i64",
			(long long)a->v.i);
		break;
	case ARG_U64: fprintf(f, "u64:%llu", (unsigned long long)a->v.u); break;
	case ARG_F32: fprintf(f, "f32:%.9g", (double)a->v.f); break;
	case ARG_TMAP:
		fprintf(f, "tmap:%s", a->name ? a->name
				      : a->index >= 0 && a->index < m->ntmap ? nm(m->tmap[a->index].name) : "?");
		break;
	default: fputc('?', f); break;
	}
}

static void
tensormap(FILE *f, const Manifest *m, const MTmap *t)
{
	fprintf(f, "tensormap %s of=", nm(t->name));
	arg(f, m, &t->of);
	fprintf(f, " dtype=%s dims=", (unsigned)t->dt < NDTYPE ? dtype_name(t->dt) : "?");
	for (int i = 0; i < t->rank; i++) {
		if (i)
			fputc(',', f);
		expr(f, &t->dim[i]);
	}
	fputs(" strides=", f);
	for (int i = 0; i + 1 < t->rank; i++)
		fprintf(f, "%s%lld", i ? "," : "", (long long)t->stride[i]);
	fputs(" box=", f);
	for (int i = 0; i < t->rank; i++)
		fprintf(f, "%s%d", i ? "," : "", t->box[i]);
	fprintf(f, " swizzle=%d\n", t->swizzle);
}

static void launch(FILE *f, const Manifest *m, const MStep *s);

static void
step(FILE *f, const Manifest *m, const MStep *s)
{
	if (s->kind == STEP_ALL_TO_ALL) {
		fputs("all_to_all src=", f);
		arg(f, m, &s->src);
		fputs(" dst=", f);
		arg(f, m, &s->dst);
		fputs(" chunk=", f);
		expr(f, &s->bytes);
		fputc('\n', f);
		return;
	}
	if (s->kind == STEP_MEMSET) {
		fputs("memset ", f);
		arg(f, m, &s->dst);
		fputs(" bytes=", f);
		expr(f, &s->bytes);
		fputs(s->shared_only ? " when=shared\n" : "\n", f);
		return;
	}
	fprintf(f, "%s ", s->kind == STEP_INIT ? "init" : "launch");
	launch(f, m, s);
	if (s->kind == STEP_LAUNCH && s->thi)
		fprintf(f, " tokens=%lld..%lld", (long long)s->tlo, (long long)s->thi);
	if (s->kind == STEP_LAUNCH && s->arch)
		fprintf(f, " arch=%s", s->arch);
	fputc('\n', f);
}

/* "KERNEL grid=... block=... smem=... args=..." of a launch, init or candidate line. */
static void
launch(FILE *f, const Manifest *m, const MStep *s)
{
	fprintf(f, "%s grid=", s->kernel ? s->kernel
		: s->kidx >= 0 && s->kidx < m->nk ? nm(m->k[s->kidx].name) : "?");
	for (int i = 0; i < 3; i++) {
		if (i)
			fputc(',', f);
		expr(f, &s->grid[i]);
	}
	fprintf(f, " block=%d,%d,%d smem=%d args=", s->block[0], s->block[1],
		s->block[2], s->smem);
	for (int i = 0; i < s->narg; i++) {
		if (i)
			fputc(',', f);
		arg(f, m, &s->arg[i]);
	}
}

void
bundle_manifest_fprint(FILE *f, const Manifest *m)
{
	header(f, m);
	tensors(f, "input", m->in, m->nin);
	tensors(f, "output", m->out, m->nout);
	for (int i = 0; i < m->nw; i++)
		weight(f, &m->w[i]);
	for (int i = 0; i < m->nbuf; i++) {
		fprintf(f, "buffer %s offset=%llu bytes=", nm(m->buf[i].name),
			(unsigned long long)m->buf[i].offset);
		expr(f, &m->buf[i].bytes);
		fputc('\n', f);
	}
	for (int i = 0; i < m->nk; i++)
		kernel(f, &m->k[i]);
	for (int i = 0; i < m->ntmap; i++)
		tensormap(f, m, &m->tmap[i]);
	for (int i = 0; i < m->nstep; i++)
		step(f, m, &m->step[i]);
	for (int i = 0; i < m->nroute; i++) {
		const MRoute *r = &m->route[i];
		fprintf(f, "route logits=%s dtype=%s ids=%s experts=%d k=%d groups=%d,%d score=%s",
			nm(r->logits), (unsigned)r->dt < NDTYPE ? dtype_name(r->dt) : "?",
			nm(r->ids), r->experts, r->k, r->groups, r->topk_group,
			r->top2 ? "top2" : "max");
		if (r->select != ROUTE_SELECT_LOGIT || r->bias)	/* else the old line */
			fprintf(f, " select=%s", route_select_name(r->select));
		if (r->bias)
			fprintf(f, " bias=w:%s", r->bias);
		fputc('\n', f);
	}
	for (int i = 0; i < m->ncand; i++) {
		const MCand *c = &m->cand[i];
		fputs("candidate ", f);
		launch(f, m, &c->s);
		fprintf(f, " of=%d out=%d dtype=%s key=%s variant=%s tokens=%lld..%lld\n", c->of,
			c->out, (unsigned)c->dt < NDTYPE ? dtype_name(c->dt) : "?", c->key, c->variant,
			(long long)c->s.tlo, (long long)c->s.thi);
	}
}

char *
bundle_manifest_print(const Manifest *m, size_t *len)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);

	if (!f)
		die("open_memstream failed");
	bundle_manifest_fprint(f, m);
	fclose(f);
	if (len)
		*len = n;
	return s;
}
