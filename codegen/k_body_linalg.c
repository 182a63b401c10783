/*
 * k_body_linalg.c — matmul and grouped_matmul in kernel bodies: one dot
 * product per output element, accumulated in f32 in k order (the
 * interpreter's eval_linalg.c accumulates in double).  For weight
 * preparation on small weights and for leftovers that are not GEMM
 * kernels (a batched B, say); the GEMM builder is the fast path.
 */
#include <string.h>

#include "k_body.h"

static LLVMValueRef
f32_of(Bd *b, LLVMValueRef v)
{
	return LLVMTypeOf(v) == b->f->ti64 ? LLVMBuildSIToFP(b->f->B, v, b->f->tf32, "") : v;
}

typedef struct {
	LLVMValueRef rows, cols, srow, scol, sbatch[MAXRANK];
} Mat;

/* numpy matmul operand as a batch of matrices (eval_linalg.c's as_mat) */
static void
as_mat(Bd *b, const Value *t, int trans, int is_b, int nb, Mat *m)
{
	LLVMValueRef d[MAXRANK], s[MAXRANK], st = bd_i64(b, 1);
	int r = t->type.rank;

	bd_dims(b, t, d);
	for (int i = r - 1; i >= 0; i--) {
		s[i] = st;
		st = cg_mul(b->f, st, d[i]);
	}
	memset(m, 0, sizeof *m);
	if (r == 1) {
		m->rows = is_b ? d[0] : bd_i64(b, 1);
		m->cols = is_b ? bd_i64(b, 1) : d[0];
		m->srow = bd_i64(b, is_b ? 1 : 0);
		m->scol = bd_i64(b, is_b ? 0 : 1);
		for (int i = 0; i < nb; i++)
			m->sbatch[i] = bd_i64(b, 0);
		return;
	}
	m->rows = d[r - (trans ? 1 : 2)];
	m->cols = d[r - (trans ? 2 : 1)];
	m->srow = s[r - (trans ? 1 : 2)];
	m->scol = s[r - (trans ? 2 : 1)];
	for (int i = 0; i < nb; i++) {
		int j = i - (nb - (r - 2));
		m->sbatch[i] = j < 0 || t->type.dim[j] == 1 ? bd_i64(b, 0) : s[j];
	}
}

LLVMValueRef
bd_matmul(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	CgFn *f = b->f;
	LLVMBuilderRef B = f->B;
	const Value *a = n->in[0], *w = n->in[1], *y = n->out[0];
	int ta = (int)ir_attr_int(n, "trans_a", 0), tb = (int)ir_attr_int(n, "trans_b", 0);
	int nb = y->type.rank - (a->type.rank > 1) - (w->type.rank > 1);
	LLVMValueRef yd[MAXRANK], c[MAXRANK], oa, ob, acc, k;
	Mat ma, mb;
	BdLoop l;

	as_mat(b, a, ta, 0, nb, &ma);
	as_mat(b, w, tb, 1, nb, &mb);
	bd_dims(b, y, yd);
	bd_unravel(b, idx, y->type.rank, yd, c);
	oa = cg_mul(f, a->type.rank > 1 ? c[nb] : bd_i64(b, 0), ma.srow);
	ob = cg_mul(f, w->type.rank > 1 ? c[y->type.rank - 1] : bd_i64(b, 0), mb.scol);
	for (int i = 0; i < nb; i++) {
		oa = cg_add(f, oa, cg_mul(f, c[i], ma.sbatch[i]));
		ob = cg_add(f, ob, cg_mul(f, c[i], mb.sbatch[i]));
	}
	acc = cg_var(f, f->tf32, cg_f32(f, 0));
	k = bd_loop(b, &l, bd_i64(b, 0), ma.cols, bd_i64(b, 1));
	{
		LLVMValueRef x = f32_of(b, bd_in(b, n, 0, cg_add(f, oa, cg_mul(f, k, ma.scol))));
		LLVMValueRef z = f32_of(b, bd_in(b, n, 1, cg_add(f, ob, cg_mul(f, k, mb.srow))));
		cg_set(f, acc, LLVMBuildFAdd(B, cg_get(f, acc), LLVMBuildFMul(B, x, z, ""), ""));
	}
	bd_endloop(b, &l);
	if (n->nin > 2 && n->in[2])
		return LLVMBuildFAdd(B, cg_get(f, acc), f32_of(b, bd_in(b, n, 2, bd_bcast(b, n->in[2], y, idx))), "");
	return cg_get(f, acc);
}

/* cumsum: each element sums its prefix along the axis (its suffix with
 * reverse; without itself with exclusive), serially in order as the
 * interpreter does; integers in i64, floats in f32. */
LLVMValueRef
bd_cumsum(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	CgFn *f = b->f;
	LLVMBuilderRef B = f->B;
	const Value *x = n->in[0];
	int r = x->type.rank, ax = ir_axis(ir_attr_int(n, "axis", 0), r), isint = !dtype_is_float(x->type.dt);
	int ex = ir_attr_int(n, "exclusive", 0) != 0, rev = ir_attr_int(n, "reverse", 0) != 0;
	LLVMValueRef xd[MAXRANK], inner = bd_i64(b, 1), i, base, acc, k, v;
	BdLoop l;

	(void)res;
	bd_dims(b, x, xd);
	for (int d = ax + 1; d < r; d++)
		inner = cg_mul(f, inner, xd[d]);
	i = cg_urem(f, cg_udiv(f, idx, inner), xd[ax]);
	base = cg_sub(f, idx, cg_mul(f, i, inner));
	acc = isint ? cg_var(f, f->ti64, bd_i64(b, 0)) : cg_var(f, f->tf32, cg_f32(f, 0));
	k = bd_loop(b, &l, rev ? cg_add(f, i, bd_i64(b, ex)) : bd_i64(b, 0),
		    rev ? xd[ax] : cg_add(f, i, bd_i64(b, !ex)), bd_i64(b, 1));
	v = bd_in(b, n, 0, cg_add(f, base, cg_mul(f, k, inner)));
	if (isint)
		cg_set(f, acc, LLVMBuildAdd(B, cg_get(f, acc), LLVMTypeOf(v) == f->ti64 ? v :
					    LLVMBuildFPToSI(B, v, f->ti64, ""), ""));
	else
		cg_set(f, acc, LLVMBuildFAdd(B, cg_get(f, acc), f32_of(b, v), ""));
	bd_endloop(b, &l);
	return cg_get(f, acc);
}

/* grouped_matmul: row r belongs to the expert whose offsets range holds it (else 0). */
LLVMValueRef
bd_grouped_matmul(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	CgFn *f = b->f;
	LLVMBuilderRef B = f->B;
	const Value *a = n->in[0], *w = n->in[1];
	int tb = (int)ir_attr_int(n, "trans_b", 1);
	LLVMValueRef E = bd_dim(b, w->type.dim[0]), K = bd_dim(b, a->type.dim[1]);
	LLVMValueRef N = bd_dim(b, n->out[0]->type.dim[1]);
	LLVMValueRef r = cg_udiv(f, idx, N), j = cg_urem(f, idx, N), x, k, in, acc, wb;
	LLVMValueRef cnt = cg_var(f, f->ti64, bd_i64(b, 0));
	BdLoop l;
	CgIf c;

	x = bd_loop(b, &l, bd_i64(b, 0), E, bd_i64(b, 1));
	{
		LLVMValueRef hi = bd_in(b, n, 2, cg_addi(f, x, 1));
		cg_set(f, cnt, cg_add(f, cg_get(f, cnt), LLVMBuildZExt(B, bd_icmp(b, LLVMIntSLE, hi, r), f->ti64, "")));
	}
	bd_endloop(b, &l);
	x = cg_min(f, cg_get(f, cnt), cg_sub(f, E, bd_i64(b, 1)));
	in = LLVMBuildAnd(B, bd_icmp(b, LLVMIntSLT, cg_get(f, cnt), E),
			  bd_icmp(b, LLVMIntSGE, r, bd_in(b, n, 2, bd_i64(b, 0))), "");
	acc = cg_var(f, f->tf32, cg_f32(f, 0));
	{
		int mark = bd_scope(b);
		cg_if(f, &c, in);
		wb = cg_mul(f, x, cg_mul(f, N, K));
		k = bd_loop(b, &l, bd_i64(b, 0), K, bd_i64(b, 1));
		{
			LLVMValueRef av = f32_of(b, bd_in(b, n, 0, cg_add(f, cg_mul(f, r, K), k)));
			LLVMValueRef wi = tb ? cg_add(f, cg_mul(f, j, K), k) : cg_add(f, cg_mul(f, k, N), j);
			LLVMValueRef wv = f32_of(b, bd_in(b, n, 1, cg_add(f, wb, wi)));
			cg_set(f, acc, LLVMBuildFAdd(B, cg_get(f, acc), LLVMBuildFMul(B, av, wv, ""), ""));
		}
		bd_endloop(b, &l);
		if (n->nin > 3 && n->in[3])
			cg_set(f, acc, LLVMBuildFAdd(B, cg_get(f, acc),
						     f32_of(b, bd_in(b, n, 3, cg_add(f, cg_mul(f, x, N), j))), ""));
		cg_endif(f, &c);
		bd_unscope(b, mark);
	}
	return cg_get(f, acc);
}
