/*
 * moec.c — the compiler driver.  Start reading here: each subcommand is a
 * short function that loads a model (frontend/ or the text IR), runs the
 * pass pipeline (passes/), and evaluates, prints or compiles the result.
 *
 *	model.onnx | config.json | x.ir  -> frontend -> ir -> passes -> ...
 *
 * Exit codes: 0 ok, 1 a check or test failed, 2 bad usage or bad input.
 */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "moec.h"

enum { OK = 0, FAIL = 1, BAD = 2 };

/* --- options shared by the subcommands ----------------------------------- */

static int
usage(const char *sub, const char *text)
{
	fprintf(stderr, "usage: moec %s %s\n", sub, text);
	return BAD;
}

static int
help_for(const char *sub, const char *text)
{
	printf("usage: moec %s %s\n", sub, text);
	return OK;
}

/* Match "--name=value" or "--name value"; advances *i past the value. */
static const char *
opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	const char *a = argv[*i];

	if (strncmp(a, name, n) != 0)
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n] == 0 && *i + 1 < argc)
		return argv[++*i];
	return NULL;
}

static int
parse_int(const char *s, int64_t *v)
{
	char *end;

	*v = strtoll(s, &end, 10);
	return *s && !*end ? 0 : -1;
}

/*
 * The flags of `import` and `opt`, accepted by every subcommand that loads
 * and transforms a model.  Returns 1 if argv[*i] was one of them, 0 if not,
 * -1 on a malformed value.
 */
int
moec_common_flag(int argc, char **argv, int *i, MoecOpts *o)
{
	const char *v;
	int64_t n;

	if ((v = opt_value(argc, argv, i, "--layer"))) {
		if (parse_int(v, &n) || n < 0)
			return -1;
		o->fe.layer = (int)n;
	} else if ((v = opt_value(argc, argv, i, "--weights"))) {
		o->fe.weights = v;
	} else if ((v = opt_value(argc, argv, i, "--synthetic-weights"))) {
		if (parse_int(v, &n) || n < 0)
			return -1;
		o->fe.synthetic = 1;
		o->fe.seed = (uint64_t)n;
	} else if ((v = opt_value(argc, argv, i, "--passes"))) {
		o->pass.pipeline = v;
	} else if ((v = opt_value(argc, argv, i, "--print-ir-before"))) {
		o->pass.print_before = v;
	} else if ((v = opt_value(argc, argv, i, "--print-ir-after"))) {
		o->pass.print_after = v;
	} else if (strcmp(argv[*i], "--print-ir-after-all") == 0) {
		o->pass.print_after = "all";
	} else if (strcmp(argv[*i], "--print-ir-after-change") == 0) {
		o->pass.print_after_change = 1;
	} else if (strcmp(argv[*i], "--verify-each") == 0) {
		o->pass.verify_each = 1;
	} else if (strcmp(argv[*i], "--time-passes") == 0) {
		o->pass.time_passes = 1;
	} else if (strcmp(argv[*i], "--check-eval") == 0) {
		o->pass.check_eval = 1;
	} else if ((v = opt_value(argc, argv, i, "--check-dims"))) {
		o->pass.check_dims = v;
	} else if (strcmp(argv[*i], "--print-loc") == 0) {
		o->pass.print_flags |= IR_PRINT_LOC;
	} else {
		return 0;
	}
	return 1;
}

void
moec_default_opts(MoecOpts *o)
{
	memset(o, 0, sizeof *o);
	fe_default_opts(&o->fe);
	pass_default_opts(&o->pass);
}

static int
ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && strcmp(s + a - b, suf) == 0;
}

static Module *
parse_stdin(Diag *d)
{
	VEC(char) buf = {0};
	int c;
	Module *m;

	while ((c = getchar()) != EOF)
		vec_push(&buf, (char)c);
	m = ir_parse("<stdin>", buf.v ? buf.v : "", buf.n, d);
	vec_free(&buf);
	return m;
}

/* A model from a .ir file (or - for stdin) or any frontend, verified. */
Module *
moec_load(const char *path, const MoecOpts *o, Diag *d)
{
	Module *m = strcmp(path, "-") == 0 ? parse_stdin(d)
		    : ends_with(path, ".ir") ? ir_parse_file(path, d)
					     : fe_load(path, &o->fe, d);

	if (m && ir_verify(m, d) != 0) {
		ir_free_module(m);
		return NULL;
	}
	if (m && !ir_main_graph(m)) {
		diag_error(d, loc_file(path), "no graph in the module");
		ir_free_module(m);
		return NULL;
	}
	return m;
}

/* Run the pipeline given by the options (--passes, or none for opt). */
int
moec_passes(Module *m, const MoecOpts *o, Report *rep, Diag *d)
{
	PassCtx c = {d, rep};
	int rc = pass_run(m, &o->pass, &c);

	return rc == 0 ? OK : rc < 0 ? BAD : FAIL;
}

static FILE *
open_out(const char *path, Diag *d)
{
	FILE *f;

	if (!path || strcmp(path, "-") == 0)
		return stdout;
	f = fopen(path, "w");
	if (!f)
		diag_error(d, loc_file(path), "cannot create file");
	return f;
}

static int
close_out(FILE *f)
{
	if (f == stdout)
		return fflush(f) == 0 ? 0 : -1;
	return fclose(f) == 0 ? 0 : -1;
}

/* --- moec import ------------------------------------------------------------ */

static void
summary(FILE *f, const Module *m)
{
	int count[NOP] = {0};
	size_t wbytes = 0, nsynth = 0;
	Graph *g = ir_main_graph(m);

	for (int i = 0; i < m->nweight; i++) {
		const Type *t = &m->weight[i]->value->type;
		int64_t n = ir_type_numel(t);
		wbytes += n > 0 ? dtype_bytes(t->dt, (size_t)n) : 0;
		nsynth += m->weight[i]->data == NULL;
	}
	for (int i = 0; i < m->ngraph; i++)
		for (Node *n = m->graph[i]->first; n; n = n->next)
			count[n->op]++;
	fprintf(f, "# summary: graph @%s, %d inputs, %d outputs, %d nodes, %d kernels\n",
		g->name, g->nparam, g->nret, g->nnode, m->ngraph - 1);
	fprintf(f, "# weights: %d (%.1f MiB%s)\n", m->nweight, (double)wbytes / (1 << 20),
		nsynth ? ", synthetic" : "");
	fprintf(f, "# ops:");
	for (int op = 0; op < NOP; op++)
		if (count[op])
			fprintf(f, " %s=%d", ir_opname((Op)op), count[op]);
	fprintf(f, "\n");
}

static int
cmd_import(int argc, char **argv)
{
	static const char help[] = "MODEL [-o OUT.ir] [--layer N] [--weights PATH] "
				   "[--synthetic-weights=SEED] [--print-loc] [--summary]";
	MoecOpts o;
	const char *model = NULL, *out = NULL;
	int sum = 0, rc;
	Diag d;
	Module *m;
	FILE *f;

	moec_default_opts(&o);
	diag_init(&d, stderr);
	for (int i = 1; i < argc; i++) {
		int k = moec_common_flag(argc, argv, &i, &o);
		if (k < 0)
			return usage("import", help);
		if (k)
			continue;
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			out = argv[++i];
		else if (strcmp(argv[i], "--summary") == 0)
			sum = 1;
		else if (strcmp(argv[i], "--help") == 0)
			return help_for("import", help);
		else if (argv[i][0] == '-' || model)
			return usage("import", help);
		else
			model = argv[i];
	}
	if (!model)
		return usage("import", help);
	if (!(m = moec_load(model, &o, &d)))
		return BAD;
	if (!(f = open_out(out, &d))) {
		ir_free_module(m);
		return BAD;
	}
	ir_print(f, m, o.pass.print_flags);
	if (sum)
		summary(f, m);
	rc = close_out(f) == 0 ? OK : BAD;
	ir_free_module(m);
	return rc;
}

/* --- moec opt ------------------------------------------------------------ */

/*
 * MOEC_CHECK_ROUNDTRIP=1: parse what we are about to print and print it
 * again; the two texts must be equal byte for byte.  The lit suite sets it,
 * so every test doubles as a round-trip test.
 */
static int
roundtrip(const Module *m, int flags, Diag *d)
{
	char *a = ir_print_string(m, flags), *b = NULL;
	Module *again = ir_parse("<roundtrip>", a, strlen(a), d);
	int rc = BAD;

	if (again && ir_verify(again, d) == 0) {
		b = ir_print_string(again, flags);
		rc = strcmp(a, b) == 0 ? OK : FAIL;
		if (rc)
			diag_error(d, LOC_NONE, "the printed IR does not round-trip byte for byte");
	}
	ir_free_module(again);
	free(a);
	free(b);
	return rc;
}

static int
cmd_opt(int argc, char **argv)
{
	static const char help[] =
		"IN.ir [-o OUT.ir] [--passes=a,b] [--print-ir-before=P] [--print-ir-after=P]\n"
		"       [--print-ir-after-all] [--print-ir-after-change] [--verify-each]\n"
		"       [--check-eval] [--check-dims=T=7] [--time-passes] [--list-passes] [--print-loc]\n"
		"       [--fusion-report]";
	MoecOpts o;
	const char *in = NULL, *out = NULL;
	Report *rep = NULL;
	Diag d;
	Module *m;
	FILE *f;
	int rc;

	moec_default_opts(&o);
	o.pass.pipeline = "";	/* none unless --passes */
	diag_init(&d, stderr);
	for (int i = 1; i < argc; i++) {
		int k = moec_common_flag(argc, argv, &i, &o);
		if (k < 0)
			return usage("opt", help);
		if (k)
			continue;
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			out = argv[++i];
		else if (strcmp(argv[i], "--list-passes") == 0)
			return pass_list(stdout), OK;
		else if (strcmp(argv[i], "--fusion-report") == 0 && !rep)
			rep = report_new();
		else if (strcmp(argv[i], "--help") == 0)
			return help_for("opt", help);
		else if ((argv[i][0] == '-' && argv[i][1]) || in)
			return usage("opt", help);
		else
			in = argv[i];
	}
	if (!in)
		return usage("opt", help);
	if (!(m = moec_load(in, &o, &d))) {
		report_free(rep);
		return BAD;
	}
	rc = moec_passes(m, &o, rep, &d);
	if (rep)	/* on stderr: stdout is the IR */
		report_print(stderr, rep);
	report_free(rep);
	if (rc == OK && getenv("MOEC_CHECK_ROUNDTRIP"))
		rc = roundtrip(m, o.pass.print_flags, &d);
	if (rc == OK) {
		if (!(f = open_out(out, &d)))
			rc = BAD;
		else {
			ir_print(f, m, o.pass.print_flags);
			if (close_out(f) != 0)
				rc = BAD;
		}
	}
	ir_free_module(m);
	return rc;
}

/* --- moec run ------------------------------------------------------------ */

static int
find_param(const Graph *g, const char *name, size_t n)
{
	for (int i = 0; i < g->nparam; i++)
		if (strlen(g->param[i]->name) == n && strncmp(g->param[i]->name, name, n) == 0)
			return i;
	return -1;
}

static void
describe(FILE *f, const char *name, const Tensor *t)
{
	char shape[128];
	double lo = 0, hi = 0, sum = 0;
	int64_t n = tensor_numel(t);

	for (int64_t i = 0; i < n; i++) {
		double v = dtype_load(t->dt, t->data, (size_t)i);
		lo = i ? MIN(lo, v) : v;
		hi = i ? MAX(hi, v) : v;
		sum += v;
	}
	tensor_shape_string(shape, sizeof shape, t);
	fprintf(f, "%s: %s min %.6g max %.6g mean %.6g\n", name, shape, lo, hi,
		n ? sum / (double)n : 0);
}

/* One tensor into dir: NAME.npy, NAME.pb, or (test layout) PREFIX_N.pb. */
static int
write_one(const char *dir, const char *file, Tensor *t, const char *tname, Diag *d)
{
	char *path = file_join(dir, file);
	int rc;

	free(t->name);
	t->name = xstrdup(tname);
	rc = tensor_write(path, t, d);
	free(path);
	return rc ? BAD : OK;
}

/*
 * Outputs by name into dir, or, with layout (an ONNX test_data_set folder),
 * the inputs as input_N.pb and the outputs as output_N.pb: a test set whose
 * expected outputs are the interpreter's.
 */
static int
write_outputs(const Graph *g, Tensor *in, Tensor *out, const char *dir, int pb, int layout, Diag *d)
{
	char file[64];

	if (layout) {
		if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
			diag_error(d, loc_file(dir), "cannot create the folder: %s", strerror(errno));
			return BAD;
		}
		for (int i = 0; i < g->nparam; i++) {
			snprintf(file, sizeof file, "input_%d.pb", i);
			if (write_one(dir, file, &in[i], g->param[i]->name, d))
				return BAD;
		}
	}
	for (int i = 0; i < g->nret; i++) {
		describe(stdout, g->retname[i], &out[i]);
		if (!dir)
			continue;
		if (layout) {
			snprintf(file, sizeof file, "output_%d.pb", i);
			if (write_one(dir, file, &out[i], g->retname[i], d))
				return BAD;
			continue;
		}
		char *name = NULL, *path;
		if (asprintf(&name, "%s.%s", g->retname[i], pb ? "pb" : "npy") < 0)
			return BAD;
		path = file_join(dir, name);
		free(out[i].name);
		out[i].name = xstrdup(g->retname[i]);
		int rc = tensor_write(path, &out[i], d);
		free(path);
		free(name);
		if (rc)
			return BAD;
	}
	return OK;
}

static int
cmd_run(int argc, char **argv)
{
	static const char help[] = "MODEL --input NAME=FILE ... [-o DIR] [--pb] [--compiled] "
				   "[--layer N] [import and opt flags]\n"
				   "       moec run MODEL --test-data=SET -o OUTSET: inputs from SET/input_N.pb, "
				   "a test set\n       (input_N.pb, output_N.pb) with the interpreter's outputs in OUTSET";
	MoecOpts o;
	const char *model = NULL, *dir = NULL, *set = NULL, *v;
	const char *inputs[64];
	int nin = 0, compiled = 0, pb = 0, rc = BAD;
	Tensor in[64], *out = NULL;
	Diag d;
	Module *m;
	Graph *g;

	moec_default_opts(&o);
	o.pass.pipeline = "";
	diag_init(&d, stderr);
	memset(in, 0, sizeof in);
	for (int i = 1; i < argc; i++) {
		int k = moec_common_flag(argc, argv, &i, &o);
		if (k < 0)
			return usage("run", help);
		if (k)
			continue;
		if ((v = opt_value(argc, argv, &i, "--input")) && nin < 64)
			inputs[nin++] = v;
		else if ((v = opt_value(argc, argv, &i, "--test-data")))
			set = v;
		else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			dir = argv[++i];
		else if (strcmp(argv[i], "--compiled") == 0)
			compiled = 1;
		else if (strcmp(argv[i], "--pb") == 0)
			pb = 1;
		else if (strcmp(argv[i], "--help") == 0)
			return help_for("run", help);
		else if (argv[i][0] == '-' || model)
			return usage("run", help);
		else
			model = argv[i];
	}
	if (!model || (set && (nin || !dir)))
		return usage("run", help);
	if (compiled && !o.pass.pipeline[0])
		o.pass.pipeline = NULL;
	if (!(m = moec_load(model, &o, &d)))
		return BAD;
	if ((rc = moec_passes(m, &o, NULL, &d)) != OK)
		goto done;
	rc = BAD;
	g = ir_main_graph(m);
	for (int i = 0; i < nin; i++) {
		const char *eq = strchr(inputs[i], '=');
		int p = eq ? find_param(g, inputs[i], (size_t)(eq - inputs[i])) : -1;
		if (p < 0) {
			diag_error(&d, loc_file(model), "--input %s: no input of that name", inputs[i]);
			goto done;
		}
		if (in[p].data) {
			diag_error(&d, loc_file(model), "input %s given twice", g->param[p]->name);
			goto done;
		}
		if (tensor_read(eq + 1, &in[p], &d) != 0)
			goto done;
	}
	if (g->nparam > 64) {
		diag_error(&d, loc_file(model), "%d inputs: moec run takes at most 64", g->nparam);
		goto done;
	}
	for (int i = 0; set && i < g->nparam; i++) {
		char file[32], *path;
		snprintf(file, sizeof file, "input_%d.pb", i);
		path = file_join(set, file);
		int bad = tensor_read(path, &in[i], &d);
		free(path);
		if (bad)
			goto done;
	}
	for (int i = 0; i < g->nparam; i++)
		if (!in[i].data) {
			diag_error(&d, loc_file(model), "missing --input %s=FILE", g->param[i]->name);
			goto done;
		}
	out = xcalloc((size_t)g->nret + 1, sizeof *out);
	if (ir_eval(g, in, g->nparam, out, NULL, &d) == 0)
		rc = write_outputs(g, in, out, dir, pb, set != NULL, &d);
	for (int i = 0; out && i < g->nret; i++)
		tensor_free(&out[i]);
done:
	for (int i = 0; i < 64; i++)
		tensor_free(&in[i]);
	free(out);
	ir_free_module(m);
	return rc;
}

/* --- the table of subcommands ---------------------------------------------- */

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} cmds[] = {
	{"import", cmd_import, "import a model (.onnx, config.json, folder) and print its IR"},
	{"opt", cmd_opt, "run passes over IR text and print the result"},
	{"run", cmd_run, "evaluate a model with the CPU reference interpreter"},
	{"test", moec_cmd_test, "run ONNX backend-test folders through the interpreter"},
	{"compile", moec_cmd_compile, "compile a model to a kernel bundle (.moeb)"},
	{"inspect", moec_cmd_inspect, "show what a bundle holds"},
};

static int
help(FILE *f)
{
	fprintf(f, "moec %s — an ahead-of-time compiler for MoE and transformer FFN blocks\n\n"
		   "usage: moec COMMAND [ARGS]   (moec COMMAND --help for its flags)\n\n",
		MOEC_VERSION);
	for (size_t i = 0; i < NELEM(cmds); i++)
		fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "\nexit codes: 0 ok, 1 a check or test failed, 2 bad usage or input\n");
	return f == stdout ? OK : BAD;
}

/* A graph past its memory budget (docs/limits.md) or malloc failing: bad
 * input, exit 2, not an abort. */
static void
out_of_memory(const char *owner, size_t bytes, size_t limit)
{
	if (limit)
		fprintf(stderr, "%s: error: the graph needs more than %zu bytes of memory (the "
			"limit per graph, docs/limits.md)\n", owner ? owner : "moec", limit);
	else
		fprintf(stderr, "moec: error: out of memory: %zu bytes could not be allocated\n",
			bytes);
	exit(BAD);
}

int
main(int argc, char **argv)
{
	mem_set_oom_handler(out_of_memory);
	if (argc < 2)
		return help(stderr);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0)
		return help(stdout);
	if (strcmp(argv[1], "--version") == 0)
		return printf("moec %s\n", MOEC_VERSION), OK;
	for (size_t i = 0; i < NELEM(cmds); i++)
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "moec: unknown command '%s'\n", argv[1]);
	return help(stderr);
}
