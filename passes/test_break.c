/*
 * test-break: a deliberately wrong rewrite, for testing that --check-eval
 * catches a pass that changes what the graph computes.  Never in a pipeline.
 *
 *	%y = add %a, %b        =>        %y = sub %a, %b
 */
#include "passes.h"

int
test_break(Module *m, PassCtx *c)
{
	Graph *g = ir_main_graph(m);

	for (Node *n = g ? g->first : NULL; n; n = n->next)
		if (n->op == OP_ADD) {
			n->op = OP_SUB;
			return 1;
		}
	return 0;
}
