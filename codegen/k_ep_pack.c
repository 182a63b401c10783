/*
 * k_ep_pack.c — expert parallelism's dispatch packing (the `ep_pack` op,
 * ir/eval_ep.c): each token row once per rank that holds one of its
 * experts, in token order, padded to T rows per rank.  Deterministic
 * (integer counting, no atomics), nothing read on the host, any T.
 *
 *	grid (cdiv(T, TB), N): CTA (g, d) places tokens g*TB .. g*TB+TB-1 for rank d
 *	1. count the tokens before g*TB that go to d (and all of them: d's total)
 *	2. flag its own tokens, and each one's row j = before + the flags ahead
 *	3. ws/is (and back) for its tokens; rows copied, the CTA's threads
 *	   along H; rows g*TB .. of d's chunk at or past the total are padding:
 *	   zero rows, weights 0, ids -1
 *
 * Step 1 reads only the ids (T*k integers per CTA), so every CTA knows
 * where its rows go without a second kernel or a workspace.
 */
#define CG_INTERNAL
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

#define TB 256

typedef struct {
	CgFn *f;
	const CgEpPackSpec *s;
	LLVMValueRef x, w, ids, xs, ws, is, back, T, tid, g, d, owner, local;
} Ep;

static int
check(const CgEpPackSpec *s, Diag *d)
{
	if (s->N < 1 || s->N > 65535 || s->E < 1 || s->k < 1 || s->k > 64 || s->H < 1)
		return diag_error(d, LOC_NONE, "ep_pack: %d ranks, %d experts, k = %d, H = %lld: "
				  "out of range", s->N, s->E, s->k, (long long)s->H);
	if (s->ids_dt != DT_I32 && s->ids_dt != DT_I64)
		return diag_error(d, LOC_NONE, "ep_pack: ids of type %s (need i32 or i64)",
				  dtype_name(s->ids_dt));
	if (s->w_dt != DT_F32 || dtype_bits(s->x_dt) < 8 || dtype_bits(s->x_dt) > 64)
		return diag_error(d, LOC_NONE, "ep_pack: weights %s and rows %s (need f32 weights "
				  "and rows of whole bytes)", dtype_name(s->w_dt), dtype_name(s->x_dt));
	for (int e = 0; e < s->E; e++)
		if (s->owner[e] < 0 || s->owner[e] >= s->N || s->local[e] < 0)
			return diag_error(d, LOC_NONE, "ep_pack: expert %d has no rank", e);
	return 0;
}

int
cg_ep_pack_spec(const Node *n, CgEpPackSpec *s, Diag *d)
{
	const Type *x = &n->in[0]->type, *ids = &n->in[2]->type;

	memset(s, 0, sizeof *s);
	if (n->op != OP_EP_PACK || x->rank != 2 || !ir_dim_is_static(x->dim[1]) ||
	    !ir_dim_is_static(ids->dim[1]))
		return diag_error(d, n->loc, "ep_pack: wants x[T,H] and ids[T,k], H and k static");
	s->N = (int)ir_attr_int(n, "ranks", 1);
	s->E = (int)ir_attr_ints(n, "owner", NULL, 0);
	s->k = (int)ids->dim[1];
	s->H = x->dim[1];
	s->x_dt = x->dt;
	s->w_dt = n->in[1]->type.dt;
	s->ids_dt = ids->dt;
	s->sum = ir_ep_sum(n) == 1;
	if (s->E > CG_EP_MAX_EXPERTS)
		return diag_error(d, n->loc, "ep_pack: %d experts (the kernel takes at most %d)", s->E,
				  CG_EP_MAX_EXPERTS);
	ir_attr_ints(n, "owner", s->owner, s->E);
	ir_attr_ints(n, "local", s->local, s->E);
	if (check(s, d) < 0) {
		d->nerror--;	/* reported again, with the node */
		return diag_error(d, n->loc, "%s", d->last);
	}
	return 0;
}

/* An i32 table of the experts (owner or local), in constant memory. */
static LLVMValueRef
table(CgFn *f, const int64_t *v, int n)
{
	LLVMTypeRef at = LLVMArrayType(f->ti32, (unsigned)n);
	LLVMValueRef *c = xcalloc((size_t)n, sizeof *c), g;

	for (int i = 0; i < n; i++)
		c[i] = cg_i32(f, v[i]);
	g = LLVMAddGlobalInAddressSpace(f->M, at, "moec_ep", f->emu ? 0 : 4);
	LLVMSetInitializer(g, LLVMConstArray(f->ti32, c, (unsigned)n));
	LLVMSetGlobalConstant(g, 1);
	LLVMSetLinkage(g, LLVMPrivateLinkage);
	LLVMSetAlignment(g, 4);
	free(c);
	return g;
}

static LLVMValueRef
lookup(Ep *p, LLVMValueRef tab, LLVMValueRef e)
{
	CgFn *f = p->f;
	LLVMValueRef at[2] = {cg_i64(f, 0), e};

	return LLVMBuildLoad2(f->B, f->ti32, LLVMBuildGEP2(f->B, LLVMArrayType(f->ti32, (unsigned)p->s->E),
							   tab, at, 2, ""), "");
}

/* Expert of slot i of token t (i64), clamped to 0..E-1 (the interpreter
 * reports ids out of range). */
static LLVMValueRef
expert(Ep *p, LLVMValueRef t, int i)
{
	CgFn *f = p->f;
	LLVMValueRef s = cg_addi(f, cg_muli(f, cg_sext64(f, t), p->s->k), i);
	LLVMValueRef x = cg_load_dt(f, p->s->ids_dt, p->ids, s);

	return cg_max(f, cg_min(f, x, cg_i64(f, p->s->E - 1)), cg_i64(f, 0));
}

/* 1 (i32) if token t has an expert on rank d. */
static LLVMValueRef
sent(Ep *p, LLVMValueRef t)
{
	CgFn *f = p->f;
	LLVMValueRef any = cg_i32(f, 0);

	for (int i = 0; i < p->s->k; i++) {
		LLVMValueRef o = lookup(p, p->owner, expert(p, t, i));
		any = LLVMBuildOr(f->B, any, LLVMBuildZExt(f->B, LLVMBuildICmp(f->B, LLVMIntEQ, o, p->d, ""),
							   f->ti32, ""), "");
	}
	return any;
}

static LLVMValueRef
smem_i32(CgFn *f, int region, LLVMValueRef i)
{
	return cg_sptr(f, cg_addi(f, cg_muli(f, i, 4), region * TB * 4));
}

/* Steps 1 and 2: *before and *total (i32, the CTA's), and each thread's j
 * (-1: its token does not go to d) in shared region 3. */
static void
place(Ep *p, LLVMValueRef *before, LLVMValueRef *total)
{
	CgFn *f = p->f;
	LLVMValueRef t0 = cg_muli(f, p->g, TB), cb = cg_var(f, f->ti32, cg_i32(f, 0));
	LLVMValueRef ct = cg_var(f, f->ti32, cg_i32(f, 0)), t, flag, j;
	CgLoop l;
	CgIf c;

	t = cg_loop(f, &l, p->tid, p->T, cg_i32(f, TB));
	{
		LLVMValueRef s = sent(p, t);
		cg_set(f, ct, cg_add(f, cg_get(f, ct), s));
		cg_set(f, cb, cg_add(f, cg_get(f, cb), cg_select(f, cg_lt(f, t, t0), s, cg_i32(f, 0))));
	}
	cg_endloop(f, &l);
	cg_sstore(f, cg_get(f, cb), smem_i32(f, 0, p->tid), 4);
	cg_sstore(f, cg_get(f, ct), smem_i32(f, 1, p->tid), 4);
	t = cg_add(f, t0, p->tid);
	flag = cg_var(f, f->ti32, cg_i32(f, 0));
	cg_if(f, &c, cg_lt(f, t, p->T));
	cg_set(f, flag, sent(p, t));
	cg_endif(f, &c);
	cg_sstore(f, cg_get(f, flag), smem_i32(f, 2, p->tid), 4);
	cg_barrier(f);
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, p->tid, cg_i32(f, 0), ""));
	{	/* thread 0 sums the counts: 256 adds */
		LLVMValueRef sb = cg_var(f, f->ti32, cg_i32(f, 0)), st = cg_var(f, f->ti32, cg_i32(f, 0));
		LLVMValueRef u = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, TB), cg_i32(f, 1));
		cg_set(f, sb, cg_add(f, cg_get(f, sb), cg_sload(f, f->ti32, smem_i32(f, 0, u), 4)));
		cg_set(f, st, cg_add(f, cg_get(f, st), cg_sload(f, f->ti32, smem_i32(f, 1, u), 4)));
		cg_endloop(f, &l);
		cg_sstore(f, cg_get(f, sb), smem_i32(f, 4, cg_i32(f, 0)), 4);
		cg_sstore(f, cg_get(f, st), smem_i32(f, 4, cg_i32(f, 1)), 4);
	}
	cg_endif(f, &c);
	cg_barrier(f);
	*before = cg_sload(f, f->ti32, smem_i32(f, 4, cg_i32(f, 0)), 4);
	*total = cg_sload(f, f->ti32, smem_i32(f, 4, cg_i32(f, 1)), 4);
	j = cg_var(f, f->ti32, *before);
	LLVMValueRef u = cg_loop(f, &l, cg_i32(f, 0), p->tid, cg_i32(f, 1));
	cg_set(f, j, cg_add(f, cg_get(f, j), cg_sload(f, f->ti32, smem_i32(f, 2, u), 4)));
	cg_endloop(f, &l);
	cg_sstore(f, cg_select(f, LLVMBuildICmp(f->B, LLVMIntNE, cg_get(f, flag), cg_i32(f, 0), ""),
			       cg_get(f, j), cg_i32(f, -1)), smem_i32(f, 3, p->tid), 4);
	cg_barrier(f);
}

/* Row r of rank d's chunk ((d*T + r), i64). */
static LLVMValueRef
chunk_row(Ep *p, LLVMValueRef r)
{
	CgFn *f = p->f;

	return cg_add(f, cg_mul(f, cg_sext64(f, p->d), cg_sext64(f, p->T)), cg_sext64(f, r));
}

/* ws, is (and back) of the CTA's token t going to row j of d's chunk. */
static void
slots(Ep *p, LLVMValueRef t, LLVMValueRef j)
{
	CgFn *f = p->f;
	int k = p->s->k;
	LLVMValueRef row = chunk_row(p, j);

	for (int i = 0; i < k; i++) {
		LLVMValueRef e = expert(p, t, i), own = LLVMBuildICmp(f->B, LLVMIntEQ, lookup(p, p->owner, e),
									p->d, "");
		LLVMValueRef at = cg_addi(f, cg_muli(f, row, k), i);
		LLVMValueRef tw = cg_addi(f, cg_muli(f, cg_sext64(f, t), k), i);
		LLVMValueRef wv = cg_gload(f, f->tf32, cg_gep(f, p->w, tw, 4), 4);
		cg_gstore(f, cg_select(f, own, wv, cg_f32(f, 0)), cg_gep(f, p->ws, at, 4), 4);
		cg_gstore(f, cg_select(f, own, lookup(p, p->local, e), cg_i32(f, -1)), cg_gep(f, p->is, at, 4), 4);
		if (!p->s->sum) {
			CgIf c;
			cg_if(f, &c, own);
			cg_gstore(f, LLVMBuildTrunc(f->B, at, f->ti32, ""), cg_gep(f, p->back, tw, 4), 4);
			cg_endif(f, &c);
		}
	}
}

/* Row copies: the CTA's rows that go to d, then its padding rows. */
static void
rows(Ep *p, LLVMValueRef total)
{
	CgFn *f = p->f;
	int eb = (int)dtype_bytes(p->s->x_dt, 1);
	LLVMTypeRef et = LLVMIntTypeInContext(f->C, (unsigned)(8 * eb));
	LLVMValueRef t0 = cg_muli(f, p->g, TB), H = cg_i64(f, p->s->H), u, h;
	CgLoop lu, lh;
	CgIf c;

	u = cg_loop(f, &lu, cg_i32(f, 0), cg_i32(f, TB), cg_i32(f, 1));
	{
		LLVMValueRef t = cg_add(f, t0, u), j = cg_sload(f, f->ti32, smem_i32(f, 3, u), 4);
		LLVMValueRef to = cg_mul(f, chunk_row(p, j), H), from = cg_mul(f, cg_sext64(f, t), H);
		cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntSGE, j, cg_i32(f, 0), ""));
		h = cg_loop(f, &lh, p->tid, cg_i32(f, (int)p->s->H), cg_i32(f, TB));
		{
			LLVMValueRef h64 = cg_sext64(f, h);
			LLVMValueRef v = cg_gload(f, et, cg_gep(f, p->x, cg_add(f, from, h64), eb), eb);
			cg_gstore(f, v, cg_gep(f, p->xs, cg_add(f, to, h64), eb), eb);
		}
		cg_endloop(f, &lh);
		cg_endif(f, &c);
		/* row t0+u of d's chunk is padding when past the total */
		LLVMValueRef pad = LLVMBuildAnd(f->B, cg_lt(f, t, p->T),
						LLVMBuildICmp(f->B, LLVMIntSGE, t, total, ""), "");
		LLVMValueRef prow = chunk_row(p, t);
		cg_if(f, &c, pad);
		h = cg_loop(f, &lh, p->tid, cg_i32(f, (int)p->s->H), cg_i32(f, TB));
		cg_gstore(f, LLVMConstInt(et, 0, 0), cg_gep(f, p->xs, cg_add(f, cg_mul(f, prow, H),
									       cg_sext64(f, h)), eb), eb);
		cg_endloop(f, &lh);
		h = cg_loop(f, &lh, p->tid, cg_i32(f, p->s->k), cg_i32(f, TB));
		{
			LLVMValueRef at = cg_add(f, cg_muli(f, prow, p->s->k), cg_sext64(f, h));
			cg_gstore(f, cg_f32(f, 0), cg_gep(f, p->ws, at, 4), 4);
			cg_gstore(f, cg_i32(f, -1), cg_gep(f, p->is, at, 4), 4);
		}
		cg_endloop(f, &lh);
		cg_endif(f, &c);
	}
	cg_endloop(f, &lu);
}

int
cg_emit_ep_pack(CgModule *m, const char *name, const CgEpPackSpec *s, Diag *d)
{
	static const char *const role[] = {"x", "weights", "ids", "xs", "ws", "is", "back"};
	CgParam par[8];
	int block[3] = {TB, 1, 1};
	CgExpr grid[3] = {{1, 0, TB}, CG_EXPR_INT(s->N), CG_EXPR_INT(1)};
	LLVMValueRef before, total;
	char note[128];
	CgIf c;
	Ep p;

	if (check(s, d) < 0)
		return -1;
	for (int i = 0; i < 7; i++)
		par[i] = (CgParam){CGP_PTR, role[i]};
	par[7] = (CgParam){CGP_I32, "T"};
	memset(&p, 0, sizeof p);
	p.s = s;
	p.f = cg_fn_begin(m, name, par, 8, TB, 0, d);
	if (!p.f)
		return -1;
	CgFn *f = p.f;
	for (int i = 0; i < 7; i++)
		cg_arg_noalias(f, i);
	p.x = cg_arg(f, 0), p.w = cg_arg(f, 1), p.ids = cg_arg(f, 2);
	p.xs = cg_arg(f, 3), p.ws = cg_arg(f, 4), p.is = cg_arg(f, 5), p.back = cg_arg(f, 6);
	p.T = cg_max(f, cg_arg(f, 7), cg_i32(f, 0));
	p.tid = cg_tid(f, 0);
	p.g = cg_ctaid(f, 0);
	p.d = cg_ctaid(f, 1);
	p.owner = table(f, s->owner, s->E);
	p.local = table(f, s->local, s->E);

	place(&p, &before, &total);
	LLVMValueRef t = cg_add(f, cg_muli(f, p.g, TB), p.tid);
	LLVMValueRef j = cg_sload(f, f->ti32, smem_i32(f, 3, p.tid), 4);
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntSGE, j, cg_i32(f, 0), ""));
	slots(&p, t, j);
	cg_endif(f, &c);
	if (s->sum) {	/* back[t*N + d]: the row, or the chunk's last (padding) row */
		cg_if(f, &c, cg_lt(f, t, p.T));
		LLVMValueRef r = cg_select(f, LLVMBuildICmp(f->B, LLVMIntSGE, j, cg_i32(f, 0), ""), j,
					   cg_addi(f, p.T, -1));
		LLVMValueRef at = cg_add(f, cg_muli(f, cg_sext64(f, t), s->N), cg_sext64(f, p.d));
		cg_gstore(f, LLVMBuildTrunc(f->B, chunk_row(&p, r), f->ti32, ""), cg_gep(f, p.back, at, 4), 4);
		cg_endif(f, &c);
	}
	rows(&p, total);
	(void)before;
	snprintf(note, sizeof note, "ep_pack N=%d E=%d k=%d H=%lld %s%s", s->N, s->E, s->k,
		 (long long)s->H, dtype_name(s->x_dt), s->sum ? " combine=sum" : "");
	return cg_fn_end(f, block, grid, 4 * TB * 4 + 16, note);
}
