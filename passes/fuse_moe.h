/*
 * fuse_moe.h — what the files of the fuse-moe pass share: the facts one
 * recognised MoE block is made of, and the small matching helpers.
 *
 * fuse_moe.c anchors on each router TopK and rewrites; fuse_moe_router.c
 * classifies the chains around the TopK; fuse_moe_experts.c reads the
 * routed experts (unrolled TorchScript slots or dynamo's batched form)
 * backwards from the value where their sum is complete, and
 * fuse_moe_masked.c the loop over boolean masks users write; fuse_moe_match.c
 * holds the helpers; fuse_moe_confirm.c runs the interpreter on the
 * candidate before the rewrite is accepted.  A matcher returns NULL on success or the reason it
 * failed, a constant string the report quotes.
 */
#ifndef MOEC_FUSE_MOE_H
#define MOEC_FUSE_MOE_H

#include "passes.h"

typedef struct {
	Node *topk;		/* the final selection: a TopK, or sparsemixer's concat of argmaxes */
	Value *ids;		/* its indices [T,k] */
	const char *anchor;	/* "TopK" or "sparsemixer", for the report */
	Node *aux[2];		/* the group selection's TopKs, or NULL */
	Value *logits, *selbias;	/* moe operands 1 and 2 (selbias may be NULL) */
	const char *kind;	/* softmax, sigmoid, topk_softmax, sparsemixer */
	int64_t k, ngroup, topk_group;
	int renorm, top2;	/* top2: group score is the sum of the best two */
	double scale, jitter_eps;
	int zero_fill;		/* dropped groups select with 0 (transformers 4.57's DeepSeek-V3) */
} Router;

/* One expert computation, as read from a slot or the batched form. */
typedef struct {
	Value *x;		/* tokens entering the experts, [T,H] */
	Value *wgu, *wdn;	/* stacked weights [E,..] as the graph holds them,
				 * or (flat) one expert's own [N,K] weights */
	int flat;		/* transformers 4.x ModuleList: one Linear per expert */
	Value *bgu, *bdn;	/* stacked biases [E,2I], [E,H], or NULL */
	int gu_t, dn_t;		/* held transposed: [E,H,2I], [E,I,H] */
	Value *sel;		/* what picks the expert: e (slot) or ids [T*k,1] */
	const char *act, *layout;	/* silu|gelu|oai|relu(|relu2 ungated), concat|interleave */
	int ungated;		/* no gate half: a = act(h) (Nemotron-H's relu²) */
	int scale_input;	/* the routing weight scales the input rows (Llama 4) */
	const char *approx;	/* gelu: none|tanh */
	double alpha, limit;	/* oai */
	Value *rw;		/* routing weights [T,k] the contribution is scaled by */
	int64_t kmul;		/* slot: k in tok*k + pos; batched: the repeat */
	Value *tok, *pos;	/* slot: token and choice of each row (pos NULL:
				 * the weight is read from dense [T,E] scores) */
	Value *wsel, *wids;	/* dense: the score column read, the ids scattered */
} Expert;

typedef struct {
	Router r;
	Expert x;
	Value *sum;		/* the routed sum the moe replaces */
	Value *ids;		/* topk indices the experts were selected by */
	int nslot;		/* unrolled slots; 0: batched */
	Value **gu_e, **dn_e;	/* slots: each expert's weights (flat: stacked by rewrite) */
	int64_t e;		/* experts, from the stacked weights */
	int routed;		/* r read with the experts (the dense form's scattered scores) */
	int masked;		/* nslot experts of a loop over boolean masks (fuse_moe_masked.c) */
} Moe;

/* fuse_moe_match.c */
Node *mo_def(const Value *v, Op op);	/* v's defining node if it is op */
Value *mo_peel(Value *v);	/* through reshapes and no-op casts */
Value *mo_peel_rows(Value *v);	/* through reshapes that keep the rows */
int64_t mo_width(const Type *t);	/* product of the dims after the first */
int mo_same_rows(const Module *m, const Type *a, const Type *b);
Value *mo_peel_cast(Value *v);	/* through float-to-float casts */
Value *mo_peel_index(Value *v);	/* through reshapes, expands and any casts */
int mo_const_f(const Value *v, double *out);	/* a scalar constant */
int mo_const_ints(const Value *v, int64_t *out, int max);	/* -1: not const */
int mo_is_fill(Value *v, double want);	/* every element is want */
int mo_axis(const Node *n, const char *key, int rank, int def);
int mo_last_axis(const Node *n, const char *key, int rank, int def);
double mo_nice_float(double v);	/* the shortest decimal naming v's f32 */
Value *mo_uncut(Value *u);	/* a scatter's updates through their cut to the index count */

/* fuse_moe_router.c */
const char *mo_router(Node *topk, Value *weights, Router *r);
int mo_is_sparsemixer(Node *concat, Router *r);	/* the anchor, its logits and k */
const char *mo_router_sparsemixer(Node *concat, Value *weights, Router *r);

/* fuse_moe_experts.c */
const char *mo_experts(Value *sum, Moe *mo);
const char *mo_mlp(Value *o, Expert *x, Value **rows);	/* down(act(gate_up(rows))) */
int mo_scaled(Value *v, Value **o, Value **w);	/* v = o * w, w [n,1] a weight a row: 1 */
Value *mo_tokens(Value *v, Dim t, Dim h);	/* the [T,H] tokens a view v was made from */
int mo_same_expert(const Expert *a, const Expert *b);

/* fuse_moe_masked.c */
int mo_is_masked(Value *sum);	/* a scatter by the nonzero rows of a mask */
const char *mo_masked(Value *sum, Moe *mo);

/* fuse_moe_confirm.c: NULL when the interpreter agrees that cand computes
 * mo->sum on probes reaching every expert; else which check failed. */
const char *mo_confirm(Graph *g, const Moe *mo, Value *cand, char *why, size_t n);

#endif
