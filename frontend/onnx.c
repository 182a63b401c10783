/*
 * onnx.c — ONNX ModelProto -> IR module.  Parses the model with the
 * protobuf-c code generated from Debian's onnx.proto, checks the opsets,
 * turns graph inputs into parameters (dim_param -> symbolic dims),
 * initializers into consts or weights, and each node into IR through the op
 * table (onnx_ops.c), then names the graph results and drops what only
 * shape folding needed.
 *
 * Values, types and value_info live in onnx_value.c.
 *
 * Bad input never aborts: every problem is a diagnostic naming the file and
 * the node (index, name, op type) or field.  One run lists every unsupported
 * op; a node that fails marks its outputs bad and its dependants are
 * skipped, so independent errors are all reported.  Returns NULL on error.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

/* --- diagnostics --------------------------------------------------------- */

int
ox_err(ONode *n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_verror(n->c->d, n->loc, fmt, ap);
	va_end(ap);
	return -1;
}

/* A location naming a field: `model.onnx: initializer 'w': error: ...` */
Loc
ox_field(Ctx *c, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	Loc l = loc_file(c->file);

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	l.name = ir_intern(c->m, buf);
	return l;
}

int
ox_field_err(Ctx *c, Loc l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_verror(c->d, l, fmt, ap);
	va_end(ap);
	return -1;
}

/* --- nodes --------------------------------------------------------------- */

static int
is_default_domain(const char *d)
{
	return !d || !*d || strcmp(d, "ai.onnx") == 0;
}

static int
domain_opset(const Ctx *c, const char *domain)
{
	if (is_default_domain(domain))
		return c->opset;
	if (strcmp(domain, "com.microsoft") == 0)
		return c->msopset;
	return 0;
}

static int
cmp_fn(const void *a, const void *b)
{
	const Onnx__FunctionProto *x = *(Onnx__FunctionProto *const *)a;
	const Onnx__FunctionProto *y = *(Onnx__FunctionProto *const *)b;
	int r = strcmp(x->domain ? x->domain : "", y->domain ? y->domain : "");

	return r ? r : strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

/* A model-local function by (domain, name); the table is sorted once. */
static const Onnx__FunctionProto *
find_function(Ctx *c, const Onnx__NodeProto *np)
{
	Onnx__FunctionProto key = {.name = np->op_type, .domain = np->domain}, *kp = &key, **r;

	if (!c->fns && c->model->n_functions) {
		c->fns = arena_array(c->tmp, Onnx__FunctionProto *, c->model->n_functions);
		memcpy(c->fns, c->model->functions, sizeof *c->fns * c->model->n_functions);
		qsort(c->fns, c->model->n_functions, sizeof *c->fns, cmp_fn);
	}
	if (!np->op_type || !c->fns)
		return NULL;
	r = bsearch(&kp, c->fns, c->model->n_functions, sizeof *c->fns, cmp_fn);
	return r ? *r : NULL;
}

static Loc
node_loc(Ctx *c, const Onnx__NodeProto *np, int index)
{
	Loc l = loc_file(c->file);

	l.node = index;
	l.name = ir_intern(c->m, np->name ? np->name : "");
	l.optype = ir_intern(c->m, np->op_type ? np->op_type : "");
	return l;
}

static void
mark_bad(ONode *n)
{
	for (int i = 0; i < n->nout; i++)
		if (n->out[i]) {
			n->out[i]->bad = 1;
			n->out[i]->state = 1;
		}
}

/* Inputs and outputs of a node; 1 if it must be skipped (a bad input). */
static int
bind_node(Ctx *c, ONode *n)
{
	const Onnx__NodeProto *np = n->np;
	int skip = 0;

	n->nin = (int)np->n_input;
	n->nout = (int)np->n_output;
	n->in = arena_array(c->tmp, OVal *, n->nin + 1);
	n->out = arena_array(c->tmp, OVal *, n->nout + 1);
	for (int i = 0; i < n->nout; i++) {
		const char *s = np->output[i];
		if (!s || !*s)
			continue;
		n->out[i] = ox_define(c, s);
		if (!n->out[i]) {
			ox_err(n, "output '%s' is defined twice", s);
			skip = -1;
		}
	}
	for (int i = 0; i < n->nin; i++) {
		const char *s = np->input[i];
		if (!s || !*s)
			continue;
		n->in[i] = ox_find(c, s);
		if (!n->in[i] || !n->in[i]->state) {
			ox_err(n, "input '%s' is not defined by any earlier node, input or "
			       "initializer", s);
			skip = -1;
		} else if (n->in[i]->bad && !skip) {
			skip = 1;
		}
	}
	return skip;
}

static int expand_function(Ctx *c, ONode *n, const Onnx__FunctionProto *f);

/* The local function a node calls; NULL if an importer takes its op (as
 * run_importer decides). */
static const Onnx__FunctionProto *
call_target(Ctx *c, const Onnx__NodeProto *np)
{
	const char *dom = np->domain ? np->domain : "";

	if (!np->op_type || ox_find_op(dom, np->op_type, domain_opset(c, dom)))
		return NULL;
	return find_function(c, np);
}

/*
 * Nodes that np expands to, added to *count.  Function calls expand in
 * place, so 16 levels of functions that each call the next three times
 * make 3^16 nodes from a model of a few kilobytes: the graph is counted
 * before anything is expanded, walking the calls as expand_function will
 * (a call too deep counts 1: expand_function refuses it) and stopping as
 * soon as the count passes the limit, so the walk is bounded too.
 */
static void
count_nodes(Ctx *c, const Onnx__NodeProto *np, int depth, int64_t *count)
{
	const Onnx__FunctionProto *f = call_target(c, np);

	if (!f || depth > OX_MAX_FN_DEPTH) {
		++*count;
		return;
	}
	for (size_t i = 0; i < f->n_node && *count <= c->max_nodes; i++)
		count_nodes(c, f->node[i], depth + 1, count);
}

static int
check_node_budget(Ctx *c, const Onnx__GraphProto *gp)
{
	int64_t count = 0;

	for (size_t i = 0; i < gp->n_node; i++) {
		const Onnx__FunctionProto *f = call_target(c, gp->node[i]);
		count_nodes(c, gp->node[i], 0, &count);
		if (count <= c->max_nodes)
			continue;
		if (f)
			diag_error(c->d, node_loc(c, gp->node[i], (int)i), "function %s expands the "
				   "graph past %lld nodes (the limit on nodes after function "
				   "expansion)", f->name, (long long)c->max_nodes);
		else
			diag_error(c->d, node_loc(c, gp->node[i], (int)i), "the graph has more than "
				   "%lld nodes (the limit on nodes after function expansion)",
				   (long long)c->max_nodes);
		return -1;
	}
	return 0;
}

/* The inputs an importer relies on are there: it may read them freely. */
static int
check_arity(ONode *n, const OpEntry *e)
{
	if (n->nin < e->minin || (e->maxin >= 0 && n->nin > e->maxin)) {
		if (e->maxin < 0)
			return ox_err(n, "takes at least %d inputs, not %d", e->minin, n->nin);
		return ox_err(n, "takes %d to %d inputs, not %d", e->minin, e->maxin, n->nin);
	}
	for (int i = 0; i < e->minin; i++)
		if (!n->in[i])
			return ox_err(n, "input %d is required", i);
	if (e->maxin < 0)	/* variadic: every input is an operand */
		for (int i = 0; i < n->nin; i++)
			if (!n->in[i])
				return ox_err(n, "input %d is empty", i);
	return 0;
}

/* Opset 11-12 nodes whose attribute opset 13 made input 1: Squeeze and
 * Unsqueeze's axes, Split's split.  The attribute becomes a known input, so
 * the opset-13 importers read the node. */
int
ox_legacy(ONode *n)
{
	static const char *const ops[][2] = {{"Squeeze", "axes"}, {"Unsqueeze", "axes"}, {"Split", "split"}};
	const Onnx__NodeProto *np = n->np;
	int64_t v[MAXRANK * 8];
	const char *attr = NULL;
	OVal **in, *o;
	Known *k;
	int m;

	if (n->opset >= 13 || (np->domain && *np->domain && strcmp(np->domain, "ai.onnx")))
		return 0;
	for (size_t i = 0; i < NELEM(ops); i++)
		if (!strcmp(np->op_type, ops[i][0]))
			attr = ops[i][1];
	if (!attr || !ox_attr(n, attr))
		return 0;
	if (n->nin > 1)
		return ox_err(n, "'%s' is both an attribute and an input", attr);
	if ((m = ox_attr_ints(n, attr, v, (int)NELEM(v))) < 0)
		return ox_err(n, "attribute '%s' must be a list of at most %d integers", attr, (int)NELEM(v));
	k = ox_known_new(n->c, DT_I64, 1, (int64_t[]){m});
	for (int i = 0; i < m; i++)
		k->iv[i] = (SInt){v[i], SI_NUM};
	o = arena_alloc(n->c->tmp, sizeof *o);
	memset(o, 0, sizeof *o);
	o->name = attr;
	o->k = k;
	o->type = ir_type(DT_I64, 1, (Dim[]){m});
	o->state = 1;
	in = arena_array(n->c->tmp, OVal *, 2);
	in[0] = n->nin ? n->in[0] : NULL;
	in[1] = o;
	n->in = in;
	n->nin = 2;
	return 0;
}

static int
run_importer(Ctx *c, ONode *n)
{
	const Onnx__NodeProto *np = n->np;
	const Onnx__FunctionProto *f;
	const OpEntry *e;
	int nerr = c->d->nerror, rc;

	if (!np->op_type || !*np->op_type)
		return ox_err(n, "node without an op_type");
	e = ox_find_op(np->domain ? np->domain : "", np->op_type, n->opset);
	if (!e && (f = find_function(c, np)) != NULL)
		return expand_function(c, n, f);
	if (!e && c->depth == 0)
		return -1;	/* reported by check_ops */
	if (!e)
		return ox_err(n, "unsupported operator %s in a function body", np->op_type);
	if (ox_legacy(n) || check_arity(n, e))
		return -1;
	for (int i = 0; i < n->nin && !ox_reads_seq(e->domain, e->op); i++)
		if (n->in[i] && n->in[i]->seq)
			return ox_err(n, "input %d ('%s') is a sequence; only the sequence operators "
				      "read one", i, n->in[i]->name);
	rc = e->fn(n);
	if (rc == 0 && c->b.err)
		rc = -1;
	if (rc != 0 && c->d->nerror == nerr)
		ox_err(n, "import failed");
	return rc;
}

static int
is_temp_name(const char *s)
{
	if (*s++ != 't' || !*s)
		return 0;
	while (isdigit((unsigned char)*s))
		s++;
	return !*s;
}

/* Intermediates an importer made get names after the node's first output
 * ("y.1"), so dumps read like the model. */
static void
name_intermediates(Ctx *c, ONode *n, Node *from)
{
	const char *base = NULL;
	char buf[256];
	int k = 1;

	for (int i = 0; i < n->nout && !base; i++)
		if (n->out[i] && n->out[i]->v && n->out[i]->v->kind == V_RESULT)
			base = n->out[i]->v->name;
		else if (n->out[i] && n->out[i]->seq)
			base = n->out[i]->name;	/* a sequence's tensors: "split.1" */
	if (!base)
		base = n->np->op_type ? n->np->op_type : "t";
	for (Node *x = from ? from->next : c->g->first; x; x = x->next)
		for (int i = 0; i < x->nout; i++) {
			int named = 0;
			for (int j = 0; j < n->nout; j++)
				named |= n->out[j] && n->out[j]->v == x->out[i];
			if (named || !is_temp_name(x->out[i]->name))
				continue;
			do
				snprintf(buf, sizeof buf, "%.200s.%d", base, k++);
			while (str_find(&c->g->names, buf));
			ir_set_name(c->g, x->out[i], buf);
		}
}

int
ox_import_node(Ctx *c, const Onnx__NodeProto *np, int index)
{
	Node *last = c->g->last;
	ONode node = {.c = c, .np = np, .index = index, .b = &c->b};
	ONode *n = &node;
	int skip;

	n->loc = node_loc(c, np, index);
	n->opset = domain_opset(c, np->domain);
	skip = bind_node(c, n);
	if (skip) {
		mark_bad(n);
		return skip < 0 ? -1 : 0;
	}
	c->b.loc = n->loc;
	c->b.err = 0;
	c->b.npend = 0;
	if (run_importer(c, n) != 0) {
		mark_bad(n);
		return -1;
	}
	name_intermediates(c, n, last);
	for (int i = 0; i < n->nout; i++) {
		OVal *o = n->out[i];
		if (!o)
			continue;
		if (!o->state) {
			ox_err(n, "output %d ('%s') is not produced by this importer", i, o->name);
			mark_bad(n);
			return -1;
		}
		if (ox_check_declared(c, o, n->loc)) {
			o->bad = 1;
			return -1;
		}
	}
	return 0;
}

/* A body node with its attribute references (ref_attr_name) resolved from
 * the calling node; a reference the caller does not set is left out, so
 * the op's default applies. */
static const Onnx__NodeProto *
bind_attrs(Ctx *c, const Onnx__NodeProto *body, const ONode *call)
{
	Onnx__NodeProto *np;
	size_t k = 0;

	for (size_t i = 0; i < body->n_attribute; i++)
		k += body->attribute[i]->ref_attr_name && *body->attribute[i]->ref_attr_name;
	if (!k)
		return body;
	np = arena_alloc(c->tmp, sizeof *np);
	*np = *body;
	np->attribute = arena_array(c->tmp, Onnx__AttributeProto *, body->n_attribute + 1);
	np->n_attribute = 0;
	for (size_t i = 0; i < body->n_attribute; i++) {
		Onnx__AttributeProto *a = body->attribute[i], *b;
		const Onnx__AttributeProto *src;
		if (!a->ref_attr_name || !*a->ref_attr_name) {
			np->attribute[np->n_attribute++] = a;
			continue;
		}
		if (!(src = ox_attr(call, a->ref_attr_name)))
			continue;
		b = arena_alloc(c->tmp, sizeof *b);
		*b = *src;
		b->name = a->name;
		np->attribute[np->n_attribute++] = b;
	}
	return np;
}

/*
 * A model-local function: its body imported in a scope where the formal
 * inputs alias the actual ones and attribute references take the calling
 * node's attributes.
 */
static int
expand_function(Ctx *c, ONode *n, const Onnx__FunctionProto *f)
{
	const char *saved = c->prefix;
	int rc = 0;

	if (c->depth > OX_MAX_FN_DEPTH)
		return ox_err(n, "functions nest too deeply");
	if (f->n_input < (size_t)n->nin || f->n_output < (size_t)n->nout)
		return ox_err(n, "function %s takes %zu inputs and %zu outputs", f->name,
			      f->n_input, f->n_output);
	/* the call site: the graph's node index, then the body node's index at
	 * each level, so two calls in one body get names of their own */
	c->prefix = arena_printf(c->tmp, "%s%s#%d/", saved ? saved : "", f->name,
				 c->depth ? c->site : n->index);
	for (int i = 0; i < n->nin; i++) {
		OVal *o = ox_define(c, f->input[i]);
		if (!o) {
			rc = ox_err(n, "function %s names input '%s' twice", f->name, f->input[i]);
			goto out;
		}
		if (n->in[i])
			*o = (OVal){.name = o->name, .v = ox_value(c, n->in[i]), .k = n->in[i]->k,
				    .type = *ox_type(n->in[i]), .state = 1};
	}
	c->depth++;
	for (size_t i = 0; i < f->n_node && rc == 0; i++) {
		c->site = (int)i;
		rc = ox_import_node(c, bind_attrs(c, f->node[i], n), n->index);
	}
	c->depth--;
	for (int i = 0; i < n->nout && rc == 0; i++) {
		OVal *src = ox_find(c, f->output[i]);
		if (!src || !src->state || src->bad)
			rc = ox_err(n, "function %s does not compute its output '%s'", f->name,
				    f->output[i]);
		else if (n->out[i]) {
			c->prefix = saved;
			ox_alias(n, i, src);
		}
	}
out:
	c->prefix = saved;
	return rc;
}

/* --- the graph ----------------------------------------------------------- */

static int
check_opsets(Ctx *c, const Onnx__ModelProto *mp)
{
	int rc = 0;

	c->opset = -1;
	/* onnxruntime runs com.microsoft nodes of a model that does not import
	 * the domain (its optimizer's fusions, saved with onnx.save, leave it
	 * out); the domain has one version */
	c->msopset = 1;
	for (size_t i = 0; i < mp->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *os = mp->opset_import[i];
		Loc l = ox_field(c, "opset_import[%zu] '%s'", i, os->domain ? os->domain : "");
		if (is_default_domain(os->domain)) {
			c->opset = (int)MIN(MAX(os->version, -1), 1000);
			if (os->version < OX_OPSET_MIN || os->version > 23)
				rc = ox_field_err(c, l, "opset %lld of the default domain is not "
					       "supported (%d to 23 are)", (long long)os->version, OX_OPSET_MIN);
		} else if (strcmp(os->domain, "com.microsoft") == 0) {
			c->msopset = (int)MIN(MAX(os->version, 0), 1000);
			if (os->version != 1)
				rc = ox_field_err(c, l, "com.microsoft opset %lld is not supported (1 is)",
					       (long long)os->version);
		}
	}
	if (c->opset < 0)
		rc = ox_field_err(c, loc_file(c->file), "the model imports no opset of the default "
			       "domain");
	return rc;
}

typedef struct {
	const char *domain, *op;
	int first, count;
} Missing;

static int
cmp_missing(const void *a, const void *b)
{
	const Missing *x = a, *y = b;
	int c = strcmp(x->domain, y->domain);

	if (!c)
		c = strcmp(x->op, y->op);
	return c ? c : x->first - y->first;
}

static int
cmp_first(const void *a, const void *b)
{
	return ((const Missing *)a)->first - ((const Missing *)b)->first;
}

static void
report_missing(Ctx *c, const Onnx__GraphProto *gp, const Missing *m)
{
	const Onnx__NodeProto *np = gp->node[m->first];
	Loc l = node_loc(c, np, m->first);
	int v = domain_opset(c, m->domain);
	const char *dot = *m->domain ? "." : "";

	if (!*m->op)
		diag_error(c->d, l, "node without an op_type");
	else if (!is_default_domain(m->domain) && v == 0 && ox_op_known(m->domain, m->op))
		diag_error(c->d, l, "domain '%s' is not imported by the model", m->domain);
	else if (ox_op_known(m->domain, m->op))
		diag_error(c->d, l, "operator %s%s%s needs a newer opset than %d", m->domain, dot,
			   m->op, v);
	else
		diag_error(c->d, l, "unsupported operator %s%s%s", m->domain, dot, m->op);
	if (m->count > 1)
		diag_note(c->d, l, "%d nodes use it", m->count);
}

/* Every node's op must have an importer (or a local function).  All that
 * do not are listed, each once, in the order they first appear. */
static int
check_ops(Ctx *c, const Onnx__GraphProto *gp)
{
	Missing *m = xcalloc(gp->n_node + 1, sizeof *m);
	int n = 0, k = 0;

	for (size_t i = 0; i < gp->n_node; i++) {
		const Onnx__NodeProto *np = gp->node[i];
		const char *dom = np->domain ? np->domain : "", *op = np->op_type ? np->op_type : "";
		if (*op && (ox_find_op(dom, op, domain_opset(c, dom)) || find_function(c, np)))
			continue;
		m[n++] = (Missing){is_default_domain(dom) ? "" : dom, op, (int)i, 1};
	}
	qsort(m, (size_t)n, sizeof *m, cmp_missing);
	for (int i = 0; i < n; i++) {	/* one entry per op, with its count */
		if (k && !strcmp(m[k - 1].domain, m[i].domain) && !strcmp(m[k - 1].op, m[i].op))
			m[k - 1].count++;
		else
			m[k++] = m[i];
	}
	qsort(m, (size_t)k, sizeof *m, cmp_first);
	for (int i = 0; i < k; i++)
		report_missing(c, gp, &m[i]);
	free(m);
	return k ? -1 : 0;
}

static Value **
graph_outputs(Ctx *c, const Onnx__GraphProto *gp, const char ***names)
{
	Value **v = arena_array(c->tmp, Value *, gp->n_output + 1);

	*names = arena_array(c->tmp, const char *, gp->n_output + 1);
	for (size_t i = 0; i < gp->n_output; i++) {
		const char *name = gp->output[i]->name ? gp->output[i]->name : "";
		OVal *o = ox_find(c, name);
		Loc l = ox_field(c, "graph output '%s'", name);
		if (!o || !o->state) {
			ox_field_err(c, l, "no node, input or initializer defines it");
			return NULL;
		}
		if (o->bad)
			return NULL;
		if (o->seq) {
			ox_field_err(c, l, "is a sequence (only tensors can be graph outputs)");
			return NULL;
		}
		c->b.loc = l;
		if (!(v[i] = ox_value(c, o)) || ox_check_declared(c, o, l))
			return NULL;
		(*names)[i] = name;
	}
	return v;
}

static const Tensor *
bound_input(const Ctx *c, const char *name)
{
	for (int i = 0; i < c->nbind; i++)
		if (c->bind[i].name && !strcmp(c->bind[i].name, name))
			return &c->bind[i];
	return NULL;
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * Graph input names are unique (ONNX's SSA rule; onnx.checker refuses a
 * repeat).  An initializer may also be listed as an input (IR < 4): that is
 * not a repeat.
 */
static int
unique_inputs(Ctx *c, const Onnx__GraphProto *gp)
{
	const char **v = arena_array(c->tmp, const char *, gp->n_input + 1);
	int rc = 0;

	for (size_t i = 0; i < gp->n_input; i++)
		v[i] = gp->input[i]->name ? gp->input[i]->name : "";
	qsort(v, gp->n_input, sizeof *v, cmp_name);
	for (size_t i = 1; i < gp->n_input && !rc; i++)
		if (strcmp(v[i - 1], v[i]) == 0)
			rc = ox_field_err(c, ox_field(c, "graph input '%s'", v[i]), "listed twice "
					  "among the graph inputs");
	return rc;
}

static int
add_inputs(Ctx *c, const Onnx__GraphProto *gp)
{
	int rc = unique_inputs(c, gp);

	for (size_t i = 0; i < gp->n_input; i++) {
		const Onnx__ValueInfoProto *vi = gp->input[i];
		const char *name = vi->name ? vi->name : "";
		Loc l = ox_field(c, "graph input '%s'", name);
		Type t;
		OVal *o;

		if (ox_find(c, name))
			continue;	/* an initializer listed as input (IR < 4) */
		if (bound_input(c, name)) {
			OVal *b = ox_define(c, name);
			if (b)
				ox_bind_host(c, b, bound_input(c, name));
			continue;
		}
		memset(&t, 0, sizeof t);
		if (ox_input_type(c, vi, l, &t)) {
			rc = -1;
			continue;
		}
		if (!(o = ox_define(c, name))) {
			rc = ox_field_err(c, l, "defined twice");
			continue;
		}
		o->v = ir_add_param(c->g, name, t);
		o->state = 1;
	}
	return rc;
}

static int
add_initializers(Ctx *c, const Onnx__GraphProto *gp)
{
	int rc = 0;

	if (gp->n_sparse_initializer)
		rc = ox_field_err(c, ox_field(c, "graph '%s'", gp->name ? gp->name : ""),
			       "sparse initializers are not supported");
	for (size_t i = 0; i < gp->n_initializer; i++) {
		const Onnx__TensorProto *t = gp->initializer[i];
		const char *name = t->name ? t->name : "";
		Loc l = ox_field(c, "initializer '%s'", name);
		OVal *o = ox_define(c, name);

		if (!o) {
			rc = ox_field_err(c, l, "defined twice");
			continue;
		}
		c->initializers = 1;
		if (ox_bind_tensor(c, o, t, l, name))
			rc = -1;
		c->initializers = 0;
		o->state = 1;
	}
	return rc;
}

/* Delete nodes whose results reach no graph result (shape arithmetic that
 * folding replaced), then weights nothing uses. */
static void
dce(Graph *g)
{
	Module *m = g->m;
	char *live = xcalloc(m->nvalue + 1, 1);

	for (int i = 0; i < g->nret; i++)
		live[g->ret[i]->id] = 1;
	for (Node *n = g->last, *p; n; n = p) {
		int used = 0;
		p = n->prev;
		for (int i = 0; i < n->nout; i++)
			used |= live[n->out[i]->id];
		if (!used) {
			ir_erase(g, n);
			continue;
		}
		for (int i = 0; i < n->nin; i++)
			if (n->in[i])
				live[n->in[i]->id] = 1;
	}
	for (int i = m->nweight - 1; i >= 0; i--)
		if (!live[m->weight[i]->value->id])
			ir_remove_weight(m, m->weight[i]);
	free(live);
}

static const char *
graph_name(Ctx *c, const char *s)
{
	char buf[128];
	size_t k = 0;

	if (!s || !*s)
		s = "main";
	if (!isalpha((unsigned char)*s) && *s != '_')
		buf[k++] = 'g';
	for (; *s && k + 1 < sizeof buf; s++)
		buf[k++] = isalnum((unsigned char)*s) || *s == '_' || *s == '.' ? *s : '_';
	buf[k] = 0;
	return ir_intern(c->m, buf);
}

/*
 * The nodes in an order where each comes after the nodes whose outputs it
 * reads.  ONNX asks writers for that order, but onnxruntime sorts for
 * itself and tools rely on it: its float16 converter appends the input
 * Casts after their users.  Kahn's algorithm, taking the lowest index
 * ready, so a sorted graph keeps its order; what a cycle leaves comes last
 * in file order, for the importer to report.  Diagnostics keep the file's
 * node numbers.
 */
typedef struct {
	const char *name;
	int node;
} Producer;

static size_t
prod_slot(const Producer *t, size_t mask, const char *name)
{
	size_t h = (size_t)hash_str(name) & mask;

	while (t[h].name && strcmp(t[h].name, name))
		h = (h + 1) & mask;
	return h;
}

/* Each output name's node, in an open-addressed table of *mask + 1 slots. */
static Producer *
producers(const Onnx__GraphProto *gp, size_t *mask)
{
	size_t cap = 16, ne = 0;
	Producer *t;

	for (size_t i = 0; i < gp->n_node; i++)
		ne += gp->node[i]->n_output;
	while (cap < 2 * ne + 2)
		cap *= 2;
	*mask = cap - 1;
	t = xcalloc(cap, sizeof *t);
	for (size_t i = 0; i < gp->n_node; i++)
		for (size_t j = 0; j < gp->node[i]->n_output; j++) {
			const char *o = gp->node[i]->output[j];
			size_t h = o && *o ? prod_slot(t, *mask, o) : 0;
			if (o && *o && !t[h].name)
				t[h] = (Producer){o, (int)i};
		}
	return t;
}

static void
heap_push(int *h, int *n, int v)
{
	int i = (*n)++;

	for (; i > 0 && h[(i - 1) / 2] > v; i = (i - 1) / 2)
		h[i] = h[(i - 1) / 2];
	h[i] = v;
}

static int
heap_pop(int *h, int *n)
{
	int top = h[0], v = h[--*n], i = 0, k;

	while ((k = 2 * i + 1) < *n) {
		if (k + 1 < *n && h[k + 1] < h[k])
			k++;
		if (h[k] >= v)
			break;
		h[i] = h[k];
		i = k;
	}
	h[i] = v;
	return top;
}

static int *
node_order(const Onnx__GraphProto *gp)
{
	size_t nn = gp->n_node, mask, ne = 0;
	int *order = xcalloc(nn + 1, sizeof *order), *deps, *heap, *first, *next, *to, nh = 0, k = 0;
	Producer *t = producers(gp, &mask);
	char *placed;

	for (size_t i = 0; i < nn; i++)
		ne += gp->node[i]->n_input;
	deps = xcalloc(nn + 1, sizeof *deps);
	first = xcalloc(nn + 1, sizeof *first);
	next = xcalloc(ne + 1, sizeof *next);
	to = xcalloc(ne + 1, sizeof *to);
	heap = xcalloc(nn + 1, sizeof *heap);
	placed = xcalloc(nn + 1, 1);
	for (size_t i = 0; i < nn; i++)
		first[i] = -1;
	ne = 0;
	for (size_t i = 0; i < nn; i++)
		for (size_t j = 0; j < gp->node[i]->n_input; j++) {
			const char *in = gp->node[i]->input[j];
			Producer *p = in && *in ? &t[prod_slot(t, mask, in)] : NULL;
			if (!p || !p->name || p->node == (int)i)
				continue;
			deps[i]++;
			to[ne] = (int)i;
			next[ne] = first[p->node];
			first[p->node] = (int)ne++;
		}
	for (size_t i = 0; i < nn; i++)
		if (!deps[i])
			heap_push(heap, &nh, (int)i);
	while (nh) {
		int i = heap_pop(heap, &nh);
		order[k++] = i;
		placed[i] = 1;
		for (int e = first[i]; e >= 0; e = next[e])
			if (--deps[to[e]] == 0)
				heap_push(heap, &nh, to[e]);
	}
	for (size_t i = 0; i < nn; i++)
		if (!placed[i])
			order[k++] = (int)i;
	free(t), free(deps), free(first), free(next), free(to), free(heap), free(placed);
	return order;
}

static int
import_graph(Ctx *c, const Onnx__GraphProto *gp)
{
	const char **names;
	Value **outs;
	int rc = 0, *order;

	c->g = ir_new_graph(c->m, graph_name(c, gp->name), G_GRAPH);
	c->g->loc = loc_file(c->file);
	c->b = (Builder){.g = c->g, .d = c->d, .loc = loc_file(c->file)};
	ox_index_vinfo(c, gp);
	if (add_initializers(c, gp) | add_inputs(c, gp) | check_ops(c, gp) ||
	    check_node_budget(c, gp))
		return -1;
	order = node_order(gp);
	for (size_t i = 0; i < gp->n_node; i++)
		if (ox_import_node(c, gp->node[order[i]], order[i]))
			rc = -1;
	free(order);
	if (rc || !(outs = graph_outputs(c, gp, &names)))
		return -1;
	if (gp->n_output == 0)
		return ox_field_err(c, loc_file(c->file), "the graph has no outputs");
	ir_set_results(c->g, outs, names, (int)gp->n_output);
	dce(c->g);
	return 0;
}

static int
check_model(Ctx *c, const Onnx__ModelProto *mp)
{
	if (!mp->graph)
		return ox_field_err(c, loc_file(c->file), "the model has no graph");
	if (mp->n_training_info)
		diag_warn(c->d, loc_file(c->file), "training_info is ignored");
	return check_opsets(c, mp);
}

/*
 * protobuf-c unpacks nested messages recursively with no depth limit, so a
 * model of a few megabytes nesting graphs in attributes in nodes in graphs
 * overflows the stack.  Walk the wire format first, descending into message
 * fields only (by protobuf-c's descriptors), and refuse deeper nesting.
 * The same walk refuses a NUL byte in a string field (a name, an op_type):
 * protobuf-c hands strings over NUL-terminated, so "Relu\0evil" would be
 * read as "Relu".  Malformed input is left for protobuf-c to report.
 * Linear in len.
 */
#define OX_MAX_NESTING 64
#define OX_MAX_FILE ((uint64_t)1 << 31)	/* protobuf's own limit on a message */

static int
read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int s = 0; s < 64 && *p < end; s += 7) {
		uint8_t c = *(*p)++;
		*v |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80))
			return 0;
	}
	return -1;
}

enum { WIRE_OK, WIRE_DEEP, WIRE_NUL };

/* *field gets the string field holding a NUL ("NodeProto.op_type"). */
static int
wire_check(const uint8_t *p, size_t len, const ProtobufCMessageDescriptor *desc, int depth,
	   char *field, size_t nfield)
{
	const uint8_t *end = p + len;
	const ProtobufCFieldDescriptor *f;
	uint64_t key, n;
	int rc;

	if (depth > OX_MAX_NESTING)
		return WIRE_DEEP;
	while (p < end) {
		if (read_varint(&p, end, &key))
			return 0;
		switch (key & 7) {
		case 0:
			if (read_varint(&p, end, &n))
				return 0;
			break;
		case 1:
		case 5:
			if ((size_t)(end - p) < ((key & 7) == 1 ? 8u : 4u))
				return 0;
			p += (key & 7) == 1 ? 8 : 4;
			break;
		case 2:
			if (read_varint(&p, end, &n) || n > (uint64_t)(end - p))
				return 0;
			f = key >> 3 <= UINT32_MAX ?
				protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3)) : NULL;
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
			    (rc = wire_check(p, (size_t)n, f->descriptor, depth + 1, field, nfield)))
				return rc;
			if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, (size_t)n)) {
				snprintf(field, nfield, "%s.%s", desc->short_name, f->name);
				return WIRE_NUL;
			}
			p += n;
			break;
		default:
			return 0;
		}
	}
	return 0;
}

static Module *
import_buffer(const char *path, const void *buf, size_t len, const FeOpts *o,
	      const Tensor *bind, int nbind, Diag *d)
{
	Onnx__ModelProto *mp;
	Ctx ctx = {0}, *c = &ctx;
	int nerr = d->nerror, wire;
	char field[128];

	c->bind = bind;
	c->nbind = nbind;
	c->m = ir_new_module();
	c->d = d;
	c->o = o;
	c->file = ir_intern(c->m, path);
	c->m->file = c->file;
	arena_set_limit(c->m->arena, IR_MAX_ARENA_BYTES, c->file);
	c->dir = file_dirname(path);
	c->tmp = arena_new(0);
	c->max_bytes = o && o->max_bytes > 0 ? o->max_bytes : (int64_t)TENSOR_MAX_BYTES;
	c->max_host = o && o->max_host_bytes > 0 ? (uint64_t)o->max_host_bytes : mem_host_limit();
	c->max_nodes = o && o->max_nodes > 0 ? MIN(o->max_nodes, IR_MAX_NODES) : IR_MAX_NODES;
	mp = NULL;
	wire = wire_check(buf, len, &onnx__model_proto__descriptor, 1, field, sizeof field);
	if (wire == WIRE_DEEP)
		diag_error(d, loc_file(c->file), "messages nest more than %d deep (graphs in "
			   "attributes in nodes ...): refused before parsing", OX_MAX_NESTING);
	else if (wire == WIRE_NUL)
		diag_error(d, loc_file(c->file), "a string field (%s) holds a NUL byte: refused "
			   "before parsing", field);
	else if (!(mp = onnx__model_proto__unpack(NULL, len, buf)))
		diag_error(d, loc_file(c->file), "not an ONNX model: the protobuf is truncated "
			   "or malformed (bad tag, length or wire type)");
	else if (check_model(c, mp) == 0) {
		c->model = mp;
		import_graph(c, mp->graph);
	}
	if (d->nerror == nerr && ir_verify(c->m, d) != 0)
		diag_note(d, loc_file(c->file), "the imported graph fails verification: an "
			  "importer bug");
	if (mp)
		onnx__model_proto__free_unpacked(mp, NULL);
	free(c->tab);
	free(c->dir);
	arena_free(c->tmp);
	if (d->nerror != nerr) {
		ir_free_module(c->m);
		return NULL;
	}
	return c->m;
}

Module *
onnx_import_buffer(const char *path, const void *buf, size_t len, const FeOpts *o,
		   Diag *d)
{
	return import_buffer(path, buf, len, o, NULL, 0, d);
}

Module *
onnx_import_bound(const char *path, const FeOpts *o, const Tensor *bind, int nbind,
		  Diag *d)
{
	size_t len;
	char *buf = file_read_max(path, OX_MAX_FILE, &len, d);
	Module *m;

	if (!buf)
		return NULL;
	m = import_buffer(path, buf, len, o, bind, nbind, d);
	free(buf);
	return m;
}

Module *
onnx_import(const char *path, const FeOpts *o, Diag *d)
{
	return onnx_import_bound(path, o, NULL, 0, d);
}
