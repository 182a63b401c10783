/*
 * ep.c — expert parallelism in the driver (--ep=N): one module per rank
 * (lower-moe writes the rank's part, passes/partition_ep.c), run together
 * by the interpreter as N emulated ranks, or written one file per rank.
 *
 *	moec run MODEL --ep=4 --input x=x.npy    x's rows split over 4 ranks, outputs joined
 *	moec compile MODEL --ep=4 --emit=ir -o out.ir    out.ep0.ir ... out.ep3.ir
 */
#include <stdlib.h>
#include <string.h>

#include "moec.h"

enum { OK = 0, FAIL = 1, BAD = 2 };

/* The --ep options into o->ep (ranks 0: none); OK or BAD. */
int
moec_ep_apply(const OptArgs *a, MoecOpts *o)
{
	int64_t n;

	memset(&o->ep, 0, sizeof o->ep);
	if (!opt_takes(a, "ep"))
		return OK;
	o->ep.placement = opt_str(a, "ep-placement");
	const char *comb = opt_str(a, "ep-combine");
	if (!opt_int(a, "ep", &n)) {
		if (o->ep.placement)
			return opt_bad(a, "ep-placement", o->ep.placement, "needs --ep=N"), BAD;
		if (opt_has(a, "ep-combine"))
			return opt_bad(a, "ep-combine", comb, "needs --ep=N"), BAD;
		return OK;
	}
	if (comb && strcmp(comb, "sum") && strcmp(comb, "slots"))
		return opt_bad(a, "ep-combine", comb, "sum or slots"), BAD;
	o->ep.slots = comb && !strcmp(comb, "slots");
	o->ep.ranks = (int)n;
	if (n > 1 && opt_has(a, "check-eval"))	/* checkeval.c runs one graph alone */
		return opt_error(a, "--check-eval with --ep=%d: a rank's graph runs only together with its "
				 "peers (moec run --ep compares the ranks' joint result instead)", (int)n), BAD;
	return OK;
}

/* OUT.x -> OUT.epR.x (as --emit=ptx names one file per target). */
char *
moec_ep_path(const char *out, int rank)
{
	const char *base = file_basename(out), *dot = strrchr(base, '.');
	size_t k = dot && dot != base ? (size_t)(dot - out) : strlen(out);
	char *p = NULL;

	if (asprintf(&p, "%.*s.ep%d%s", (int)k, out, rank, out + k) < 0)
		die("out of memory");
	return p;
}

/* Every rank's module, loaded and through the pipeline; NULLs on error. */
int
moec_ep_modules(const char *model, MoecOpts *o, Module **m, Report *rep, Diag *d)
{
	int rc = OK;

	for (int r = 0; r < o->ep.ranks && rc == OK; r++) {
		o->ep.rank = r;
		if (!(m[r] = moec_load(model, o, d)))
			rc = BAD;
		else
			rc = moec_passes(m[r], o, r ? NULL : rep, d);
	}
	if (rc != OK)
		for (int r = 0; r < o->ep.ranks; r++) {
			ir_free_module(m[r]);
			m[r] = NULL;
		}
	return rc;
}

/* Rows [lo, lo+n) of t, a view. */
static Tensor
rows_of(const Tensor *t, int64_t lo, int64_t n)
{
	Tensor v = *t;
	size_t row = tensor_nbytes(t) / (size_t)t->dim[0];

	v.dim[0] = n;
	v.data = (char *)t->data + (size_t)lo * row;
	v.name = NULL;
	return v;
}

/* Rank r's results stacked along dim 0 into one tensor per result. */
static int
join(Tensor *const *part, int nrank, int nret, Tensor *out, Diag *d)
{
	for (int i = 0; i < nret; i++) {
		Tensor t = part[0][i];
		size_t off = 0;
		for (int r = 1; r < nrank; r++)
			t.dim[0] += part[r][i].dim[0];
		if (t.rank < 1 || tensor_alloc(&out[i], t.dt, t.rank, t.dim))
			return diag_error(d, LOC_NONE, "result %d: cannot join the ranks' rows", i);
		for (int r = 0; r < nrank; r++) {
			size_t n = tensor_nbytes(&part[r][i]);
			memcpy((char *)out[i].data + off, part[r][i].data, n);
			off += n;
		}
	}
	return 0;
}

/*
 * The ranks run together on the inputs' rows split evenly (each rank its
 * own T tokens, as serving engines give them), and the results joined in
 * rank order: the same rows the unpartitioned block would give.
 */
int
moec_ep_eval(Module *const *m, int nrank, const Tensor *in, int nin, Tensor *out,
	     const EvalOpts *eo, Diag *d)
{
	Graph *g[IR_EP_MAX_RANKS];
	Tensor *part_in[IR_EP_MAX_RANKS], *part_out[IR_EP_MAX_RANKS];
	int nret = ir_main_graph(m[0])->nret, rc = -1;

	for (int i = 0; i < nin; i++)
		if (in[i].rank < 1 || in[i].dim[0] % nrank)
			return diag_error(d, LOC_NONE, "--ep=%d: input %d has %lld rows, not a multiple "
					  "of the ranks (every rank runs the same token count)", nrank,
					  i, in[i].rank ? (long long)in[i].dim[0] : 0LL);
	for (int r = 0; r < nrank; r++) {
		g[r] = ir_main_graph(m[r]);
		part_in[r] = xcalloc((size_t)nin + 1, sizeof(Tensor));
		part_out[r] = xcalloc((size_t)nret + 1, sizeof(Tensor));
		for (int i = 0; i < nin; i++) {
			int64_t t = in[i].dim[0] / nrank;
			part_in[r][i] = rows_of(&in[i], r * t, t);
		}
	}
	if (ir_eval_ranks(g, nrank, part_in, nin, part_out, eo, d) == 0) {
		rc = join(part_out, nrank, nret, out, d);
		for (int r = 0; r < nrank; r++)
			for (int i = 0; i < nret; i++)
				tensor_free(&part_out[r][i]);
	}
	for (int r = 0; r < nrank; r++) {
		free(part_in[r]);
		free(part_out[r]);
	}
	return rc;
}
