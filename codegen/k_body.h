/*
 * k_body.h — private to the generic body compiler (k_body*.c): the state of
 * one body under construction, the walker that computes any value of the
 * body at a flat index, and the op families' emit functions.
 *
 * A value is computed output-driven: emit[op](b, n, res, idx) returns
 * result `res` of node n at flat (row-major, i64) index idx, asking for its
 * operands at the indices its semantics map idx to.  Values are f32 for
 * float dtypes and i64 for integers and bool (cg_dt_value_type); the
 * walker rounds every node's result to its dtype, where the interpreter
 * stores it.  A memo keyed by (value, index) shares work inside one scope
 * (a loop body or a branch), so a DAG is not re-emitted per use.
 */
#ifndef MOEC_K_BODY_H
#define MOEC_K_BODY_H

#define CG_INTERNAL
#include "codegen.h"

typedef struct Bd Bd;
typedef LLVMValueRef EmitFn(Bd *b, const Node *n, int res, LLVMValueRef idx);
/* Static checks of one node (attributes, shapes the lowering needs); 0 or -1 with a diagnostic. */
typedef int CheckFn(Bd *b, const Node *n);

typedef struct {
	const Value *v;
	LLVMValueRef idx, val;
} BdMemo;

/* A reduction's rows: the dims of its input merged into groups, each kept or reduced. */
typedef struct {
	int ng;
	LLVMValueRef size[MAXRANK];	/* i64, input order */
	int red[MAXRANK];
	LLVMValueRef rows, len;		/* i64 products of the kept and the reduced groups */
} BdRows;

enum { BD_EW, BD_ROW, BD_SCATTER };
enum { BD_MAXNEST = 4 };

struct Bd {
	CgFn *f;
	Module *m;
	Diag *d;
	CgBodySpec spec;
	const char *name;
	/* the region: parameters, nodes in order, results */
	const Value **param;
	int nparam;
	const Node **node;
	int nnode;
	const Value **res;
	const char **resname;
	int nres;
	/* the kernel */
	LLVMValueRef *pin, *pout, T, T64;
	int mode;
	const Node *anchor;		/* BD_ROW: the reduction that owns the CTA */
	LLVMValueRef row;		/* BD_ROW: this CTA's row (i64) */
	int stat_off, nstat;		/* BD_ROW: the anchor's statistics in shared memory */
	int scratch_off, smem;		/* block-reduction scratch; bytes of shared memory */
	/* BD_ROW: reductions whose rows nest in the anchor's (bd_find_nested) */
	const Node *nest[BD_MAXNEST];
	int nest_off[BD_MAXNEST];	/* their statistics in shared memory, by sub-row */
	int64_t nest_per[BD_MAXNEST];	/* their rows per anchor row */
	int nnest, nest_ready;		/* nest[0..nest_ready) computed: read from there */
	int err;
	/* the walker */
	BdMemo *memo;
	int nmemo, capmemo;
};

/* k_body.c: the walker and helpers */
LLVMValueRef bd_value(Bd *b, const Value *v, LLVMValueRef idx);
LLVMValueRef bd_in(Bd *b, const Node *n, int k, LLVMValueRef idx);	/* operand k */
int bd_scope(Bd *b);			/* memo mark: entries after it die with the scope */
void bd_unscope(Bd *b, int mark);
int bd_fail(Bd *b, const Node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* v's dims as i64 values (static, or coef*T); returns the rank. */
int bd_dims(Bd *b, const Value *v, LLVMValueRef *dim);
LLVMValueRef bd_numel(Bd *b, const Value *v);
LLVMValueRef bd_dim(Bd *b, Dim d);
LLVMValueRef bd_i64(Bd *b, int64_t v);
/* coordinates of flat idx over dims (i64), and back */
void bd_unravel(Bd *b, LLVMValueRef idx, int rank, LLVMValueRef const *dim, LLVMValueRef *c);
LLVMValueRef bd_ravel(Bd *b, int rank, LLVMValueRef const *dim, LLVMValueRef const *c);
/* Index into operand v of the element at out-coordinates c of shape out (numpy broadcast). */
LLVMValueRef bd_bcast(Bd *b, const Value *v, const Value *out, LLVMValueRef idx);
int bd_same_shape(const Value *a, const Value *b);
/* loops over i64 [begin, end) with their own memo scope */
typedef struct {
	CgLoop l;
	int mark;
} BdLoop;
LLVMValueRef bd_loop(Bd *b, BdLoop *l, LLVMValueRef begin, LLVMValueRef end, LLVMValueRef step);
void bd_endloop(Bd *b, BdLoop *l);
/* Scalar constant c as a value of dt. */
LLVMValueRef bd_const(Bd *b, DType dt, double c);
LLVMValueRef bd_fcmp(Bd *b, LLVMRealPredicate p, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef bd_icmp(Bd *b, LLVMIntPredicate p, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef bd_isnan(Bd *b, LLVMValueRef x);
/* float math */
LLVMValueRef bd_log(Bd *b, LLVMValueRef x);	/* ~1 ulp, no special instructions */
LLVMValueRef bd_sqrt(Bd *b, LLVMValueRef x);
LLVMValueRef bd_fabs(Bd *b, LLVMValueRef x);
/* Block-wide reduction (BD_ROW): nc components per thread combined by comb
 * in a fixed tree; every thread gets the result. */
typedef void BdComb(Bd *b, void *ctx, LLVMValueRef *acc, LLVMValueRef *other);
void bd_block_reduce(Bd *b, int nc, LLVMValueRef *v, BdComb *comb, void *ctx);

/* k_body_ew.c: elementwise ops */
EmitFn bd_unary, bd_identity, bd_binary, bd_where, bd_swiglu, bd_const_op;
EmitFn bd_shape_op, bd_size, bd_constant_of_shape, bd_quantize, bd_dequantize;
CheckFn bd_check_unary, bd_check_binary, bd_check_swiglu, bd_check_const, bd_check_quant;

/* k_body_index.c: views, shapes and indexing */
EmitFn bd_transpose, bd_expand, bd_concat, bd_split, bd_slice, bd_tile;
EmitFn bd_gather, bd_gather_elements, bd_gather_nd, bd_onehot, bd_nonzero;
CheckFn bd_check_slice, bd_check_gather_nd, bd_check_concat;
int bd_is_scatter(Op op);
/* BD_SCATTER: the whole kernel (one thread per element of an update row); its grid. */
int bd_emit_scatter(Bd *b, const Node *n, LLVMValueRef out, CgExpr *grid);
int bd_check_scatter(Bd *b, const Node *n);

/* k_body_reduce.c: reductions, norms, softmax, argmax, topk */
EmitFn bd_reduce, bd_softmax, bd_rms_norm, bd_layer_norm, bd_topk;
EmitFn bd_quantize_dynamic;
CheckFn bd_check_reduce, bd_check_topk;
int bd_is_reduction(Op op);
/* Elements reduced per row (static), or -1 when it depends on T. */
int64_t bd_row_len(Bd *b, const Node *n);
LLVMValueRef bd_row_count(Bd *b, const Node *n);
int bd_row_count_expr(Bd *b, const Node *n, CgExpr *e);
/* numel of v as coef*T + static; -1 when two symbolic dims multiply. */
int bd_numel_expr(Bd *b, const Value *v, CgExpr *e);
/* BD_ROW: the anchor's statistics for b->row into shared memory (all threads). */
void bd_anchor_stats(Bd *b);
/* BD_ROW: every result's elements that belong to b->row: fn(b, r, idx) per
 * element (the results shaped like the anchor's input in one loop). */
typedef void BdElemFn(Bd *b, int r, LLVMValueRef idx);
void bd_row_elements(Bd *b, BdElemFn *fn);
int bd_stat_words(Bd *b, const Node *n);	/* 8-byte slots of the anchor's statistics */
/* BD_ROW: the reductions nested in the anchor's rows (b->nest), their shared
 * memory from b->smem on (which grows); then, after bd_anchor_stats, their
 * statistics for the CTA's row into it (all threads). */
void bd_find_nested(Bd *b);
void bd_nested_stats(Bd *b);

/* k_body_linalg.c: dot products */
EmitFn bd_matmul, bd_grouped_matmul, bd_cumsum;

#endif
