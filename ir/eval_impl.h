/*
 * eval_impl.h — private to the interpreter (ir/eval*.c): the evaluation
 * context, the type of an op's evaluation function, and the small helpers
 * the op files share (allocation under the size limit, broadcasting
 * strides, exact element copies, rounding, the activations).
 *
 * An EvalFn sees its operands as host tensors (NULL for an absent `_`) and
 * fills its results, which the driver has already allocated with the shapes
 * shape inference gives, unless the op is marked as computing its own.
 */
#ifndef MOEC_EVAL_IMPL_H
#define MOEC_EVAL_IMPL_H

#include "ir.h"

typedef struct Ev Ev;
struct Ev {
	Graph *g;
	Module *m;
	const EvalOpts *o;	/* never NULL */
	Diag *d;
	DimEnv env;		/* atoms bound for this graph (callees get their own) */
	int depth;		/* call nesting */
};

typedef int EvalFn(Ev *e, const Node *n, const Tensor *const *in, Tensor *out);

/* eval_util.c */

/* Report bad input at the node: returns -1. */
int ev_err(Ev *e, const Node *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Allocate a zeroed result under the per-tensor limit (diagnostic if not). */
int ev_alloc(Ev *e, const Node *n, Tensor *t, DType dt, int rank, const int64_t *dim);
void ev_strides(const Tensor *t, int64_t *str);	/* row-major, in elements */
Tensor *ev_shape_of(const Value *v, Tensor *t);	/* v's dtype and static shape, no data */
/* Strides of t read through a broadcast shape of rank r (0 on stretched dims). */
void ev_bstrides(const Tensor *t, int r, int64_t *str);
int64_t ev_off(const int64_t *coord, const int64_t *str, int r);
int ev_next(int64_t *coord, const int64_t *dim, int r);	/* 0 after the last */
/* Copy n elements of type dt exactly (packed i4/u4 included). */
void ev_copy(DType dt, void *dst, int64_t di, const void *src, int64_t si, int64_t n);
double ev_round(DType dt, double v);	/* v as stored in dt and read back */
/* quantize_dynamic to=f8e4m3 of one group of n values (clipped to [-ub, ub]
 * first when ub > 0), then dequantize to dt, in place (eval_quant.c; the moe
 * op's act_quant, act_quant_ub) */
void ev_quant_dequant(double *v, int64_t n, double ub, DType dt);
double *ev_doubles(const Tensor *t);	/* every element, exactly; malloc'd */
int ev_isint(DType t);			/* integer or bool: computed as int64 */
/* Indices of v[0..n) in order: largest first (NaN counts as largest) or
 * smallest first; equal values keep the lower index first. */
void ev_order(const double *v, int64_t n, int largest, int64_t *idx);

/* eval_ew.c: the activations, shared with swiglu and moe */
double ev_sigmoid(double x);
double ev_gelu(double x, int tanh_approx);
/* swiglu's and moe's act attributes (ir_glu_attrs), a diagnostic if bad */
int ev_glu_parse(Ev *e, const Node *n, const char *laykey, IrGluAttrs *p);

/* The evaluation functions, one per op family. */
EvalFn ev_unary, ev_cast, ev_identity, ev_binary, ev_where, ev_swiglu;
EvalFn ev_matmul, ev_grouped_matmul, ev_reduce, ev_argmax, ev_softmax, ev_cumsum;
EvalFn ev_rms_norm, ev_layer_norm, ev_rstd, ev_topk;
EvalFn ev_gather, ev_gather_elements, ev_gather_nd, ev_scatter_elements;
EvalFn ev_scatter_nd, ev_scatter_rows, ev_onehot, ev_nonzero;
EvalFn ev_transpose, ev_reshape, ev_expand, ev_concat, ev_split, ev_slice;
EvalFn ev_tile, ev_shape, ev_size, ev_range, ev_constant_of_shape, ev_const;
EvalFn ev_quantize, ev_dequantize, ev_quantize_dynamic;
/* Elements [first, first+n) of a deferred dequantize's result (ir_eval_defers),
 * from its weight operands; 0 ok, -1 with a diagnostic. */
int ev_dequant_elems(Ev *e, const Node *dq, int64_t first, int64_t n, double *out);
EvalFn ev_moe, ev_route, ev_permute;
EvalFn ev_ep_pack, ev_all_to_all;

#endif
