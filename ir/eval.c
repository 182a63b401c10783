/* eval.c — placeholder until the interpreter lands. */
#include "ir.h"

int
ir_eval(Graph *g, const Tensor *in, int nin, Tensor *out, const EvalOpts *o, Diag *d)
{
	return diag_error(d, g->loc, "interpreter not built yet");
}
