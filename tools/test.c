/*
 * test.c — `moec test`: run folders in the ONNX backend-test layout
 * (a model and test_data_set_N folders of input_N.pb, output_N.pb) through the
 * interpreter, one line per case and `N passed, N failed` last.
 *
 * With --compiled the model goes through the default pipeline first, and
 * compiled_data_set_* folders (valid only for the compiled block) run too.
 *
 * Routing is compared before the outputs: the graph's own routing on each
 * case's inputs (the interpreter, before the pipeline) against the compiled
 * block's.  A token whose experts differ is a failure unless the graph's
 * values put the competing experts within f64 rounding of each other (a near
 * tie): then it is reported and its rows are left out of the comparison.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "program.h"
#include "moec.h"

enum { OK = 0, FAIL = 1, BAD = 2 };

typedef struct {
	int passed, failed;
} Tally;

static int
read_set(const char *dir, const char *prefix, Tensor *t, int max, Diag *d)
{
	int n = 0;

	for (; n < max; n++) {
		char name[64], *path;
		snprintf(name, sizeof name, "%s_%d.pb", prefix, n);
		path = file_join(dir, name);
		if (!file_exists(path)) {
			free(path);
			break;
		}
		int rc = tensor_read(path, &t[n], d);
		free(path);
		if (rc)
			return -1;
	}
	return n;
}

static void
free_set(Tensor *t, int n)
{
	for (int i = 0; i < n; i++)
		tensor_free(&t[i]);
}

static int
same_shape(const Tensor *a, const Tensor *b)
{
	if (a->rank != b->rank)
		return 0;
	for (int i = 0; i < a->rank; i++)
		if (a->dim[i] != b->dim[i])
			return 0;
	return 1;
}

/* Compare every output (without the rows of tokens whose routing flipped
 * at a near tie); print the case's line.  1 if it passed.  precision: the
 * compiled program's (f32 GEMM operands rounded to it). */
static int
judge(const char *casedir, const Graph *g, Tensor *got, Tensor *want, int n,
      DType precision, const RouteDiff *rd)
{
	char line[2048] = "";
	size_t k = 0;
	int ok = !rd->nbad;

	if (rd->nflip)
		k += (size_t)snprintf(line, sizeof line, " routing: %s;%s", rd->msg,
				      rd->nbad ? " (routing differs)" : " rows left out;");

	for (int i = 0; i < n; i++) {
		Compare c;

		if (!same_shape(&got[i], &want[i])) {
			char a[128], b[128];
			tensor_shape_string(a, sizeof a, &got[i]);
			tensor_shape_string(b, sizeof b, &want[i]);
			k += (size_t)snprintf(line + k, sizeof line - MIN(k, sizeof line),
					      " %s: shape %s, expected %s", g->retname[i], a, b);
			ok = 0;
			continue;
		}
		int good = routing_close(&got[i], &want[i], rd,
					 tolerance_dtype(g->ret[i]->type.dt, precision), &c);
		ok &= good;
		if (k < sizeof line)
			k += (size_t)snprintf(line + k, sizeof line - k,
					      " %s: rel_l2 %.2e max_abs %.2e%s", g->retname[i],
					      c.rel_l2, c.max_abs, good ? "" : " (beyond tolerance)");
	}
	printf("%-4s %s%s\n", ok ? "ok" : "FAIL", casedir, line);
	return ok;
}

/* T from input 0's element count and the manifest's first input (a static
 * model's launches do not read T: 1). */
static int64_t
tokens_of(const Manifest *man, const Tensor *in)
{
	const MTensor *t = &man->in[0];
	int64_t rest = 1;

	if (!t->dim[0].a)
		return 1;

	for (int i = 1; i < t->rank; i++)
		rest *= t->dim[i].b;
	return t->dim[0].a && rest ? tensor_numel(in) / rest / t->dim[0].a : -1;
}

/* got[i] for the manifest's outputs at T, poisoned. */
static int
alloc_outputs(const Manifest *man, int64_t T, Tensor *got, Diag *d)
{
	for (int i = 0; i < man->nout; i++) {
		int64_t dim[MAXRANK];
		for (int k = 0; k < man->out[i].rank; k++)
			bundle_expr_eval(&man->out[i].dim[k], T, &dim[k]);
		if (tensor_alloc(&got[i], man->out[i].dt, man->out[i].rank, dim))
			return diag_error(d, LOC_NONE, "output %d too large", i);
		memset(got[i].data, 0xff, tensor_nbytes(&got[i]));	/* poison */
	}
	return 0;
}

/* The generated kernels on the CPU emulator: outputs as the interpreter's. */
static int
emulate(CgProgram *p, const Graph *g, const Tensor *in, Tensor *got, Diag *d)
{
	const Manifest *man = cg_program_manifest(p);
	int64_t T = tokens_of(man, &in[0]);

	if (T < 1)
		return diag_error(d, LOC_NONE, "cannot tell T from input 0");
	(void)g;
	return alloc_outputs(man, T, got, d) ? -1 : cg_program_emulate(p, in, got, T, d);
}

/*
 * --ep=N: the N ranks' programs on the emulator together, each on its
 * share of the inputs' rows (as moec run --ep splits them), the outputs
 * joined in rank order.
 */
static int
emulate_ep(CgProgram *const *p, int nr, const Tensor *in, int nin, Tensor *got, int nout, Diag *d)
{
	const Manifest *man = cg_program_manifest(p[0]);
	Tensor *pin[IR_EP_MAX_RANKS], *pout[IR_EP_MAX_RANKS];
	int64_t T = tokens_of(man, &in[0]), rc = -1, made = 0;

	if (T < 1 || T % nr || nin < 1 || nout != man->nout)
		return diag_error(d, LOC_NONE, "--ep=%d: input 0's %lld tokens are not a multiple of "
				  "the ranks", nr, (long long)T);
	for (int r = 0; r < nr; r++) {
		pin[r] = xcalloc((size_t)nin + 1, sizeof(Tensor));
		pout[r] = xcalloc((size_t)nout + 1, sizeof(Tensor));
		for (int i = 0; i < nin; i++) {
			size_t row = tensor_nbytes(&in[i]) / (size_t)in[i].dim[0];
			pin[r][i] = in[i];
			pin[r][i].name = NULL;
			pin[r][i].dim[0] = in[i].dim[0] / nr;
			pin[r][i].data = (char *)in[i].data + (size_t)r * (size_t)pin[r][i].dim[0] * row;
		}
		if (alloc_outputs(man, T / nr, pout[r], d))
			goto out;
		made = r + 1;
	}
	if (cg_programs_emulate(p, nr, (const Tensor *const *)pin, pout, T / nr, d))
		goto out;
	for (int i = 0; i < nout; i++) {	/* rank r's rows after rank r-1's */
		int64_t dim[MAXRANK];
		memcpy(dim, pout[0][i].dim, sizeof dim);
		dim[0] *= nr;
		if (tensor_alloc(&got[i], pout[0][i].dt, pout[0][i].rank, dim))
			goto out;
		for (int r = 0; r < nr; r++)
			memcpy((char *)got[i].data + (size_t)r * tensor_nbytes(&pout[r][i]), pout[r][i].data,
			       tensor_nbytes(&pout[r][i]));
	}
	rc = 0;
out:
	for (int r = 0; r < nr; r++) {
		for (int i = 0; r < made && i < nout; i++)
			tensor_free(&pout[r][i]);
		free(pin[r]);
		free(pout[r]);
	}
	return (int)rc;
}

/* A result of the emulator has the flattened shape; give it the reference's. */
static void
reshape_like(Tensor *got, const Tensor *want)
{
	if (tensor_numel(got) == tensor_numel(want)) {
		got->rank = want->rank;
		memcpy(got->dim, want->dim, sizeof got->dim);
	}
}

/* Run the interpreter (recording routing) or the emulator on one case. */
typedef struct {
	CgProgram *p[IR_EP_MAX_RANKS];
	int n;
} Ranks;

static int
evaluate(Graph *g, CgProgram *prog, const Ranks *ep, Tensor *in, int nin, Tensor *got,
	 RouteLog *route, Diag *d)
{
	EvalOpts eo = {.hook = ir_route_log_hook, .hook_ctx = route};

	if (ep)
		return emulate_ep(ep->p, ep->n, in, nin, got, g->nret, d);
	if (prog)
		return emulate(prog, g, in, got, d);
	return ir_eval(g, in, nin, got, &eo, d);
}

/* computed: ir_results_dtype of the model as imported (a float16 model
 * with float32 outputs is judged with float16's tolerance). */
static void
run_case(const char *casedir, Graph *g, CgProgram *prog, const Ranks *ep, const RouteLog *ref,
	 DType computed, Tally *t)
{
	Tensor in[64], want[64], *got;
	RouteLog route = {0};
	RouteDiff rd = {0};
	int nin, nout, ok = 0;
	Diag d;

	diag_init(&d, stdout);
	memset(in, 0, sizeof in);
	memset(want, 0, sizeof want);
	nin = read_set(casedir, "input", in, 64, &d);
	nout = read_set(casedir, "output", want, 64, &d);
	if (nin < 0 || nout < 0) {
		printf("FAIL %s: unreadable test data\n", casedir);
	} else if (nin != g->nparam || nout != g->nret) {
		printf("FAIL %s: %d inputs and %d outputs; the model has %d and %d\n", casedir,
		       nin, nout, g->nparam, g->nret);
	} else {
		got = xcalloc((size_t)nout + 1, sizeof *got);
		if (ep)
			prog = ep->p[0];
		if (evaluate(g, prog, ep, in, nin, got, &route, &d) == 0) {
			double atol, rtol, rel;
			for (int i = 0; prog && i < nout; i++)
				reshape_like(&got[i], &want[i]);
			tolerance_for(DT_F64, &atol, &rtol, &rel);	/* interpreter against interpreter */
			if (ref)
				route_log_compare(ref, &route, atol, rtol, &rd);
			ok = judge(casedir, g, got, want, nout,
				   tolerance_dtype(prog ? cg_program_manifest(prog)->precision : DT_F32,
						   computed), &rd);
		} else {
			printf("FAIL %s: the %s failed\n", casedir, prog ? "emulator" : "interpreter");
		}
		free_set(got, nout);
		free(got);
	}
	free_set(in, MAX(nin, 0));
	free_set(want, MAX(nout, 0));
	route_log_free(&route);
	route_diff_free(&rd);
	if (ok)
		t->passed++;
	else
		t->failed++;
}

static int
is_set(const struct dirent *e, int compiled)
{
	return strncmp(e->d_name, "test_data_set_", 14) == 0 ||
	       (compiled && strncmp(e->d_name, "compiled_data_set_", 18) == 0);
}

/* The pipeline, with --check-eval fed the first test case's inputs: an
 * exported MoE graph only evaluates on inputs like the ones it was traced on. */
static int
run_pipeline(const char *dir, Module *m, const MoecOpts *o, Diag *d)
{
	MoecOpts oo = *o;
	Tensor in[64];
	char *first = file_join(dir, "test_data_set_0");
	int n = 0, rc;

	memset(in, 0, sizeof in);
	if (o->pass.check_eval && file_is_dir(first)) {
		n = read_set(first, "input", in, 64, d);
		if (n > 0) {
			oo.pass.check_inputs = in;
			oo.pass.ncheck_inputs = n;
		}
	}
	free(first);
	rc = moec_passes(m, &oo, NULL, d);
	free_set(in, MAX(n, 0));
	return rc;
}

static int
has_routing(const Graph *g)
{
	for (const Node *n = g ? g->first : NULL; n; n = n->next)
		if (n->op == OP_MOE || n->op == OP_ROUTE || n->op == OP_TOPK)
			return 1;
	return 0;
}

/* The graph's routing on a case's inputs, before the pipeline; empty if the
 * case does not run (its own line says why later). */
static RouteLog *
graph_routing(const char *casedir, Graph *g)
{
	Tensor in[64], out[64];
	RouteLog *log = xcalloc(1, sizeof *log);
	EvalOpts eo = {.hook = ir_route_log_hook, .hook_ctx = log};
	int nin;
	Diag d;

	diag_init(&d, NULL);
	memset(in, 0, sizeof in);
	nin = read_set(casedir, "input", in, 64, &d);
	if (nin == g->nparam && g->nret <= 64 && ir_eval(g, in, nin, out, &eo, &d) == 0)
		free_set(out, g->nret);
	free_set(in, MAX(nin, 0));
	return log;
}

static Module *
load_dir(const char *dir, const MoecOpts *o, Diag *d)
{
	char *ir = file_join(dir, "model.ir");
	Module *m = moec_load(file_exists(ir) ? ir : dir, o, d);

	free(ir);
	return m;
}

/* The compiled program for --emulate; NULL after a FAIL line. */
static CgProgram *
emu_program(const char *dir, Module *m, DType precision, const CgTuning *tuning, DbgFlags debug,
	    Diag *d)
{
	CgCompileOpts co;
	CgProgram *p;

	cg_compile_default(&co);
	co.arch[0] = "emu";
	co.narch = 1;
	co.precision = precision;
	co.tuning = tuning;	/* its "emu" entries (--tuning) */
	co.debug = debug;
	if (!(p = cg_compile(m, &co, d)))
		printf("FAIL %s: does not compile\n", dir);
	return p;
}

static void
run_dir(const char *dir, const MoecOpts *o, int compiled, int emu, DType precision,
	const CgTuning *tuning, Tally *t)
{
	struct dirent **ents;
	CgProgram *prog = NULL;
	RouteLog **ref;
	DType computed;
	Diag d;
	Module *m;
	int n, ready = 1;

	diag_init(&d, stdout);
	d.level = o->level;
	if (!(m = load_dir(dir, o, &d))) {
		printf("FAIL %s: cannot load the model\n", dir);
		t->failed++;
		return;
	}
	computed = ir_results_dtype(ir_main_graph(m));	/* before the passes */
	n = scandir(dir, &ents, NULL, alphasort);
	ref = xcalloc((size_t)MAX(n, 0) + 1, sizeof *ref);
	for (int i = 0; compiled && !emu && i < n && has_routing(ir_main_graph(m)); i++)
		if (strncmp(ents[i]->d_name, "test_data_set_", 14) == 0) {
			char *c = file_join(dir, ents[i]->d_name);
			ref[i] = graph_routing(c, ir_main_graph(m));
			free(c);
		}
	if (compiled && run_pipeline(dir, m, o, &d) != 0) {
		printf("FAIL %s: the pipeline failed\n", dir);
		ready = 0;
	} else if (emu && !(prog = emu_program(dir, m, precision, tuning, o->debug, &d))) {
		ready = 0;
	}
	t->failed += !ready;
	for (int i = 0; i < n; i++) {
		if (ready && is_set(ents[i], compiled)) {
			char *c = file_join(dir, ents[i]->d_name);
			run_case(c, ir_main_graph(m), prog, NULL, ref[i], computed, t);
			free(c);
		}
		if (ref[i])
			route_log_free(ref[i]);
		free(ref[i]);
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
	free(ref);
	cg_program_free(prog);
	ir_free_module(m);
}

/* --emulate --ep=N: every rank's program on the emulator together. */
static void
run_dir_ep(const char *dir, MoecOpts *o, DType precision, Tally *t)
{
	struct dirent **ents;
	char *ir = file_join(dir, "model.ir");
	Module *m[IR_EP_MAX_RANKS] = {0};
	Ranks ep = {.n = o->ep.ranks};
	int n, ready = 1;
	Diag d;

	diag_init(&d, stdout);
	d.level = o->level;
	if (moec_ep_modules(file_exists(ir) ? ir : dir, o, m, NULL, &d) != OK) {
		printf("FAIL %s: cannot load or partition the model\n", dir);
		t->failed++;
		free(ir);
		return;
	}
	free(ir);
	for (int r = 0; r < ep.n && ready; r++) {
		CgCompileOpts co;
		cg_compile_default(&co);
		co.arch[0] = "emu";
		co.narch = 1;
		co.precision = precision;
		co.debug = o->debug;
		co.ep_rank = r;
		if (!(ep.p[r] = cg_compile(m[r], &co, &d))) {
			printf("FAIL %s: rank %d does not compile\n", dir, r);
			ready = 0;
		}
	}
	t->failed += !ready;
	n = scandir(dir, &ents, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		if (ready && is_set(ents[i], 1)) {
			char *c = file_join(dir, ents[i]->d_name);
			run_case(c, ir_main_graph(m[0]), NULL, &ep, NULL, ir_results_dtype(ir_main_graph(m[0])), t);
			free(c);
		}
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
	for (int r = 0; r < ep.n; r++) {
		cg_program_free(ep.p[r]);
		ir_free_module(m[r]);
	}
}

int
moec_cmd_test(int argc, char **argv)
{
	MoecOpts o;
	OptArgs a;
	Tally t = {0, 0};
	Diag d;
	int rc, emu, compiled;
	DType precision = DT_F32;
	CgTuning *tuning = NULL;

	if ((rc = moec_args("test", argc, argv, &a, &o, &d)) >= 0)
		return rc;
	emu = opt_has(&a, "emulate");	/* the generated kernels on the CPU emulator */
	compiled = emu || opt_has(&a, "compiled");
	if (cg_precision_parse(opt_str(&a, "precision"), &precision, &d))
		return BAD;
	if (opt_str(&a, "tuning") && !(tuning = cg_tuning_read(opt_str(&a, "tuning"), &d)))
		return BAD;
	if (o.ep.ranks && !emu)
		return opt_error(&a, "--ep=%d runs the ranks' kernels together on the emulator: with "
				 "--emulate (moec run --ep=N runs them on the interpreter)", o.ep.ranks), BAD;
	for (int i = 0; i < a.npos; i++)
		if (o.ep.ranks)
			run_dir_ep(a.pos[i], &o, precision, &t);
		else
			run_dir(a.pos[i], &o, compiled, emu, precision, tuning, &t);
	cg_tuning_free(tuning);
	printf("%d passed, %d failed\n", t.passed, t.failed);
	return t.failed ? FAIL : OK;
}
