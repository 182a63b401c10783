/*
 * inspect.c — `moec inspect X.moeb`: what a bundle holds — sections with
 * sizes and checksums, inputs and outputs, weights, the memory plan, every
 * kernel with its registers, shared memory and spills, the launch plan, and
 * the fusion report.
 */
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "moec.h"

enum { OK = 0, FAIL = 1, BAD = 2 };

static void
tensor_line(FILE *f, const char *what, const MTensor *t)
{
	char e[64];

	fprintf(f, "  %s %s %s[", what, t->name, dtype_name(t->dt));
	for (int i = 0; i < t->rank; i++) {
		bundle_expr_print(e, sizeof e, &t->dim[i]);
		fprintf(f, "%s%s", i ? "," : "", e);
	}
	fprintf(f, "]\n");
}

static void
print_manifest(FILE *f, const Manifest *m)
{
	uint64_t real = 0, synth = 0;
	char e[64], g[3][64];

	fprintf(f, "manifest: moeb %d, moec %s, max_tokens %lld, arena %.2f MiB%s\n", m->version,
		m->moec, (long long)m->max_tokens, (double)m->arena / (1 << 20),
		m->synthetic ? ", synthetic weights" : "");
	if (m->source)
		fprintf(f, "  source %s (%s)\n", m->source, m->model ? m->model : "?");
	if (m->precision != DT_F32)
		fprintf(f, "  precision %s (the results' rounding: f32 GEMM operands rounded to it, or results computed in it)\n",
			dtype_name(m->precision));
	if (m->ep_ranks)
		fprintf(f, "  expert parallelism: rank %d of %d, experts %s\n", m->ep_rank, m->ep_ranks,
			m->ep_experts);
	for (int i = 0; i < m->nin; i++)
		tensor_line(f, "input ", &m->in[i]);
	for (int i = 0; i < m->nout; i++)
		tensor_line(f, "output", &m->out[i]);
	uint64_t *off = xcalloc((size_t)m->nw + 1, sizeof *off), region = bundle_generated_layout(m, off);

	free(off);
	for (int i = 0; i < m->nw; i++)
		*(m->w[i].synth ? &synth : &real) += m->w[i].bytes;
	fprintf(f, "weights: %d (%.2f MiB packed, %.2f MiB generated on the device", m->nw,
		(double)real / (1 << 20), (double)synth / (1 << 20));
	if (region != UINT64_MAX && region < synth)	/* lifetimes planned: dead ones reused */
		fprintf(f, " in %.2f MiB", (double)region / (1 << 20));
	fputs(")\n", f);
	fprintf(f, "buffers: %d in the arena\n", m->nbuf);
	for (int i = 0; i < m->nbuf; i++) {
		bundle_expr_print(e, sizeof e, &m->buf[i].bytes);
		fprintf(f, "  %-24s offset %-10llu bytes %s\n", m->buf[i].name,
			(unsigned long long)m->buf[i].offset, e);
	}
	fprintf(f, "kernels: %d\n", m->nk);
	for (int i = 0; i < m->nk; i++)
		fprintf(f, "  %-32s regs %3d  smem %6d  spills %d\n", m->k[i].name, m->k[i].regs,
			m->k[i].smem, m->k[i].spills);
	fprintf(f, "plan: %d steps\n", m->nstep);
	for (int i = 0; i < m->nstep; i++) {
		const MStep *s = &m->step[i];
		if (s->kind == STEP_MEMSET) {
			bundle_expr_print(e, sizeof e, &s->bytes);
			fprintf(f, "  memset %s bytes=%s%s\n", s->dst.name, e,
				s->shared_only ? " (only on a shared workspace)" : "");
			continue;
		}
		if (s->kind == STEP_ALL_TO_ALL) {
			bundle_expr_print(e, sizeof e, &s->bytes);
			fprintf(f, "  all_to_all %s -> %s, %s bytes per peer\n", s->src.name, s->dst.name, e);
			continue;
		}
		for (int k = 0; k < 3; k++)
			bundle_expr_print(g[k], sizeof g[k], &s->grid[k]);
		fprintf(f, "  %-6s %-32s grid=%s,%s,%s block=%d smem=%d", s->kind == STEP_INIT ? "init" : "launch",
			s->kernel, g[0], g[1], g[2], s->block[0] * s->block[1] * s->block[2], s->smem);
		if (s->thi)
			fprintf(f, "  for T in %lld..%lld", (long long)s->tlo, (long long)s->thi);
		if (s->arch)
			fprintf(f, "  on %s", s->arch);
		fputc('\n', f);
	}
	if (m->ncand)
		fprintf(f, "tuning candidates: %d (moert tune)\n", m->ncand);
	for (int i = 0; i < m->ncand; i++) {
		const MCand *c = &m->cand[i];
		fprintf(f, "  %-32s for step %d (%s), out=%d %s, key %s, variant %s\n", c->s.kernel,
			c->of, m->step[c->of].kernel, c->out, dtype_name(c->dt), c->key, c->variant);
	}
	if (m->has_cost) {
		bundle_expr_print(g[0], sizeof g[0], &m->flops);
		bundle_expr_print(g[1], sizeof g[1], &m->bytes);
		fprintf(f, "cost: flops=%s bytes=%s\n", g[0], g[1]);
	}
}

/* Program `name`'s part of a whole-model report ("# program NAME" to the next). */
static void
print_report_of(FILE *f, const Bundle *b, const char *name)
{
	const BundleSection *r = bundle_find(b, "report");
	char head[300];
	const char *t, *end, *s, *e;

	if (!r)
		return;
	t = (const char *)r->data, end = t + r->size;
	snprintf(head, sizeof head, "# program %s\n", name);
	for (s = t; s < end; s++)
		if ((s == t || s[-1] == '\n') && (size_t)(end - s) >= strlen(head) &&
		    !memcmp(s, head, strlen(head)))
			break;
	if (s >= end)
		return;
	s += strlen(head);
	for (e = s; e < end; e++)
		if (e[-1] == '\n' && (size_t)(end - e) >= 10 && !memcmp(e, "# program ", 10))
			break;
	fprintf(f, "%.*s", (int)(e - s), s);
}

/* A bundle of several programs: each one's kernels and weights, and how
 * many distinct kernels they share (codegen/whole.c keeps each once). */
static void
print_programs(FILE *f, const Bundle *b)
{
	int total = 0, distinct = 0;

	fprintf(f, "programs: %d\n", b->nprog);
	for (int i = 0; i < b->nprog; i++) {
		const Manifest *m = b->prog[i].manifest;
		int own = 0;
		for (int k = 0; k < m->nk; k++) {
			int seen = 0;
			for (int j = 0; j < i && !seen; j++)
				seen = bundle_find_kernel(b->prog[j].manifest, m->k[k].name) >= 0;
			own += !seen;
		}
		fprintf(f, "  %-12s kernels %3d (%d new)  steps %3d  weights %2d  %.2f MiB packed\n",
			b->prog[i].name, m->nk, own, m->nstep, m->nw,
			(double)b->prog[i].wlen / (1 << 20));
		total += m->nk, distinct += own;
	}
	fprintf(f, "kernels: %d distinct of %d in %d programs\n", distinct, total, b->nprog);
}

int
moec_cmd_inspect(int argc, char **argv)
{
	Diag d;
	Arena *a;
	Bundle b;
	size_t len;
	int status, rc;
	unsigned char *buf;
	OptArgs o;
	MoecOpts mo;
	const char *path;

	if ((rc = moec_args("inspect", argc, argv, &o, &mo, &d)) >= 0)
		return rc;
	rc = BAD;
	path = o.pos[0];
	if (!(buf = bundle_read_file(path, &len, &status, &d)))
		return BAD;
	a = arena_new(0);
	if (bundle_read(a, path, buf, len, &b, &d) == BUNDLE_OK) {
		printf("%s: moeb version %u, written by moec %s, %llu bytes\n", path, b.version,
		       b.moec, (unsigned long long)b.size);
		for (int i = 0; i < b.nsec; i++)
			printf("  section %-16s %12llu bytes  crc32c %08x\n", b.sec[i].name,
			       (unsigned long long)b.sec[i].size, b.sec[i].crc);
		const char *want = opt_str(&o, "program");
		int prog = want ? bundle_find_program(&b, want) : 0;
		if (b.version == BUNDLE_VERSION_PROGRAMS)
			print_programs(stdout, &b);
		if (prog < 0) {
			opt_bad(&o, "program", want, "names no program of the bundle");
		} else if (b.version == BUNDLE_VERSION && !want) {
			print_manifest(stdout, b.manifest);
			const BundleSection *r = bundle_find(&b, "report");
			if (r)
				printf("%.*s", (int)r->size, (const char *)r->data);
			rc = OK;
		} else {
			if (want) {	/* one program: its manifest and its part of the report */
				printf("program %s:\n", b.prog[prog].name);
				print_manifest(stdout, b.prog[prog].manifest);
				print_report_of(stdout, &b, want);
			}
			rc = OK;
		}
	}
	arena_free(a);
	free(buf);
	return rc;
}
