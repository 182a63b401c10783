/*
 * k_combine.c — the MoE combine (the sum over a token's k slots) with
 * 16-byte accesses: a thread per 4 outputs, its k float4 loads issued
 * before any is added.
 *
 *	before (Qwen3-30B-A3B, T = 4096)            after (the default; --debug=old-rows: before)
 *	  k7 = row kernel: a thread an element,       k7 = combine<<<cdiv(T*H/4, 256), 256>>>
 *	  k 4-byte loads of the f32 slots, the         thread g: row g / (H/4), columns 4(g % (H/4))..+3:
 *	  sum, cast, + x (2-byte loads)                k loads of 16 bytes, the sum, cast, + x (8 bytes)
 *
 * With 2-byte slots (lower-moe's --debug=slots-x: bf16/f16 slots cast to
 * f32 in the kernel) a thread takes 8 outputs, still 16 bytes a slot load.
 *
 * The same bits as the row kernel: each output is 0 + s_0 + s_1 + ... +
 * s_{k-1} in f32 in slot order (the walker's inline reduce_sum), then the
 * cast's rounding, then the residual added in f32 and rounded to the
 * result's type (the walker's add), as k_body_ew.c computes each.
 */
#define CG_INTERNAL
#include <string.h>

#include "codegen.h"

#define THREADS 256
#define MAXV 8	/* the most outputs a thread: 8 of 2-byte slots */

/* outputs a thread: 16 bytes of each slot */
int
cg_combine_vw(const CgCombineSpec *s)
{
	return s->slot_dt == DT_F32 ? 4 : MAXV;
}
#define vw cg_combine_vw

static int
io_float(DType t)
{
	return t == DT_F32 || t == DT_BF16 || t == DT_F16;
}

int
cg_combine_check(const CgCombineSpec *s, Diag *d)
{
	if (!io_float(s->slot_dt))
		return diag_error(d, LOC_NONE, "combine: slots of %s (need f32, bf16 or f16)",
				  dtype_name(s->slot_dt));
	if (s->H < vw(s) || s->H % vw(s) || s->H > (1 << 24))
		return diag_error(d, LOC_NONE, "combine: row length %lld (needs a multiple of %d)",
				  (long long)s->H, vw(s));
	if (s->k < 1 || s->k > 32)
		return diag_error(d, LOC_NONE, "combine: %d slots a token (needs 1..32)", s->k);
	if (!io_float(s->sum_dt) || !io_float(s->y_dt) || (s->residual && !io_float(s->x_dt)))
		return diag_error(d, LOC_NONE, "combine: types %s, %s (need f32, bf16 or f16)",
				  dtype_name(s->sum_dt), dtype_name(s->y_dt));
	if (s->rows.a < 0 || s->rows.b < 0 || s->rows.div != 0 || s->rows.a > INT32_MAX ||
	    s->rows.b > INT32_MAX || (s->rows.a + s->rows.b) * (s->H / vw(s)) > INT32_MAX)
		return diag_error(d, LOC_NONE, "combine: rows %lld*T+%lld", (long long)s->rows.a,
				  (long long)s->rows.b);
	return 0;
}

/* V elements of dt at base[at..] (aligned to V elements), as f32. */
static void
load_v(CgFn *f, int V, DType dt, LLVMValueRef base, LLVMValueRef at, LLVMValueRef *out)
{
	int es = dtype_bits(dt) / 8;
	LLVMValueRef v = cg_gload(f, LLVMVectorType(cg_raw_type(f, dt), V), cg_gep(f, base, at, es), es * V);

	for (int j = 0; j < V; j++)
		out[j] = cg_to_f32(f, LLVMBuildExtractElement(f->B, v, cg_i32(f, j), ""), dt);
}

static void
store_v(CgFn *f, int V, DType dt, LLVMValueRef base, LLVMValueRef at, LLVMValueRef *v)
{
	int es = dtype_bits(dt) / 8;
	LLVMValueRef vec = LLVMGetUndef(LLVMVectorType(cg_raw_type(f, dt), V));

	for (int j = 0; j < V; j++)
		vec = LLVMBuildInsertElement(f->B, vec, dt == DT_F32 ? v[j] : cg_f32_to_bits(f, v[j], dt),
					     cg_i32(f, j), "");
	cg_gstore(f, vec, cg_gep(f, base, at, es), es * V);
}

void
cg_combine_group(CgFn *f, const CgCombineSpec *s, LLVMValueRef slots, LLVMValueRef w, LLVMValueRef x,
		 LLVMValueRef y, LLVMValueRef g)
{
	int V = vw(s);
	int64_t Q = s->H / V;	/* thread groups a row */
	LLVMValueRef wj[32], row, col, acc[MAXV], xv[MAXV], sv[32][MAXV];

	row = cg_sext64(f, cg_udiv(f, g, cg_i32(f, (int)Q)));
	col = cg_sext64(f, cg_muli(f, cg_urem(f, g, cg_i32(f, (int)Q)), V));
	for (int j = 0; j < s->k; j++)		/* every slot's 16 bytes in flight */
		load_v(f, V, s->slot_dt, slots, cg_add(f, cg_muli(f, cg_addi(f, cg_muli(f, row, s->k), j), s->H), col),
		       sv[j]);
	for (int j = 0; s->weighted && j < s->k; j++)	/* the row's k weights (one sector) */
		wj[j] = cg_gload(f, f->tf32, cg_gep(f, w, cg_addi(f, cg_muli(f, row, s->k), j), 4), 4);
	for (int j = 0; s->weighted && j < s->k; j++)	/* the walker's mul, then its sum */
		for (int e = 0; e < V; e++)
			sv[j][e] = LLVMBuildFMul(f->B, sv[j][e], wj[j], "");
	if (s->residual)
		load_v(f, V, s->x_dt, x, cg_add(f, cg_muli(f, row, s->H), col), xv);
	for (int e = 0; e < V; e++) {
		acc[e] = LLVMBuildFAdd(f->B, sv[0][e], cg_f32(f, 0), "");	/* the walker's 0 + s_0 */
		for (int j = 1; j < s->k; j++)
			acc[e] = LLVMBuildFAdd(f->B, acc[e], sv[j][e], "");
		acc[e] = cg_round_dt(f, acc[e], s->sum_dt);
		if (s->residual)
			acc[e] = cg_round_dt(f, LLVMBuildFAdd(f->B, xv[e], acc[e], ""), s->y_dt);
	}
	store_v(f, V, s->y_dt, y, cg_add(f, cg_muli(f, row, s->H), col), acc);
}

int
cg_emit_combine(CgModule *m, const char *name, const CgCombineSpec *s, Diag *d)
{
	CgParam par[5];
	int np = 0, block[3] = {THREADS, 1, 1}, V = vw(s);
	int64_t Q = s->H / V;	/* thread groups a row */
	CgExpr grid[3] = {{s->rows.a * Q, s->rows.b * Q, THREADS}, CG_EXPR_INT(1), CG_EXPR_INT(1)};
	LLVMValueRef slots, w = NULL, x = NULL, y, T, g, rows;
	char note[128];
	CgFn *f;
	CgIf c;

	if (cg_combine_check(s, d) < 0)
		return -1;
	par[np++] = (CgParam){CGP_PTR, "slots"};
	if (s->weighted)
		par[np++] = (CgParam){CGP_PTR, "w"};
	if (s->residual)
		par[np++] = (CgParam){CGP_PTR, "x"};
	par[np++] = (CgParam){CGP_PTR, "y"};
	par[np++] = (CgParam){CGP_I32, "T"};
	if (!(f = cg_fn_begin(m, name, par, np, THREADS, 0, d)))
		return -1;
	for (int i = 0; i < np - 1; i++)
		cg_arg_noalias(f, i);
	np = 0;
	slots = cg_arg(f, np++);
	if (s->weighted)
		w = cg_arg(f, np++);
	if (s->residual)
		x = cg_arg(f, np++);
	y = cg_arg(f, np++);
	T = cg_arg(f, np++);
	rows = cg_addi(f, cg_muli(f, cg_max(f, T, cg_i32(f, 0)), s->rows.a), s->rows.b);
	g = cg_add(f, cg_mul(f, cg_ctaid(f, 0), cg_i32(f, THREADS)), cg_tid(f, 0));
	cg_if(f, &c, cg_lt(f, g, cg_mul(f, rows, cg_i32(f, (int)Q))));
	cg_combine_group(f, s, slots, w, x, y, g);
	cg_endif(f, &c);
	snprintf(note, sizeof note, "combine k=%d H=%lld %s%s, %s slots%s, %d-byte loads", s->k,
		 (long long)s->H, dtype_name(s->y_dt), s->residual ? " + residual" : "", dtype_name(s->slot_dt),
		 s->weighted ? " times their weights" : "",
		 dtype_bits(s->slot_dt) / 8 * V);
	return cg_fn_end(f, block, grid, 0, note);
}

/* --- which row kernels it replaces ------------------------------------------- */

static int
is_param(const Graph *k, const Value *v, int i)
{
	return cg_param_index(k, v) == i;
}

/*
 * reduce_sum over axis 1 of f32 [R,k,H] (parameter 0, or a reshape of
 * parameter 0 [k*R,H]; either perhaps of bf16/f16 cast to f32: lower-moe's
 * slots in x's type; perhaps times parameter 1 f32 [R,k,1]: slots_out's
 * routing weights), [-> one cast], [-> add of the next parameter of [R,H]],
 * the kernel's one result.
 */
int
cg_combine_match(const Module *m, const Node *call, CgCombineSpec *s)
{
	const Graph *k = call->op == OP_CALL ? call->callee : NULL;
	const Value *v = NULL, *p0 = NULL;
	int64_t axes[2];
	int stage = 0;	/* 0: the slots, 1: the sum, 2: cast, 3: add */

	memset(s, 0, sizeof *s);
	s->slot_dt = DT_F32;
	if (!k || ir_kernel_template(k) != IR_TMPL_ROW_REDUCE || k->nret != 1 || call->nin < 1 ||
	    call->nin > 3 || call->nout != 1)
		return 0;
	for (const Node *n = k->first; n; n = n->next) {
		if (n->op == OP_CONST)
			continue;
		if (stage == 0 && n->op == OP_RESHAPE && !p0 && is_param(k, n->in[0], 0)) {
			p0 = n->out[0];
			continue;
		}
		if (stage == 0 && n->op == OP_CAST && s->slot_dt == DT_F32 && n->out[0]->type.dt == DT_F32 &&
		    (n->in[0]->type.dt == DT_BF16 || n->in[0]->type.dt == DT_F16) &&
		    (p0 ? n->in[0] == p0 : is_param(k, n->in[0], 0))) {	/* 2-byte slots, summed in f32 */
			s->slot_dt = n->in[0]->type.dt;
			p0 = n->out[0];
			continue;
		}
		if (stage == 0 && n->op == OP_MUL && !s->weighted && n->nin == 2 && n->in[0] == p0 && p0 &&
		    is_param(k, n->in[1], 1) && n->in[1]->type.dt == DT_F32 && n->in[1]->type.rank == 3 &&
		    n->in[1]->type.dim[0] == p0->type.dim[0] && n->in[1]->type.dim[1] == p0->type.dim[1] &&
		    ir_dim_is_static(n->in[1]->type.dim[2]) && n->in[1]->type.dim[2] == 1 &&
		    n->out[0]->type.dt == DT_F32) {	/* slots_out: each slot times its weight */
			s->weighted = 1;
			p0 = n->out[0];
			continue;
		}
		if (stage == 0 && n->op == OP_REDUCE_SUM) {
			const Type *t = &n->in[0]->type;
			if ((p0 ? n->in[0] != p0 : !is_param(k, n->in[0], 0)) || t->rank != 3 || t->dt != DT_F32 ||
			    !ir_dim_is_static(t->dim[1]) || !ir_dim_is_static(t->dim[2]) ||
			    ir_attr_ints(n, "axes", axes, 2) != 1 || (axes[0] != 1 && axes[0] != -2) ||
			    ir_attr_int(n, "keepdims", 1) != 0 || n->out[0]->type.dt != DT_F32)
				return 0;
			s->k = (int)t->dim[1];
			s->H = t->dim[2];
			s->sum_dt = s->y_dt = DT_F32;
			Dim r = t->dim[0];
			if (ir_dim_is_static(r)) {
				s->rows = MEXPR_INT(r);
			} else {
				const DimExpr *e = ir_dim_expr(m, r);
				if (!e || e->coef < 1 || e->coef > INT32_MAX)
					return 0;
				s->rows = MEXPR_T(e->coef);
			}
			v = n->out[0];
			stage = 1;
			continue;
		}
		if (stage == 1 && n->op == OP_CAST && n->in[0] == v && io_float(n->out[0]->type.dt)) {
			v = n->out[0];
			s->sum_dt = s->y_dt = v->type.dt;
			stage = 2;
			continue;
		}
		if ((stage == 1 || stage == 2) && n->op == OP_ADD && call->nin == 2 + s->weighted && n->nin == 2 &&
		    (n->in[0] == v || n->in[1] == v)) {
			const Value *o = n->in[0] == v ? n->in[1] : n->in[0];
			if (!is_param(k, o, 1 + s->weighted) || o->type.rank != 2 || o->type.dim[1] != s->H ||
			    o->type.dim[0] != v->type.dim[0] ||
			    !io_float(o->type.dt) || !io_float(n->out[0]->type.dt))
				return 0;
			s->residual = 1;
			s->x_dt = o->type.dt;
			v = n->out[0];
			s->y_dt = v->type.dt;
			stage = 3;
			continue;
		}
		return 0;
	}
	return stage >= 1 && k->ret[0] == v && call->nin == 1 + s->weighted + s->residual && s->H % vw(s) == 0 &&
	       s->k <= 32;
}
