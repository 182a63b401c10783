/* canon: placeholder until the canonicalisation patterns land. */
#include "passes.h"

int
canon(Module *m, PassCtx *c)
{
	return 0;
}
