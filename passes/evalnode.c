/*
 * evalnode.c — evaluate a single node on host tensors by wrapping it in a
 * throwaway kernel and running the interpreter, so constant folding uses
 * exactly the semantics every test checks against.
 */
#include <string.h>

#include "passes.h"

int
pass_eval_node(Module *m, Node *n, const Tensor *in, Tensor *out, Diag *d)
{
	Graph *tmp = ir_new_graph(m, "__fold", G_KERNEL);
	Value *args[64];
	Tensor targs[64];
	int nargs = 0, rc;
	Node *c;

	if (n->nin > 64 || n->op == OP_CALL) {
		ir_remove_graph(m, tmp);
		return -1;
	}
	for (int i = 0; i < n->nin; i++) {
		args[i] = NULL;
		if (!n->in[i])
			continue;
		args[i] = ir_add_param(tmp, NULL, n->in[i]->type);
		targs[nargs++] = in[i];
	}
	c = ir_new_node(tmp, n->op, args, n->nin, n->nout);
	c->loc = n->loc;
	ir_copy_attrs(m, c, n);
	for (int i = 0; i < n->nout; i++)
		c->out[i]->type = n->out[i]->type;
	ir_insert(tmp, NULL, c);
	ir_set_results(tmp, c->out, NULL, n->nout);
	rc = ir_eval(tmp, targs, nargs, out, NULL, d);
	ir_remove_graph(m, tmp);
	return rc;
}
