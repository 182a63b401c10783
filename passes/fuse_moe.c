/* fuse-moe: placeholder until MoE recognition lands. */
#include "passes.h"

int
fuse_moe(Module *m, PassCtx *c)
{
	return 0;
}
