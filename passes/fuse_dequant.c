/*
 * fuse-dequant: a quantised weight's dequantize moves into the GEMM kernel
 * that reads it, as the B operand, so that the kernel loads the packed
 * weights and dequantises them in registers (codegen: GemmSpec.bq, the
 * weights repacked at compile time) instead of reading a bf16 copy.
 *
 *	%wb = dequantize $wq, $s, $z, axis=1, block_size=128, to=bf16
 *	%y = call @g.k0(%x, %wb)                      =>   %y = call @g.k0(%x, $wq, $s, $z)
 *	kernel @g.k0(%x, %w) template=gemm {               kernel @g.k0(%x, %q, %s, %z) template=gemm {
 *	    %h = matmul %x, %w, trans_b=1                      %w = dequantize %q, %s, %z, axis=1, ...
 *	                                                       %h = matmul %x, %w, trans_b=1
 *
 * The same for the grouped expert GEMMs of lowered MoE ([E,N,K] weights,
 * blocks along K).
 *
 * FP8 x FP8 (PassOpts.fp8_mma: every target runs it, sm_90a): when B is an
 * e4m3 weight with f32 scales per 128 along K and A (perhaps through the
 * kernel's token gather) is the dequantize of an e4m3 activation with f32
 * scales per token and 128 columns (DeepSeek-V3's dynamic scheme, which
 * the producer's epilogue quantises), that dequantize moves in as well, so
 * the GEMM reads the e4m3 activations and their scales (codegen: GemmSpec.f8):
 *
 *	%a, %as = call @g.k2(..)  ; %ab = dequantize %a, %as, axis=1, block_size=128
 *	%y = call @g.k0(%ab, $wq, $ws)     =>   %y = call @g.k0($wq, $ws, %a, %as)
 *	                                        kernel: %x = dequantize %q8, %s8, ... (before the matmul)
 *
 * A dequantize with other users stays for them (a copy moves in).  It runs after fuse-gemm (the kernels exist) and before
 * fuse-ew (which would make the dequantize a kernel of its own).  What is
 * not moved stays a weight-only node: dequantised once at load (or at
 * compile time for real weights, by fold) into a bf16 weight that the GEMM
 * then reads in full — the fusion report says why and what that costs.
 */
#include <stdio.h>
#include <string.h>

#include "passes.h"

static const Node *
kernel_matmul(const Graph *k)
{
	for (const Node *n = k->first; n; n = n->next)
		if (n->op == OP_MATMUL || n->op == OP_GROUPED_MATMUL)
			return n;
	return NULL;
}

/* A weight, or a short chain of reshapes and transposes of one (lower-moe's
 * gate|up interleave of a synthetic weight, which fold leaves alone), each
 * link used once: the root weight, else NULL. */
static Value *
chain_root(Value *v)
{
	for (int depth = 0; v && depth < 4; depth++) {
		if (v->kind == V_WEIGHT)
			return v;
		if (v->kind != V_RESULT || v->nuse != 1 ||
		    !((v->def->op == OP_RESHAPE && v->def->nin == 1) || v->def->op == OP_TRANSPOSE))
			return NULL;
		v = v->def->in[0];
	}
	return NULL;
}

/* With prepared (--debug=fp8-glu, an FP8 x FP8 B): chain_root, else v itself
 * when it is computed from weights alone and used once (canon's interleave
 * of a gate and an up weight: prepared at load, or a weight fold made). */
static Value *
root_of(Value *v, int prepared)
{
	Value *r = v ? chain_root(v) : NULL;

	if (!r && prepared && v && v->kind == V_RESULT && v->nuse == 1 && ir_weight_only(v))
		return v;
	return r;
}

/* DeepSeek's blocks: e4m3 with f32 scales per 128 along the last axis (K). */
static int
fp8_blocks(const Node *dq)
{
	int r = dq->in[0]->type.rank, axis = (int)ir_attr_int(dq, "axis", 1);

	return dq->in[0]->type.dt == DT_F8E4M3 && dq->in[1]->type.dt == DT_F32 && dq->nin == 2 &&
	       (axis == r - 1 || axis == -1) && ir_attr_int(dq, "block_size", 0) == 128 &&
	       dq->in[1]->type.rank == r;
}

/* May dq's operands be prepared values (root_of)? */
static int
may_prepare(const Node *dq, const PassCtx *c)
{
	return FP8_GLU_ON(c->debug) && c->fp8_mma && fp8_blocks(dq);
}

/*
 * Why dq (feeding matmul mm of a kernel as B) cannot move in; NULL if it can.
 * The blocks must run along K of B [N,K] / [E,N,K] (block_size with a scale
 * of B's rank), or be per output channel (1-D scale along N of a 2-D B).
 */
static const char *
refusal(const Graph *g, const Value *b, const Node *dq, const Node *mm, int prep, char *buf, size_t n)
{
	const Type *q = &dq->in[0]->type, *s = &dq->in[1]->type;
	int grouped = mm->op == OP_GROUPED_MATMUL, r = q->rank;
	int axis = (int)ir_attr_int(dq, "axis", 1);
	int64_t bs = ir_attr_int(dq, "block_size", 0);

	if (axis < 0)
		axis += r;
	for (int i = 0; i < dq->nin; i++)
		if (dq->in[i] && !root_of(dq->in[i], prep))
			return "its operands are not weights (nor reshapes and transposes of weights used once)";
	if (b->nuse != 1 || ir_is_graph_result(g, b))
		return "the dequantised weight has other users";
	for (int i = 0; i < dq->nin; i++)
		if (dq->in[i] && root_of(dq->in[i], prep)->nuse != 1)
			return "a weight it reads has other users";
	if (!dtype_is_quantised(q->dt)) {
		snprintf(buf, n, "the weight is %s, not a quantised type", dtype_name(q->dt));
		return buf;
	}
	if (!ir_attr_int(mm, "trans_b", grouped))
		return "B is [K,N] (packed weights are [N,K])";
	if (b->type.dt != mm->in[0]->type.dt || (b->type.dt != DT_BF16 && b->type.dt != DT_F16)) {
		snprintf(buf, n, "it dequantises to %s for an A of %s (the mma reads both in bf16 or f16)",
			 dtype_name(b->type.dt), dtype_name(mm->in[0]->type.dt));
		return buf;
	}
	if (bs > 0 && bs < PASS_DEQUANT_MIN_BLOCK && axis == r - 1) {
		snprintf(buf, n, "its blocks along K are of %lld (fewer than %d: its scales are as large as "
			 "the packed weight)", (long long)bs, PASS_DEQUANT_MIN_BLOCK);
		return buf;
	}
	if (bs > 0 && axis == r - 1 && s->rank == r)
		return NULL;
	if (bs == 0 && r == 2 && axis == 0 && s->rank == 1)
		return NULL;
	return "its scales are not blocks along K nor per output channel";
}

/* A copy of node d (one result, typed as v) in kernel k before `before`, reading x. */
static Value *
copy_node(Graph *k, Node *before, const Node *d, Value *const *x, int nin, const Value *v)
{
	Node *n = ir_new_node(k, d->op, x, nin, 1);

	ir_copy_attrs(k->m, n, d);
	n->out[0]->type = v->type;
	ir_set_name(k, n->out[0], v->name);
	ir_insert(k, before, n);
	return n->out[0];
}

/* v's chain down to root (root_of) copied into k, reading param p for the root. */
static Value *
copy_chain(Graph *k, Node *before, Value *v, const Value *root, Value *p)
{
	Value *x;

	if (v == root)
		return p;
	x = copy_chain(k, before, v->def->in[0], root, p);
	return copy_node(k, before, v->def, &x, 1, v);
}

/* Erase v's chain down to root from g (after its last user went). */
static void
erase_chain(Graph *g, Value *v, const Value *root)
{
	while (v != root && v->kind == V_RESULT) {
		Node *d = v->def;
		v = d->in[0];
		ir_erase(g, d);
	}
}

/* Replace operand i of call by the root weights of dq's operands (values:
 * the operands themselves), and dq (with the chains) into the kernel before
 * its first node. */
static void
move_in(Graph *g, Node *call, int i, Node *dq, int values, int prep)
{
	Graph *k = call->callee;
	Module *m = g->m;
	Node *first = k->first;
	Value *old = k->param[i], *ops[3] = {NULL, NULL, NULL}, *roots[3], **in, *nv;
	int nq = dq->nin > 2 && dq->in[2] ? 3 : 2, nin = call->nin - 1 + nq, at = 0;

	for (int j = 0; j < nq; j++) {
		roots[j] = values ? dq->in[j] : root_of(dq->in[j], prep);
		ops[j] = ir_add_param(k, roots[j]->name, roots[j]->type);
		if (!values)
			ops[j] = copy_chain(k, first, dq->in[j], roots[j], ops[j]);
	}
	nv = copy_node(k, first, dq, ops, dq->nin, old);
	ir_replace_uses(k, old, nv);
	memmove(&k->param[i], &k->param[i + 1], sizeof *k->param * (size_t)(k->nparam - i - 1));
	k->nparam--;

	in = arena_array(m->arena, Value *, nin);
	for (int j = 0; j < call->nin; j++)
		if (j != i)
			in[at++] = call->in[j];
	for (int j = 0; j < nq; j++)
		in[at++] = roots[j];
	call->in = in;
	call->nin = nin;
}

static void
describe(char *buf, size_t n, const Node *dq, int prep)
{
	const Type *q = &dq->in[0]->type;
	int64_t bs = ir_attr_int(dq, "block_size", 0), numel = ir_type_numel(q);
	int zero = dq->nin > 2 && dq->in[2];
	char lay[64];

	if (bs)
		snprintf(lay, sizeof lay, "in blocks of %lld along K", (long long)bs);
	else
		snprintf(lay, sizeof lay, "per output channel");
	const Value *r0 = root_of(dq->in[0], prep), *r1 = root_of(dq->in[1], prep);

	snprintf(buf, n, "B = dequantize(%s%s %s, %s%s %s%s%s) %s; the packed weights are read in the "
		 "mainloop (%.3g MB instead of %.3g MB of %s)",
		 r0->kind == V_WEIGHT ? "$" : "%", r0->name, dtype_name(q->dt), r1->kind == V_WEIGHT ? "$" : "%",
		 r1->name, dtype_name(dq->in[1]->type.dt), zero ? ", zero $" : "", zero ? chain_root(dq->in[2])->name : "", lay,
		 numel > 0 ? 1e-6 * (double)dtype_bytes(q->dt, (size_t)numel) : 0,
		 numel > 0 ? 1e-6 * (double)dtype_bytes(dq->out[0]->type.dt, (size_t)numel) : 0,
		 dtype_name(dq->out[0]->type.dt));
}

/* The kernel parameter A reads (through the token gather) and nothing else
 * does, or -1.  (Uses counted here: ir_fill_uses(k) would recount the
 * module's weights for the kernel alone.) */
static int
a_param(const Graph *k, const Node *mm)
{
	const Value *a = mm->in[0];
	int uses = 0;

	if (a->kind == V_RESULT && a->def->op == OP_GATHER && ir_attr_int(a->def, "axis", 0) == 0)
		a = a->def->in[0];
	for (const Node *n = k->first; n; n = n->next)
		for (int j = 0; j < n->nin; j++)
			uses += n->in[j] == a;
	for (int i = 0; i < k->nparam && uses == 1; i++)
		if (k->param[i] == a)
			return i;
	return -1;
}

/* After B moved in: A's dequantize too, for FP8 x FP8 (see the top). */
static void
fp8_activation(Graph *g, Node *call, PassCtx *c)
{
	Graph *k = call->callee;
	const Node *mm = kernel_matmul(k), *bq = mm->in[1]->kind == V_RESULT ? mm->in[1]->def : NULL;
	int i;

	if (!bq || bq->op != OP_DEQUANTIZE || !fp8_blocks(bq) || (i = a_param(k, mm)) < 0)
		return;
	Value *a = call->in[i];
	Node *dq = a->kind == V_RESULT && a->def->op == OP_DEQUANTIZE ? a->def : NULL;
	if (!dq || !fp8_blocks(dq) || dq->in[0]->kind == V_WEIGHT || a->type.dt != bq->out[0]->type.dt)
		return;
	if (!c->fp8_mma) {
		char sz[48];
		report_skip(c->report, "dequantize %%%s not fused into the A operand of @%s: a target "
			    "without FP8 x FP8 wgmma (sm_90a); the GEMM reads it in %s; cost: the dequantize "
			    "a kernel of its own, %%%s (%s) written and read back, and the GEMM on %s "
			    "tensor cores, not FP8", a->name, k->name, dtype_name(a->type.dt), a->name,
			    report_size(sz, sizeof sz, &a->type), dtype_name(a->type.dt));
		return;
	}
	move_in(g, call, i, dq, 1, 0);
	report_fused(c->report, k->name, "A = dequantize(%%%s f8e4m3, %%%s f32) per 128 columns: "
		     "FP8 x FP8, the e4m3 activations and their scales read in the mainloop",
		     dq->in[0]->name, dq->in[1]->name);
	if (a->nuse == 0 && !ir_is_graph_result(g, a))
		ir_erase(g, dq);
	ir_fill_uses(g);
}

int
fuse_dequant(Module *m, PassCtx *c)
{
	Graph *g = ir_main_graph(m);
	int changed = 0;
	char why[256], what[512];

	if (!g)
		return 0;
	ir_fill_uses(g);
	for (Node *call = g->first; call; call = call->next) {
		const char *tmpl;
		const Node *mm;
		int i;
		if (call->op != OP_CALL)
			continue;
		tmpl = ir_graph_str(call->callee, "template", "");
		if (strcmp(tmpl, "gemm") && strcmp(tmpl, "grouped_gemm"))
			continue;
		if (!(mm = kernel_matmul(call->callee)) || mm->in[1]->kind != V_PARAM)
			continue;
		for (i = 0; i < call->callee->nparam && call->callee->param[i] != mm->in[1]; i++)
			;
		Value *b = call->in[i];
		if (b->kind != V_RESULT || b->def->op != OP_DEQUANTIZE)
			continue;
		Node *dq = b->def;
		int prep = may_prepare(dq, c);
		const char *r = refusal(g, b, dq, mm, prep, why, sizeof why);
		if (r) {
			int64_t numel = ir_type_numel(&b->type);
			report_skip(c->report, "dequantize %%%s not fused into the B operand of @%s: %s; cost: it runs "
				    "as weight preparation and the GEMM reads %.3g MB of %s instead of %.3g MB packed",
				    b->name, call->callee->name, r,
				    numel > 0 ? 1e-6 * (double)dtype_bytes(b->type.dt, (size_t)numel) : 0,
				    dtype_name(b->type.dt),
				    numel > 0 ? 1e-6 * (double)dtype_bytes(dq->in[0]->type.dt, (size_t)numel) : 0);
			continue;
		}
		describe(what, sizeof what, dq, prep);
		move_in(g, call, i, dq, 0, prep);
		Value *chains[3] = {dq->in[0], dq->in[1], dq->nin > 2 ? dq->in[2] : NULL}, *roots[3];
		for (int j = 0; j < 3; j++)
			roots[j] = chains[j] ? root_of(chains[j], prep) : NULL;
		ir_erase(g, dq);
		for (int j = 0; j < 3; j++)
			if (chains[j])
				erase_chain(g, chains[j], roots[j]);
		report_fused(c->report, call->callee->name, "%s: %s", tmpl, what);
		ir_fill_uses(g);
		changed = 1;
		fp8_activation(g, call, c);
	}
	return changed;
}
