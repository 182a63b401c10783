/*
 * dot.c — the main graph as Graphviz: graph-level nodes as boxes, each
 * fused kernel as a cluster holding its body, inputs and outputs as
 * ellipses, weights as notes.  `moec compile --emit=dot`.
 */
#include <stdlib.h>
#include <string.h>

#include "moec.h"

/* A stable node id for a graph node or a kernel body node. */
static void
node_id(char *buf, size_t n, const Node *x)
{
	snprintf(buf, n, "n%p", (const void *)x);
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

/* Where value v comes from, as a dot node name ("" for constants). */
static void
source(char *buf, size_t n, const Value *v, const Node *call)
{
	if (v->kind == V_WEIGHT)
		snprintf(buf, n, "w_%s", v->name);
	else if (v->kind == V_PARAM)
		snprintf(buf, n, "in_%s", v->name);
	else if (v->def->op == OP_CALL && v->def->callee) {
		/* the body node that produces the kernel's result */
		const Value *r = v->def->callee->ret[v->resno];
		if (r->kind == V_RESULT)
			node_id(buf, n, r->def);
		else
			snprintf(buf, n, "k%p", (const void *)v->def);
	} else
		node_id(buf, n, v->def);
	(void)call;
}

static void
edge(FILE *f, const char *from, const char *to, const Value *v)
{
	fprintf(f, "  \"%s\" -> \"%s\" [label=", from, to);
	quote(f, v->name);
	fprintf(f, "];\n");
}

static void
kernel_cluster(FILE *f, const Node *call)
{
	const Graph *k = call->callee;
	char id[64], from[160];

	fprintf(f, "  subgraph \"cluster_%s\" {\n    label=", k->name);
	char label[256];
	snprintf(label, sizeof label, "@%s (%s)", k->name, ir_graph_str(k, "template", "kernel"));
	quote(f, label);
	fprintf(f, ";\n    style=rounded; color=blue;\n");
	for (const Node *b = k->first; b; b = b->next) {
		node_id(id, sizeof id, b);
		fprintf(f, "    \"%s\" [label=", id);
		quote(f, ir_opname(b->op));
		fprintf(f, "];\n");
	}
	fprintf(f, "  }\n");
	for (const Node *b = k->first; b; b = b->next) {
		node_id(id, sizeof id, b);
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
			source(from, sizeof from, v, call);
			edge(f, from, id, v);
		}
	}
}

int
moec_write_dot(FILE *f, const Module *m)
{
	const Graph *g = ir_main_graph(m);
	char id[64], from[160];

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
			kernel_cluster(f, n);
			continue;
		}
		node_id(id, sizeof id, n);
		fprintf(f, "  \"%s\" [label=", id);
		quote(f, ir_opname(n->op));
		fprintf(f, "%s];\n", pass_is_view(n) ? ", style=dashed" : "");
		for (int i = 0; i < n->nin; i++) {
			const Value *v = n->in[i];
			if (!v || (v->kind == V_RESULT && v->def->op == OP_CONST))
				continue;
			source(from, sizeof from, v, n);
			edge(f, from, id, v);
		}
	}
	for (int i = 0; i < g->nret; i++) {
		fprintf(f, "  \"out_%d\" [shape=ellipse, label=", i);
		quote(f, g->retname[i]);
		fprintf(f, "];\n");
		source(from, sizeof from, g->ret[i], NULL);
		char to[32];
		snprintf(to, sizeof to, "out_%d", i);
		edge(f, from, to, g->ret[i]);
	}
	fprintf(f, "}\n");
	return ferror(f) ? -1 : 0;
}
