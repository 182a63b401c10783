/*
 * dot.c — the main graph as Graphviz: graph-level nodes as boxes, each
 * fused kernel as a cluster holding its body, inputs and outputs as
 * ellipses, weights as notes, and every edge labelled with its value's name,
 * dtype and shape.  `moec compile --emit=dot`.
 *
 * Node ids are positions (n0, n1, ... in the order written), never
 * addresses, so the same model gives the same file byte for byte.
 */
#include <stdlib.h>
#include <string.h>

#include "moec.h"

/* Node positions, by the id of the node's first result (dense in the module). */
typedef struct {
	const Module *m;
	int *pos;
} Ids;

/* A stable node id: the node's position in the file. */
static void
node_id(char *buf, size_t n, const Ids *ids, const Node *x)
{
	snprintf(buf, n, "n%d", x->nout ? ids->pos[x->out[0]->id] : -1);
}

/* Number the main graph's nodes and every kernel body's, in writing order. */
static void
number(Ids *ids, const Graph *g)
{
	int k = 0;

	for (const Node *n = g->first; n; n = n->next) {
		if (n->op == OP_CALL && n->callee)
			for (const Node *b = n->callee->first; b; b = b->next)
				if (b->nout)
					ids->pos[b->out[0]->id] = k++;
		if (n->nout)
			ids->pos[n->out[0]->id] = k++;
	}
}

static void
quote(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* Where value v comes from, as a dot node name. */
static void
source(char *buf, size_t n, const Ids *ids, const Value *v)
{
	if (v->kind == V_WEIGHT)
		snprintf(buf, n, "w_%s", v->name);
	else if (v->kind == V_PARAM)
		snprintf(buf, n, "in_%s", v->name);
	else if (v->def->op == OP_CALL && v->def->callee &&
		 v->def->callee->ret[v->resno]->kind == V_RESULT)
		/* the body node that produces the kernel's result */
		node_id(buf, n, ids, v->def->callee->ret[v->resno]->def);
	else
		node_id(buf, n, ids, v->def);
}

/* An edge labelled "%x: bf16[T,4096]". */
static void
edge(FILE *f, const Ids *ids, const char *from, const char *to, const Value *v)
{
	char type[160], label[400];

	ir_type_print(type, sizeof type, ids->m, &v->type);
	snprintf(label, sizeof label, "%%%s: %s", v->name, type);
	fprintf(f, "  \"%s\" -> \"%s\" [label=", from, to);
	quote(f, label);
	fprintf(f, "];\n");
}

static void
kernel_cluster(FILE *f, const Ids *ids, const Node *call)
{
	const Graph *k = call->callee;
	char id[64], from[160];

	fprintf(f, "  subgraph \"cluster_%s\" {\n    label=", k->name);
	char label[256];
	snprintf(label, sizeof label, "@%s (%s)", k->name, ir_kernel_template(k) > IR_TMPL_NONE ? ir_template_names[ir_kernel_template(k)] : "kernel");
	quote(f, label);
	fprintf(f, ";\n    style=rounded; color=blue;\n");
	for (const Node *b = k->first; b; b = b->next) {
		node_id(id, sizeof id, ids, b);
		fprintf(f, "    \"%s\" [label=", id);
		quote(f, ir_opname(b->op));
		fprintf(f, "];\n");
	}
	fprintf(f, "  }\n");
	for (const Node *b = k->first; b; b = b->next) {
		node_id(id, sizeof id, ids, b);
		for (int i = 0; i < b->nin; i++) {
			const Value *v = b->in[i];
			if (!v || (v->kind == V_RESULT && v->def->op == OP_CONST))
				continue;
			if (v->kind == V_PARAM) {	/* the call's operand for this parameter */
				for (int p = 0; p < k->nparam; p++)
					if (k->param[p] == v)
						v = call->in[p];
				if (v->kind == V_RESULT && v->def->op == OP_CONST)
					continue;
			}
			source(from, sizeof from, ids, v);
			edge(f, ids, from, id, v);
		}
	}
}

int
moec_write_dot(FILE *f, const Module *m)
{
	const Graph *g = ir_main_graph(m);
	char id[64], from[160];
	Ids ids[1] = {{m, xcalloc((size_t)m->nvalue + 1, sizeof(int))}};

	number(ids, g);
	fprintf(f, "digraph ");
	quote(f, g->name);
	fprintf(f, " {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n");
	for (int i = 0; i < g->nparam; i++)
		fprintf(f, "  \"in_%s\" [shape=ellipse, label=\"%%%s\"];\n", g->param[i]->name,
			g->param[i]->name);
	for (int i = 0; i < m->nweight; i++)
		fprintf(f, "  \"w_%s\" [shape=note, label=\"$%s\"];\n", m->weight[i]->value->name,
			m->weight[i]->value->name);
	for (const Node *n = g->first; n; n = n->next) {
		if (n->op == OP_CONST)
			continue;
		if (n->op == OP_CALL && n->callee) {
			kernel_cluster(f, ids, n);
			continue;
		}
		node_id(id, sizeof id, ids, n);
		fprintf(f, "  \"%s\" [label=", id);
		quote(f, ir_opname(n->op));
		fprintf(f, "%s];\n", ir_is_view(n) ? ", style=dashed" : "");
		for (int i = 0; i < n->nin; i++) {
			const Value *v = n->in[i];
			if (!v || (v->kind == V_RESULT && v->def->op == OP_CONST))
				continue;
			source(from, sizeof from, ids, v);
			edge(f, ids, from, id, v);
		}
	}
	for (int i = 0; i < g->nret; i++) {
		fprintf(f, "  \"out_%d\" [shape=ellipse, label=", i);
		quote(f, g->retname[i]);
		fprintf(f, "];\n");
		source(from, sizeof from, ids, g->ret[i]);
		char to[32];
		snprintf(to, sizeof to, "out_%d", i);
		edge(f, ids, from, to, g->ret[i]);
	}
	fprintf(f, "}\n");
	free(ids->pos);
	return ferror(f) ? -1 : 0;
}
