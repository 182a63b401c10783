/*
 * moec.c — the compiler driver.  Start reading here: each subcommand is a
 * short function that loads a model (frontend/ or the text IR), runs the
 * pass pipeline (passes/), and evaluates, prints or compiles the result.
 *
 *	model.onnx | config.json | x.ir  -> frontend -> ir -> passes -> ...
 *
 * The options of every subcommand are one table below (name, value kind,
 * default, help line, the subcommands that take it); tools/opt.c parses
 * command lines and prints help and docs/cli.md from it.
 *
 * Exit codes: 0 ok, 1 a check or test failed, 2 bad usage or bad input.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "program.h"
#include "moec.h"
#include "opt.h"

enum { OK = 0, FAIL = 1, BAD = 2 };

/* --- the options of every subcommand: one table (opt.h), docs/cli.md from it --- */

enum { IMPORT = 1, OPT = 2, RUN = 4, TEST = 8, COMPILE = 16, INSPECT = 32 };
enum { LOADS = IMPORT | OPT | RUN | TEST | COMPILE, PASSES = OPT | RUN | TEST | COMPILE };

static const OptCmd moec_cmds[] = {	/* ORDER: the bits above */
	{"import", "MODEL", 1, 1, "import a model (.onnx, config.json, folder) and print its IR",
	 "Import a model (an .onnx file, a config.json with safetensors, or a folder holding either)\n"
	 "and print its IR."},
	{"opt", "IN.ir", 0, 1, "run passes over IR text and print the result",
	 "Run passes over IR text (a file, or - for stdin) and print the result; no passes run unless\n"
	 "--passes names them."},
	{"run", "MODEL", 1, 1, "evaluate a model with the CPU reference interpreter",
	 "Evaluate a model with the CPU reference interpreter: inputs from --input NAME=FILE (.npy or\n"
	 ".pb), each output summarised and, with -o DIR, written as DIR/NAME.npy (NAME made a safe\n"
	 "file name: see docs/cli.md).  With --test-data=SET the inputs are SET/input_N.pb and -o DIR\n"
	 "becomes a test set (input_N.pb, output_N.pb) holding the interpreter's outputs, and its routing\n"
	 "decisions as routing_N.pb (the experts, i32 [T,k]) and routing_N_logits.pb (f32 [T,E])."},
	{"test", "DIR...", 1, 64, "run ONNX backend-test folders through the interpreter",
	 "Run folders in the ONNX backend-test layout (a model and test_data_set_N/input_N.pb,\n"
	 "output_N.pb) through the interpreter; one line per case, then 'N passed, N failed'."},
	{"compile", "MODEL", 1, 1, "compile a model to a kernel bundle (.moeb)",
	 "Compile a model through the default pipeline and codegen to a kernel bundle (-o OUT.moeb),\n"
	 "or to one intermediate form (--emit).  -o or --emit is required."},
	{"inspect", "X.moeb", 1, 1, "show what a bundle holds",
	 "Show what a bundle holds: sections, inputs and outputs, weights, buffers, kernels with\n"
	 "registers and spills, the launch plan and the fusion report."},
};

/* the range and the choices are left out where they do not apply */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const Opt moec_opts[] = {
	/* where results go */
	{"output", 'o', OPT_STR, "FILE", "-", "write the IR to FILE ('-': stdout)", IMPORT | OPT},
	{"output", 'o', OPT_STR, "FILE", NULL, "write the bundle (or the --emit output) to FILE", COMPILE},
	{"output", 'o', OPT_STR, "DIR", NULL, "write the outputs into DIR (created if missing)", RUN},
	/* the model */
	{"layer", 0, OPT_INT, "N", NULL, "config.json: the decoder layer (default: the first MoE layer)",
	 LOADS, 0, INT32_MAX},
	{"layers", 0, OPT_STR, "all|A-B|A,B,...", NULL, "config.json: these decoder layers into one "
	 "bundle, a program per layer (layer.N)", COMPILE},
	{"weights", 0, OPT_STR, "PATH", NULL, "config.json: safetensors file or index (default: next to it)",
	 LOADS},
	{"synthetic-weights", 0, OPT_INT, "SEED", NULL, "config.json: seeded weights, no checkpoint read",
	 LOADS, 0, INT64_MAX},
	{"print-loc", 0, OPT_FLAG, NULL, NULL, "print each node's source location in the IR", LOADS},
	{"summary", 0, OPT_FLAG, NULL, NULL, "append a summary (nodes, weights, ops) to the IR", IMPORT},
	/* the passes */
	{"passes", 0, OPT_STR, "LIST", "", "the passes to run, comma-separated", OPT | RUN},
	{"passes", 0, OPT_STR, "LIST", NULL, "the passes to run (default: the default pipeline)", TEST | COMPILE},
	{"list-passes", 0, OPT_FLAG, NULL, NULL, "list the passes and the default pipeline, and exit", OPT},
	{"print-ir-before", 0, OPT_STR, "P", NULL, "print the IR before pass P (a list, or all)", PASSES},
	{"print-ir-after", 0, OPT_STR, "P", NULL, "print the IR after pass P (a list, or all)", PASSES},
	{"print-ir-after-all", 0, OPT_FLAG, NULL, NULL, "print the IR after every pass", PASSES},
	{"print-ir-after-change", 0, OPT_FLAG, NULL, NULL, "print the IR only after passes that changed it",
	 PASSES},
	{"verify-each", 0, OPT_FLAG, NULL, NULL, "verify the IR after every pass", PASSES},
	{"check-eval", 0, OPT_FLAG, NULL, NULL, "interpret the graph before and after every pass", PASSES},
	{"check-dims", 0, OPT_STR, "T=7,...", NULL, "symbol values for --check-eval", PASSES},
	{"time-passes", 0, OPT_FLAG, NULL, NULL, "print the time of every pass (compile: every stage)",
	 PASSES},
	{"fusion-report", 0, OPT_FLAG, NULL, NULL, "say what each kernel fused, and why not more",
	 OPT | COMPILE},
	/* run and test */
	{"input", 0, OPT_STR, "NAME=FILE", NULL, "an input (.npy or .pb); once per input", RUN},
	{"test-data", 0, OPT_STR, "SET", NULL, "inputs from SET/input_N.pb; -o DIR becomes a test set", RUN},
	{"pb", 0, OPT_FLAG, NULL, NULL, "write outputs as .pb (TensorProto), not .npy", RUN},
	{"compiled", 0, OPT_FLAG, NULL, NULL, "run the default pipeline (the fused graph) first", RUN | TEST},
	{"emulate", 0, OPT_FLAG, NULL, NULL, "run the generated kernels on the CPU emulator", TEST},
	/* expert parallelism */
	{"ep", 0, OPT_INT, "N", NULL, "split each MoE layer's experts over N ranks (run: emulated "
	 "together; compile: a bundle of every rank's program, or OUT.epR.x with --emit=ir|dot; "
	 "test --emulate: the ranks' kernels together)", RUN | COMPILE | TEST, 1, IR_EP_MAX_RANKS},
	{"ep-placement", 0, OPT_STR, "FILE", NULL, "with --ep: the experts of each rank, one line "
	 "'RANK: E E-E ...' each (default: contiguous slices)", RUN | COMPILE | TEST},
	{"ep-combine", 0, OPT_STR, "sum|slots", "sum", "with --ep: return one partial sum per token "
	 "and rank (sum), or every slot for an exact sum over k (slots)", RUN | COMPILE | TEST},
	/* compile */
	{"arch", 0, OPT_STR, "LIST", "sm_90a,sm_80", "targets, comma-separated, in preference order",
	 COMPILE},
	{"max-tokens", 0, OPT_INT, "N", "4096", "the largest token count T a run may use", COMPILE, 1,
	 INT32_MAX},
	{"emit", 0, OPT_STR, NULL, NULL, "write one intermediate form instead of the bundle "
	 "(llvm, ptx: one file per target)", COMPILE, 0, 0, "ir|llvm|ptx|dot"},
	{"cubin", 0, OPT_FLAG, NULL, NULL, "embed ptxas's cubins next to the PTX", COMPILE},
	{"precision", 0, OPT_STR, NULL, "f32", "f32 GEMMs: exact on CUDA cores (f32), or operands rounded "
	 "to tf32|bf16|f16 on tensor cores with f32 accumulation", COMPILE | TEST, 0, 0, "f32|tf32|bf16|f16"},
	{"opt-level", 'O', OPT_INT, "N", "3", "LLVM optimisation level (-O0..-O3)", COMPILE, 0, 3},
	{"cache-dir", 0, OPT_STR, "DIR", NULL, "keep codegen results (PTX, ptxas's stats) in DIR and reuse "
	 "them in later compiles", COMPILE},
	/* inspect */
	{"program", 0, OPT_STR, "NAME", NULL, "the program of a whole-model bundle to show (layer.N)",
	 INSPECT},
	{"tuning", 0, OPT_STR, "FILE", NULL, "GEMM tiles from a tuning table (moec-tuning 2, per T "
	 "bucket or launch range; version 1 read too; docs/codegen.md) where it has them, the "
	 "heuristic elsewhere (test: with --emulate, its emu entries)", COMPILE | TEST},
	{"tune-candidates", 0, OPT_FLAG, NULL, NULL, "also emit each GEMM's candidate tilings for "
	 "`moert tune` (one --arch target; docs/codegen.md)", COMPILE},
	/* everywhere */
	{"debug", 0, OPT_STR, "LIST", NULL, "debug flags, comma-separated (docs/cli.md, Debug flags)",
	 LOADS},
	{"quiet", 'q', OPT_FLAG, NULL, NULL, "no notes, only warnings and errors", LOADS | INSPECT},
	{"verbose", 'v', OPT_FLAG, NULL, NULL, "progress, and the notes -q and the default leave out",
	 LOADS | INSPECT},
};
#pragma GCC diagnostic pop

static const OptTool moec_tool = {
	"moec", "an ahead-of-time compiler for MoE and transformer FFN blocks",
	moec_cmds, (int)NELEM(moec_cmds), moec_opts, (int)NELEM(moec_opts),
};

/* The import and pass options, as the frontend and the pass manager take them. */
static void
moec_apply(const OptArgs *a, MoecOpts *o, Diag *d)
{
	int64_t n;

	memset(o, 0, sizeof *o);
	fe_default_opts(&o->fe);
	pass_default_opts(&o->pass);
	if (opt_int(a, "layer", &n))
		o->fe.layer = (int)n;
	o->fe.weights = opt_str(a, "weights");
	if ((o->fe.synthetic = opt_int(a, "synthetic-weights", &n)))
		o->fe.seed = (uint64_t)n;
	if (opt_has(a, "print-loc"))
		o->pass.print_flags |= IR_PRINT_LOC;
	o->level = opt_has(a, "quiet") ? -1 : opt_has(a, "verbose") ? 1 : 0;
	d->level = o->level;
	if (!opt_takes(a, "passes"))
		return;
	o->pass.pipeline = opt_str(a, "passes");
	o->pass.print_before = opt_str(a, "print-ir-before");
	o->pass.print_after = opt_has(a, "print-ir-after-all") ? "all" : opt_str(a, "print-ir-after");
	o->pass.print_after_change = opt_has(a, "print-ir-after-change");
	o->pass.verify_each = opt_has(a, "verify-each");
	o->pass.time_passes = opt_has(a, "time-passes");
	o->pass.check_eval = opt_has(a, "check-eval");
	o->pass.check_dims = opt_str(a, "check-dims");
}

/*
 * The debug flags (util/debug.c): --debug=LIST, and each flag's former
 * environment variable (MOEC_EMU_WGMMA=1, ...), a deprecated alias read
 * here and nowhere else.  0, or -1 with a diagnostic (an unknown name).
 */
static int
moec_debug(const OptArgs *a, DbgFlags *flags, Diag *d)
{
	char why[256];

	for (int i = 0; i < ndebug_flags; i++) {
		const char *e = debug_flags[i].env ? getenv(debug_flags[i].env) : NULL;
		if (e && *e && strcmp(e, "0") != 0)
			*flags |= debug_flags[i].bit;
	}
	if (debug_parse(opt_str(a, "debug"), flags, why, sizeof why) < 0) {
		char line[160];
		int next = 0;
		diag_error(d, LOC_NONE, "--debug: %s; the flags are:", why);
		while (debug_names_line(&next, line, sizeof line, 100))
			diag_note(d, LOC_NONE, "%s", line);
		return -1;
	}
	return 0;
}

/* Parse a subcommand's arguments: -1 to go on, or the exit code (0 after --help). */
int
moec_args(const char *cmd, int argc, char **argv, OptArgs *a, MoecOpts *o, Diag *d)
{
	int rc = opt_parse(&moec_tool, opt_find_cmd(&moec_tool, cmd), argc, argv, a);

	if (rc == OPT_HELP)
		return OK;
	if (rc)
		return BAD;
	diag_init(d, stderr);
	moec_apply(a, o, d);
	if (moec_debug(a, &o->debug, d) < 0)
		return BAD;
	o->pass.debug = o->debug;
	/* --debug=emu-wgmma: FP8 x FP8 fusion as for sm_90a (compile: from --arch) */
	o->pass.fp8_mma = cg_arch_fp8_mma("emu", o->debug);
	return moec_ep_apply(a, o) == OK ? -1 : BAD;
}

/*
 * -o must not name an input: the model (or the files of a model folder)
 * or --weights.  Checked, with the output's folder, before any work.
 */
int
moec_check_output(const OptArgs *a, const char *out, const char *model, Diag *d)
{
	static const char *inside[] = {"model.onnx", "config.json"};

	if (!out || strcmp(out, "-") == 0)
		return 0;
	if (file_same(out, model) || file_same(out, opt_str(a, "weights")))
		return diag_error(d, loc_file(out), "-o names an input file: refusing to overwrite it");
	for (size_t i = 0; model && file_is_dir(model) && i < NELEM(inside); i++) {
		char *p = file_join(model, inside[i]);
		int same = file_same(out, p);
		free(p);
		if (same)
			return diag_error(d, loc_file(out), "-o names an input file: refusing to overwrite it");
	}
	return file_check_output(out, d);
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

double
moec_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A model from a .ir file (or - for stdin) or any frontend, verified. */
Module *
moec_load(const char *path, const MoecOpts *o, Diag *d)
{
	double t0 = moec_now();
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
	if (m)
		m->widened = ir_widened_dtype(ir_main_graph(m));	/* before the passes fold casts */
	if (m)
		diag_remark(d, loc_file(path), "imported: %d nodes, %d weights (%.1f ms)",
			    ir_main_graph(m)->nnode, m->nweight, 1e3 * (moec_now() - t0));
	return m;
}

/* Run the pipeline given by the options (--passes, or none for opt). */
int
moec_passes(Module *m, const MoecOpts *o, Report *rep, Diag *d)
{
	PassCtx c = {.d = d, .report = rep, .ep = o->ep.ranks ? &o->ep : NULL};
	double t0 = moec_now();
	int rc = pass_run(m, &o->pass, &c);

	for (int i = 0; rc == 0 && i < m->ngraph; i++)	/* the quantised-weight form left as it came */
		for (Node *n = m->graph[i]->first; n; n = n->next)
			if (n->op == OP_DEQUANTIZE && n->in[0]->kind == V_WEIGHT)
			{
				char a[48], b[48];
				report_skip(rep, "dequantize %%%s of $%s (%s) not fused into a GEMM: it runs "
					    "once at load and its users read the %s result; cost: %s read "
					    "where the packed weight is %s", n->out[0]->name,
					    n->in[0]->name, dtype_name(n->in[0]->type.dt),
					    dtype_name(n->out[0]->type.dt),
					    report_size(a, sizeof a, &n->out[0]->type),
					    report_size(b, sizeof b, &n->in[0]->type));
			}
	if (rc == 0)
		diag_remark(d, LOC_NONE, "passes: %d nodes left (%.1f ms)", ir_main_graph(m)->nnode,
			    1e3 * (moec_now() - t0));
	return rc == 0 ? OK : rc < 0 ? BAD : FAIL;
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

/* The IR (and the summary) to path, atomically ("-": stdout). */
static int
write_ir(const char *path, const Module *m, int flags, int sum, Diag *d)
{
	FileOut o;
	FILE *f = file_create(&o, path, d);

	if (!f)
		return BAD;
	ir_print(f, m, flags);
	if (sum)
		summary(f, m);
	return file_commit(&o, d) == 0 ? OK : BAD;
}

static int
cmd_import(int argc, char **argv)
{
	MoecOpts o;
	OptArgs a;
	Diag d;
	Module *m;
	int rc;

	if ((rc = moec_args("import", argc, argv, &a, &o, &d)) >= 0)
		return rc;
	if (moec_check_output(&a, opt_str(&a, "output"), a.pos[0], &d))
		return BAD;
	if (!(m = moec_load(a.pos[0], &o, &d)))
		return BAD;
	rc = write_ir(opt_str(&a, "output"), m, o.pass.print_flags, opt_has(&a, "summary"), &d);
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
	MoecOpts o;
	OptArgs a;
	Report *rep = NULL;
	Diag d;
	Module *m;
	int rc;

	if ((rc = moec_args("opt", argc, argv, &a, &o, &d)) >= 0)
		return rc;
	if (opt_has(&a, "list-passes"))
		return pass_list(stdout), OK;
	if (a.npos == 0)
		return opt_error(&a, "missing IN.ir (usage: moec opt IN.ir)");
	if (moec_check_output(&a, opt_str(&a, "output"), a.pos[0], &d))
		return BAD;
	if (!(m = moec_load(a.pos[0], &o, &d)))
		return BAD;
	if (opt_has(&a, "fusion-report"))
		rep = report_new();
	rc = moec_passes(m, &o, rep, &d);
	if (rep)	/* on stderr: stdout is the IR */
		report_print(stderr, rep);
	report_free(rep);
	if (rc == OK && o.debug & DBG_ROUNDTRIP)
		rc = roundtrip(m, o.pass.print_flags, &d);
	if (rc == OK)
		rc = write_ir(opt_str(&a, "output"), m, o.pass.print_flags, 0, &d);
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

/* One tensor into dir/file, named tname inside (.pb keeps the name). */
static int
write_one(const char *path, Tensor *t, const char *tname, Diag *d)
{
	free(t->name);
	t->name = xstrdup(tname);
	return tensor_write(path, t, d) ? BAD : OK;
}

/*
 * Where each output goes: DIR/NAME.npy (.pb) with NAME made one safe file
 * name (file_safe_name), or output_N.pb in a test set.  Two outputs on one
 * file, or an output on an input file, are refused before anything runs.
 */
static char **
output_paths(const OptArgs *a, const Graph *g, const char *dir, Diag *d)
{
	char **path = xcalloc((size_t)g->nret + 1, sizeof *path), file[256];
	const char *in;
	int ok = 1;

	for (int i = 0; i < g->nret && ok; i++) {
		char safe[210];
		file_safe_name(safe, sizeof safe, g->retname[i]);
		if (opt_has(a, "test-data"))
			snprintf(file, sizeof file, "output_%d.pb", i);
		else
			snprintf(file, sizeof file, "%s.%s", safe, opt_has(a, "pb") ? "pb" : "npy");
		path[i] = file_join(dir, file);
		for (int k = 0; k < i && ok; k++)
			if (strcmp(path[k], path[i]) == 0)
				ok = diag_error(d, loc_file(path[i]), "outputs '%s' and '%s' would both be "
						"written here", g->retname[k], g->retname[i]) == 0;
		for (int k = 0; ok && (in = opt_next(a, "input", &k));)
			if (file_same(path[i], strchr(in, '=') ? strchr(in, '=') + 1 : in))
				ok = diag_error(d, loc_file(path[i]), "output '%s' would overwrite the "
						"input file", g->retname[i]) == 0;
	}
	if (!ok) {
		for (int i = 0; i < g->nret; i++)
			free(path[i]);
		free(path);
		return NULL;
	}
	return path;
}

/*
 * Outputs into dir, or, with --test-data, the inputs as input_N.pb and the
 * outputs as output_N.pb: a test set whose expected outputs are the
 * interpreter's.
 */
static int
write_outputs(const OptArgs *a, const Graph *g, Tensor *in, Tensor *out, const char *dir,
	      char **path, Diag *d)
{
	char file[64];

	for (int i = 0; dir && opt_has(a, "test-data") && i < g->nparam; i++) {
		snprintf(file, sizeof file, "input_%d.pb", i);
		char *p = file_join(dir, file);
		int rc = write_one(p, &in[i], g->param[i]->name, d);
		free(p);
		if (rc)
			return BAD;
	}
	for (int i = 0; i < g->nret; i++) {
		describe(stdout, g->retname[i], &out[i]);
		if (dir && write_one(path[i], &out[i], g->retname[i], d))
			return BAD;
	}
	return OK;
}

/*
 * With --test-data, the graph's routing decisions too: routing_N.pb the
 * experts each token picked (i32 [T,k], best first) and routing_N_logits.pb
 * the values the choice ranked (f32 [T,E]), so that moert test compares a
 * device's decisions with these exactly (docs/runtime.md §6).
 */
static int
write_routing(const RouteLog *log, const char *dir, Diag *d)
{
	char file[64];
	int rc = OK;

	for (int i = 0; i < log->n && rc == OK; i++) {
		const Routing *r = &log->r[i];
		Tensor ids = {DT_I32, 2, {r->T, r->k}, r->ids, NULL};
		Tensor val = {DT_F32, 2, {r->T, r->E}, r->val, NULL};
		for (int k = 0; k < 2 && rc == OK; k++) {
			snprintf(file, sizeof file, k ? "routing_%d_logits.pb" : "routing_%d.pb", i);
			char *p = file_join(dir, file);
			rc = write_one(p, k ? &val : &ids, k ? "logits" : "ids", d);
			free(p);
		}
		free(ids.name);
		free(val.name);
	}
	return rc;
}

/* -o DIR: not the test set read, created if missing, before any work. */
static int
check_run_dir(const OptArgs *a, const char *dir, Diag *d)
{
	const char *set = opt_str(a, "test-data");

	if (set && !dir)
		return diag_error(d, loc_file(set), "--test-data needs -o DIR for the new test set");
	if (set && opt_has(a, "input"))
		return diag_error(d, loc_file(set), "--test-data and --input: give one or the other");
	if (!dir)
		return 0;
	if (set && file_same(set, dir))
		return diag_error(d, loc_file(dir), "-o is the --test-data folder: refusing to "
				  "overwrite its reference outputs");
	return file_make_dir(dir, d);
}

static int
cmd_run(int argc, char **argv)
{
	MoecOpts o;
	OptArgs a;
	const char *model, *dir, *set, *v;
	int rc;
	Tensor in[64], *out = NULL;
	char **path = NULL;
	Diag d;
	Module *m = NULL, *em[IR_EP_MAX_RANKS] = {0};
	Graph *g;
	RouteLog route = {0};
	EvalOpts eo = {.hook = ir_route_log_hook, .hook_ctx = &route};
	int ep;

	if ((rc = moec_args("run", argc, argv, &a, &o, &d)) >= 0)
		return rc;
	model = a.pos[0], dir = opt_str(&a, "output"), set = opt_str(&a, "test-data");
	memset(in, 0, sizeof in);
	ep = o.ep.ranks;
	if ((opt_has(&a, "compiled") || ep) && !opt_has(&a, "passes"))
		o.pass.pipeline = NULL;	/* the default pipeline */
	if (check_run_dir(&a, dir, &d)) {
		rc = BAD;
		goto done;
	}
	if (ep) {	/* the ranks' modules; the first one's inputs and outputs */
		if ((rc = moec_ep_modules(model, &o, em, NULL, &d)) != OK)
			goto done;
		m = em[0];
	} else if (!(m = moec_load(model, &o, &d))) {
		rc = BAD;
		goto done;
	} else if ((rc = moec_passes(m, &o, NULL, &d)) != OK) {
		goto done;
	}
	rc = BAD;
	g = ir_main_graph(m);
	if (g->nparam > 64) {
		diag_error(&d, loc_file(model), "%d inputs: moec run takes at most 64", g->nparam);
		goto done;
	}
	for (int k = 0; (v = opt_next(&a, "input", &k));) {
		const char *eq = strchr(v, '=');
		int p = eq ? find_param(g, v, (size_t)(eq - v)) : -1;
		if (!eq || !eq[1]) {
			opt_bad(&a, "input", v, "is not NAME=FILE");
			goto done;
		}
		if (p < 0) {
			diag_error(&d, loc_file(model), "--input %s: no input of that name", v);
			goto done;
		}
		if (in[p].data) {
			diag_error(&d, loc_file(model), "input %s given twice", g->param[p]->name);
			goto done;
		}
		if (tensor_read(eq + 1, &in[p], &d) != 0)
			goto done;
	}
	for (int i = 0; set && i < g->nparam; i++) {
		char file[32], *p;
		snprintf(file, sizeof file, "input_%d.pb", i);
		p = file_join(set, file);
		int bad = tensor_read(p, &in[i], &d);
		free(p);
		if (bad)
			goto done;
	}
	for (int i = 0; i < g->nparam; i++)
		if (!in[i].data) {
			diag_error(&d, loc_file(model), "missing --input %s=FILE", g->param[i]->name);
			goto done;
		}
	if (dir && !(path = output_paths(&a, g, dir, &d)))
		goto done;
	out = xcalloc((size_t)g->nret + 1, sizeof *out);
	if (ep ? moec_ep_eval(em, ep, in, g->nparam, out, NULL, &d) == 0
	       : ir_eval(g, in, g->nparam, out, &eo, &d) == 0) {
		rc = write_outputs(&a, g, in, out, dir, path, &d);
		if (rc == OK && set && dir)
			rc = write_routing(&route, dir, &d);
	}
	for (int i = 0; i < g->nret; i++)
		tensor_free(&out[i]);
	for (int i = 0; path && i < g->nret; i++)
		free(path[i]);
	free(path);
done:
	for (int i = 0; i < 64; i++)
		tensor_free(&in[i]);
	free(out);
	route_log_free(&route);
	if (!em[0])
		ir_free_module(m);
	for (int r = 0; r < IR_EP_MAX_RANKS; r++)
		ir_free_module(em[r]);
	return rc;
}

/* --- main ----------------------------------------------------------------------- */

static int (*const run_cmd[])(int, char **) = {	/* ORDER: moec_cmds */
	cmd_import, cmd_opt, cmd_run, moec_cmd_test, moec_cmd_compile, moec_cmd_inspect,
};

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
	int cmd, rc;

	mem_set_oom_handler(out_of_memory);
	rc = opt_main(&moec_tool, argc, argv, &cmd);
	return rc >= 0 ? rc : run_cmd[cmd](argc - 1, argv + 1);
}
