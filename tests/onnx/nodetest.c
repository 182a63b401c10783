/*
 * nodetest.c — runs ONNX backend node tests (and fixtures in the same
 * layout) through the importer and the interpreter.
 *
 *	onnx_nodetest [--skip FILE] [--table] [--all] DIR...
 *
 * DIR is a test folder (model.onnx + test_data_set_N/) or a folder of them.
 * A test applies when the model's default opset is 11..23, every node's op
 * is one moec claims, and FILE does not list it ("name  reason" lines).
 * Each applicable test must import, verify, print/parse/print to the same
 * bytes, and evaluate to every output_N.pb within tolerance (tensor_close,
 * the rule `moec test` applies).
 * One line per test, then per-op counts (--table: as markdown rows) and
 * `N passed, N failed, N not applicable`.  With --all every test must
 * apply (fixtures).  Exit 1 if any applicable test failed.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "onnx.pb-c.h"

typedef struct {
	char op[64];
	int pass, fail, na;
} OpCount;

static struct {
	OpCount op[256];
	int nop;
	int pass, fail, na;
	char **skip;		/* name, reason, name, reason, ... */
	int nskip;
	int table, all;
} R;

static OpCount *
count_for(const char *op)
{
	for (int i = 0; i < R.nop; i++)
		if (!strcmp(R.op[i].op, op))
			return &R.op[i];
	if (R.nop == (int)NELEM(R.op))
		return &R.op[0];
	snprintf(R.op[R.nop].op, sizeof R.op[R.nop].op, "%s", op);
	return &R.op[R.nop++];
}

static void
load_skip(const char *path)
{
	Diag d;
	size_t len;
	char *buf, *line, *save;

	diag_init(&d, stderr);
	if (!(buf = file_read(path, &len, &d)))
		exit(2);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp;
		if (*line == '#' || !*line || !(sp = strpbrk(line, " \t")))
			continue;
		*sp++ = 0;
		sp += strspn(sp, " \t");
		R.skip = xrealloc(R.skip, sizeof *R.skip * (size_t)(2 * R.nskip + 2));
		R.skip[2 * R.nskip] = xstrdup(line);
		R.skip[2 * R.nskip + 1] = xstrdup(sp);
		R.nskip++;
	}
	free(buf);
}

static const char *
skip_reason(const char *name)
{
	for (int i = 0; i < R.nskip; i++)
		if (!strcmp(R.skip[2 * i], name))
			return R.skip[2 * i + 1];
	return NULL;
}

/* --- which tests apply --------------------------------------------------- */

static int
default_opset(const Onnx__ModelProto *mp)
{
	for (size_t i = 0; i < mp->n_opset_import; i++) {
		const char *d = mp->opset_import[i]->domain;
		if (!d || !*d || !strcmp(d, "ai.onnx"))
			return (int)mp->opset_import[i]->version;
	}
	return -1;
}

static int
domain_opset(const Onnx__ModelProto *mp, const char *dom)
{
	if (!dom || !*dom || !strcmp(dom, "ai.onnx"))
		return default_opset(mp);
	for (size_t i = 0; i < mp->n_opset_import; i++)
		if (mp->opset_import[i]->domain && !strcmp(mp->opset_import[i]->domain, dom))
			return (int)mp->opset_import[i]->version;
	return 0;
}

static const char *
dtype_word(int code)
{
	static const char *w[] = {"undefined", "float", "uint8", "int8", "uint16", "int16",
		"int32", "int64", "string", "bool", "float16", "double", "uint32", "uint64",
		"complex64", "complex128", "bfloat16", "float8e4m3fn", "float8e4m3fnuz",
		"float8e5m2", "float8e5m2fnuz", "uint4", "int4", "float4e2m1"};
	return code >= 0 && code < (int)NELEM(w) ? w[code] : "unknown";
}

/* Graph inputs and outputs must be tensors of IR dtypes. */
static const char *
io_types(const Onnx__GraphProto *g, char *buf, size_t n)
{
	for (size_t k = 0; k < g->n_input + g->n_output; k++) {
		const Onnx__ValueInfoProto *vi = k < g->n_input ? g->input[k] : g->output[k - g->n_input];
		const Onnx__TypeProto *tp = vi->type;
		DType dt;
		if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
			snprintf(buf, n, "'%s' is not a tensor (sequence, optional or map)", vi->name);
			return buf;
		}
		if (dtype_from_onnx(tp->tensor_type->elem_type, &dt) != 0) {
			snprintf(buf, n, "%s tensors", dtype_word(tp->tensor_type->elem_type));
			return buf;
		}
	}
	return NULL;
}

/* NULL if the test applies, else why not (in buf). */
static const char *
not_applicable(const char *name, const Onnx__ModelProto *mp, char *buf, size_t n)
{
	const char *why = skip_reason(name);
	int v = default_opset(mp);

	if (why)
		return why;
	if (v < 11 || v > 23) {	/* onnx_int.h OX_OPSET_MIN */
		snprintf(buf, n, "opset %d", v);
		return buf;
	}
	if (mp->graph && io_types(mp->graph, buf, n))
		return buf;
	for (size_t i = 0; mp->graph && i < mp->graph->n_node; i++) {
		const Onnx__NodeProto *np = mp->graph->node[i];
		if (!onnx_op_supported(np->domain ? np->domain : "", np->op_type,
				       domain_opset(mp, np->domain))) {
			snprintf(buf, n, "uses %s", np->op_type);
			return buf;
		}
	}
	return NULL;
}

/* The op a test is about: the single node's op, else its sibling's. */
static void
test_op(const char *dir, const char *name, const Onnx__ModelProto *mp, char *op, size_t n)
{
	const Onnx__GraphProto *g = mp->graph;
	const char *suf = strstr(name, "_expanded");

	snprintf(op, n, "%s", g && g->n_node ? g->node[0]->op_type : "?");
	if (g && g->n_node == 1)
		return;
	if (suf) {
		size_t len;
		Diag d;
		char *buf, *full = xmalloc(strlen(dir) + strlen(name) + 32);
		sprintf(full, "%s/../%.*s/model.onnx", dir, (int)(suf - name), name);
		diag_init(&d, NULL);
		if ((buf = file_read(full, &len, &d))) {
			Onnx__ModelProto *s = onnx__model_proto__unpack(NULL, len, (uint8_t *)buf);
			if (s && s->graph && s->graph->n_node == 1)
				snprintf(op, n, "%s", s->graph->node[0]->op_type);
			if (s)
				onnx__model_proto__free_unpacked(s, NULL);
			free(buf);
		}
		free(full);
	}
}

/* --- running one test ---------------------------------------------------- */

static int
roundtrip(Module *m, char *why, size_t n)
{
	char *a = ir_print_string(m, 0), *b = NULL;
	Diag d;
	Module *m2;
	int ok = 0;

	diag_init(&d, NULL);
	m2 = ir_parse("import.ir", a, strlen(a), &d);
	if (!m2)
		snprintf(why, n, "re-parse failed: %s", d.last);
	else if (strcmp(a, b = ir_print_string(m2, 0)) != 0)
		snprintf(why, n, "print(parse(print)) differs");
	else
		ok = 1;
	free(a);
	free(b);
	ir_free_module(m2);
	return ok;
}

static int
read_tensor(const char *dir, const char *kind, int i, Tensor *t, Diag *d)
{
	char name[64], *path;
	int rc;

	snprintf(name, sizeof name, "%s_%d.pb", kind, i);
	path = file_join(dir, name);
	rc = file_exists(path) ? tensor_read(path, t, d) : 1;
	free(path);
	return rc;
}

static int
same_shape(const Tensor *a, const Tensor *b)
{
	if (a->rank != b->rank || a->dt != b->dt)
		return 0;
	for (int i = 0; i < a->rank; i++)
		if (a->dim[i] != b->dim[i])
			return 0;
	return 1;
}

static int
read_all(const char *set, const char *kind, Tensor *t, Diag *d)
{
	int n = 0;

	while (n < 32 && read_tensor(set, kind, n, &t[n], d) == 0)
		n++;
	return n;
}

static void
free_all(Tensor *t, int n)
{
	for (int i = 0; i < n; i++)
		tensor_free(&t[i]);
}

/* Evaluate g on in[0..nin) and compare with the set's outputs. */
static int
eval_set(Graph *g, Tensor *in, int nin, const char *set, char *why, size_t n)
{
	Tensor want[32], got[32];
	int nout, ok = 1;
	Diag d;

	memset(want, 0, sizeof want);
	memset(got, 0, sizeof got);
	diag_init(&d, NULL);
	nout = read_all(set, "output", want, &d);
	if (d.nerror || nin != g->nparam || nout != g->nret) {
		snprintf(why, n, "%s: %d inputs, %d outputs for a graph of %d and %d %s", set, nin,
			 nout, g->nparam, g->nret, d.last);
		ok = 0;
	} else if (ir_eval(g, in, nin, got, NULL, &d) != 0) {
		snprintf(why, n, "eval: %s", d.last);
		free_all(want, nout);
		return 0;
	}
	for (int i = 0; ok && i < nout; i++) {
		double atol, rtol, rel;
		Compare c;
		if (!same_shape(&got[i], &want[i])) {
			char a[128], b[128];
			tensor_shape_string(a, sizeof a, &got[i]);
			tensor_shape_string(b, sizeof b, &want[i]);
			snprintf(why, n, "output %d is %s, expected %s", i, a, b);
			ok = 0;
			break;
		}
		DType tt = tolerance_dtype(want[i].dt, ir_results_dtype(g));	/* float16 inside */
		tolerance_for(tt, &atol, &rtol, &rel);
		tensor_compare(&got[i], &want[i], atol, rtol, &c);
		if (!tensor_close(&c, tt, tensor_numel(&want[i]))) {
			snprintf(why, n, "output %d: %lld elements off, max_abs %.3g at %lld, "
				 "rel_l2 %.3g", i, (long long)c.nbad, c.max_abs, (long long)c.worst,
				 c.rel_l2);
			ok = 0;
		}
	}
	if (nin == g->nparam && nout == g->nret)
		free_all(got, nout);
	free_all(want, nout);
	return ok;
}

static int
check_module(Module *m, char *why, size_t n)
{
	Diag d;

	diag_init(&d, NULL);
	if (ir_verify(m, &d) != 0) {
		snprintf(why, n, "verify: %s", d.last);
		return 0;
	}
	return roundtrip(m, why, n);
}

/* The data sets of a test folder, sorted. */
static int
data_sets(const char *dir, char ***out)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort), k = 0;

	*out = xcalloc((size_t)MAX(n, 0) + 1, sizeof **out);
	for (int i = 0; i < n; i++) {
		if (!strncmp(ents[i]->d_name, "test_data_set_", 14))
			(*out)[k++] = file_join(dir, ents[i]->d_name);
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
	return k;
}

static void
free_sets(char **sets, int n)
{
	for (int i = 0; i < n; i++)
		free(sets[i]);
	free(sets);
}

/*
 * The model needs some inputs at compile time (axes, split sizes, OneHot's
 * depth given as graph inputs): bind the small inputs after the first of
 * each data set and evaluate the rest.
 */
static int
run_bound(const char *model, char **sets, int nsets, char **names, int nnames, char *why,
	  size_t n)
{
	int ok = 1;

	for (int s = 0; ok && s < nsets; s++) {
		Tensor in[32], bind[32], rest[32];
		int nin, nb = 0, nr = 0;
		FeOpts o;
		Diag d;
		Module *m;

		memset(in, 0, sizeof in);
		diag_init(&d, NULL);
		nin = read_all(sets[s], "input", in, &d);
		for (int i = 0; i < nin; i++) {
			int small = i > 0 && tensor_numel(&in[i]) <= 64;
			if (small && i < nnames) {
				free(in[i].name);
				in[i].name = xstrdup(names[i]);
				bind[nb++] = in[i];
			} else {
				rest[nr++] = in[i];
			}
		}
		fe_default_opts(&o);
		if (!(m = onnx_import_bound(model, &o, bind, nb, &d))) {
			snprintf(why, n, "import: %s", d.last);
			ok = 0;
		} else {
			ok = check_module(m, why, n) && eval_set(ir_main_graph(m), rest, nr, sets[s],
								 why, n);
			ir_free_module(m);
		}
		free_all(in, nin);
	}
	return ok;
}

/* 1 passed; *bound set when inputs had to be bound. */
static int
run_model(const char *dir, const char *model, char **names, int nnames, char *why,
	  size_t n, int *bound)
{
	char **sets;
	int nsets = data_sets(dir, &sets), ok = 1;
	FeOpts o;
	Diag d;
	Module *m;

	fe_default_opts(&o);
	diag_init(&d, NULL);
	*bound = 0;
	if (!nsets) {
		snprintf(why, n, "no test_data_set_*");
		ok = 0;
	} else if (!(m = onnx_import(model, &o, &d))) {
		snprintf(why, n, "import: %s", d.last);
		if (strstr(d.last, "must be a constant")) {
			*bound = 1;
			ok = run_bound(model, sets, nsets, names, nnames, why, n);
		} else
			ok = 0;
	} else {
		ok = check_module(m, why, n);
		for (int s = 0; ok && s < nsets; s++) {
			Tensor in[32];
			int nin;
			memset(in, 0, sizeof in);
			nin = read_all(sets[s], "input", in, &d);
			ok = !d.nerror ? eval_set(ir_main_graph(m), in, nin, sets[s], why, n) : 0;
			if (d.nerror)
				snprintf(why, n, "%s", d.last);
			free_all(in, nin);
		}
		ir_free_module(m);
	}
	free_sets(sets, nsets);
	return ok;
}

static void
run_test(const char *dir)
{
	const char *name = file_basename(dir), *na;
	char *model = file_join(dir, "model.onnx"), why[600] = "", nabuf[128], op[64];
	char *names[32];
	int nnames = 0, bound = 0;
	size_t len;
	Diag d;
	char *buf;
	Onnx__ModelProto *mp = NULL;

	diag_init(&d, NULL);
	buf = file_read(model, &len, &d);
	if (buf)
		mp = onnx__model_proto__unpack(NULL, len, (uint8_t *)buf);
	free(buf);
	if (!mp) {
		printf("FAIL %s: unreadable model\n", dir);
		R.fail++;
		free(model);
		return;
	}
	test_op(dir, name, mp, op, sizeof op);
	na = not_applicable(name, mp, nabuf, sizeof nabuf);
	for (size_t i = 0; mp->graph && i < mp->graph->n_input && nnames < 32; i++)
		names[nnames++] = xstrdup(mp->graph->input[i]->name ? mp->graph->input[i]->name : "");
	onnx__model_proto__free_unpacked(mp, NULL);
	if (na && !strncmp(na, "xfail:", 6)) {
		int ok = run_model(dir, model, names, nnames, why, sizeof why, &bound);
		printf("%s %s [%s]: %s\n", ok ? "XPASS" : "xfail", name, op, na + 6);
		count_for(op)->na++;
		R.na++;
	} else if (na && !R.all) {
		printf("n/a  %s [%s]: %s\n", name, op, na);
		count_for(op)->na++;
		R.na++;
	} else if (run_model(dir, model, names, nnames, why, sizeof why, &bound)) {
		printf("ok   %s [%s]%s\n", name, op, bound ? " (inputs bound at import)" : "");
		count_for(op)->pass++;
		R.pass++;
	} else {
		printf("FAIL %s [%s]: %s\n", name, op, na ? na : why);
		count_for(op)->fail++;
		R.fail++;
	}
	fflush(stdout);
	for (int i = 0; i < nnames; i++)
		free(names[i]);
	free(model);
}

static void
run_dir(const char *dir)
{
	struct dirent **ents;
	char *model = file_join(dir, "model.onnx");
	int n;

	if (file_exists(model)) {
		free(model);
		run_test(dir);
		return;
	}
	free(model);
	n = scandir(dir, &ents, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		if (ents[i]->d_name[0] != '.') {
			char *sub = file_join(dir, ents[i]->d_name), *m = file_join(sub, "model.onnx");
			if (file_exists(m))
				run_test(sub);
			free(m);
			free(sub);
		}
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
}

static int
cmp_op(const void *a, const void *b)
{
	return strcmp(((const OpCount *)a)->op, ((const OpCount *)b)->op);
}

int
main(int argc, char **argv)
{
	int i = 1;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--skip") && i + 1 < argc)
			load_skip(argv[++i]);
		else if (!strcmp(argv[i], "--table"))
			R.table = 1;
		else if (!strcmp(argv[i], "--all"))
			R.all = 1;
		else {
			fprintf(stderr, "usage: onnx_nodetest [--skip FILE] [--table] [--all] DIR...\n");
			return 2;
		}
	}
	for (; i < argc; i++)
		run_dir(argv[i]);
	qsort(R.op, (size_t)R.nop, sizeof *R.op, cmp_op);
	for (int j = 0; j < R.nop; j++) {
		OpCount *c = &R.op[j];
		if (R.table)
			printf("| %s | %d/%d | %d |\n", c->op, c->pass, c->pass + c->fail, c->na);
		else
			printf("# %-28s %3d passed %3d failed %3d n/a\n", c->op, c->pass, c->fail, c->na);
	}
	printf("%d passed, %d failed, %d not applicable\n", R.pass, R.fail, R.na);
	return R.fail ? 1 : 0;
}
