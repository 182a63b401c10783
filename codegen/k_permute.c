/*
 * k_permute.c — the token slots of a MoE layer sorted by expert, in one CTA
 * of 1024 threads, deterministic: integer counting only, no atomics.
 *
 *	P owner threads each own a contiguous segment of the N = T*k slots
 *	1. cnt[x][p] = slots of expert x in owner p's segment      (shared)
 *	2. exclusive scan of cnt in (x, p) order: the first sorted position
 *	   of each (expert, owner); offsets[x] = the scan at (x, 0)
 *	3. each owner walks its segment again: rows[cnt[x][p]++] = s, pos[s]
 *	(a walk loads 8 ids before it takes any: one latency per 8 slots)
 *
 * Positions in (expert, owner, order within the segment) order are the
 * positions in (expert, slot) order because segments are contiguous: the
 * stable counting sort of ir/eval_moe.c's ev_permute.  A negative id (a
 * slot dropped: expert parallelism's "not on this rank") counts in an
 * extra bucket E, so dropped slots sort last and offsets[E] counts the
 * kept ones, as ev_permute does.  P = min(1024, 24576 / (E+1)) keeps the
 * counters within 96 KiB of shared memory (sm_86's limit is 99 KiB); a
 * segment is cdiv(N, P) slots, so any T works.
 * Nothing is read on the host and nothing allocated: CUDA-graph safe.
 */
#define CG_INTERNAL
#include <string.h>

#include "codegen.h"

#define THREADS 1024
#define CNT_WORDS 24576		/* 96 KiB of counters */

typedef struct Pm Pm;
struct Pm {
	CgFn *f;
	CgPermuteSpec s;
	int P, F, wsum, smem, threads, cnt0;
	LLVMValueRef ids, offs, rows, pos, T, tid, lane, warp, N, S, seg0, seg1;
};

void
cg_permute_default(CgPermuteSpec *s)
{
	memset(s, 0, sizeof *s);
	s->E = 8;
	s->k = 2;
	s->ids_dt = DT_I32;
	s->want_pos = 1;
	s->m_per_t = 1;
}

static int
check(const CgPermuteSpec *s, Diag *d)
{
	if (s->E < 1 || s->E > THREADS)
		return diag_error(d, LOC_NONE, "permute: %d experts (the kernel takes 1..%d)", s->E,
				  THREADS);
	if (s->k < 1 || s->k > 64)
		return diag_error(d, LOC_NONE, "permute: k = %d (needs 1..64)", s->k);
	if (s->ids_dt != DT_I32 && s->ids_dt != DT_I64)
		return diag_error(d, LOC_NONE, "permute: ids of type %s (need i32 or i64)",
				  dtype_name(s->ids_dt));
	return 0;
}

int
cg_permute_spec(const Node *n, CgPermuteSpec *s, Diag *d)
{
	const Type *t = &n->in[0]->type;

	cg_permute_default(s);
	if (n->op != OP_PERMUTE || t->rank != 2 || !ir_dim_is_static(t->dim[1]))
		return diag_error(d, n->loc, "permute: wants a permute node with ids [T,k], k static");
	s->E = (int)ir_attr_int(n, "experts", -1);
	s->k = (int)t->dim[1];
	s->ids_dt = t->dt;
	s->want_pos = 1;
	if (check(s, d) < 0) {
		d->nerror--;	/* reported again, with the node */
		return diag_error(d, n->loc, "%s", d->last);
	}
	return 0;
}

static LLVMValueRef
cnt_addr(Pm *p, LLVMValueRef f)
{
	return cg_sptr(p->f, cg_addi(p->f, cg_muli(p->f, f, 4), p->cnt0));
}

/* Slot s's id, as loaded (ids_dt, i64). */
static LLVMValueRef
load_id(Pm *p, LLVMValueRef s)
{
	return cg_load_dt(p->f, p->s.ids_dt, p->ids, cg_sext64(p->f, s));
}

/* Bucket of id x (its expert clamped to at most E-1; E if negative:
 * dropped), and the counter of owner tid. */
static LLVMValueRef
counter(Pm *p, LLVMValueRef x)
{
	CgFn *f = p->f;

	x = cg_select(f, cg_lt(f, x, cg_i64(f, 0)), cg_i64(f, p->s.E),
		      cg_min(f, x, cg_i64(f, p->s.E - 1)));
	x = LLVMBuildTrunc(f->B, x, f->ti32, "");
	return cnt_addr(p, cg_add(f, cg_muli(f, x, p->P), p->tid));
}

static void
zero_counters(Pm *p)
{
	CgFn *f = p->f;
	CgLoop l;
	LLVMValueRef i = cg_loop(f, &l, p->tid, cg_i32(f, p->F), cg_i32(f, p->threads));

	cg_sstore(f, cg_i32(f, 0), cnt_addr(p, i), 4);
	cg_endloop(f, &l);
	cg_barrier(f);
}

/* Slot s of id x: count it, or place it (rows, pos). */
static void
take(Pm *p, LLVMValueRef s, LLVMValueRef x, int place)
{
	CgFn *f = p->f;
	LLVMValueRef at = counter(p, x), c = cg_sload(f, f->ti32, at, 4);

	cg_sstore(f, cg_addi(f, c, 1), at, 4);
	if (place) {
		cg_gstore(f, s, cg_gep(f, p->rows, cg_sext64(f, c), 4), 4);
		if (p->s.want_pos)
			cg_gstore(f, c, cg_gep(f, p->pos, cg_sext64(f, s), 4), 4);
	}
}

/*
 * Owner p's segment, in order: count, or place.  The ids are loaded BATCH at
 * a time before any is taken (a run of BATCH consecutive ids, one sector),
 * so an owner waits for one load's latency per batch, not per slot: a
 * segment is N / P slots, 345 for DeepSeek-V3 at T = 4096 (E = 256: P = 95
 * owners, N = 32768), walked twice, and the kernel was 93 us on the H200
 * (2026-12-02), about one L2 round trip per slot.  The rest one by one.
 */
enum { BATCH = 8 };

static void
walk(Pm *p, int place)
{
	CgFn *f = p->f;
	LLVMValueRef n = cg_sub(f, p->seg1, p->seg0), x[BATCH], b, s;
	LLVMValueRef full = cg_add(f, p->seg0, cg_muli(f, cg_udiv(f, n, cg_i32(f, BATCH)), BATCH));
	CgLoop l;

	b = cg_loop(f, &l, p->seg0, full, cg_i32(f, BATCH));
	for (int j = 0; j < BATCH; j++)
		x[j] = load_id(p, cg_addi(f, b, j));
	for (int j = 0; j < BATCH; j++)
		take(p, cg_addi(f, b, j), x[j], place);
	cg_endloop(f, &l);
	s = cg_loop(f, &l, full, p->seg1, cg_i32(f, 1));
	take(p, s, load_id(p, s), place);
	cg_endloop(f, &l);
}

/* Inclusive scan of v over the CTA (a warp scan, then one over the warps' sums). */
static LLVMValueRef
block_scan(Pm *p, LLVMValueRef v)
{
	CgFn *f = p->f;
	LLVMBuilderRef B = f->B;
	LLVMValueRef w, before;
	CgIf c;

	for (int d = 1; d < 32; d *= 2) {
		LLVMValueRef o = cg_shfl_up(f, v, d);
		v = cg_add(f, v, cg_select(f, cg_lt(f, p->lane, cg_i32(f, d)), cg_i32(f, 0), o));
	}
	cg_if(f, &c, LLVMBuildICmp(B, LLVMIntEQ, p->lane, cg_i32(f, 31), ""));
	cg_sstore(f, v, cg_sptr(f, cg_addi(f, cg_muli(f, p->warp, 4), p->wsum)), 4);
	cg_endif(f, &c);
	cg_barrier(f);
	cg_if(f, &c, LLVMBuildICmp(B, LLVMIntEQ, p->warp, cg_i32(f, 0), ""));
	{
		LLVMValueRef at = cg_sptr(f, cg_addi(f, cg_muli(f, p->lane, 4), p->wsum));
		w = cg_sload(f, f->ti32, at, 4);
		for (int d = 1; d < 32; d *= 2) {
			LLVMValueRef o = cg_shfl_up(f, w, d);
			w = cg_add(f, w, cg_select(f, cg_lt(f, p->lane, cg_i32(f, d)), cg_i32(f, 0), o));
		}
		cg_sstore(f, w, at, 4);
	}
	cg_endif(f, &c);
	cg_barrier(f);
	before = cg_sload(f, f->ti32, cg_sptr(f, cg_addi(f, cg_muli(f, cg_max(f, cg_addi(f, p->warp, -1),
									   cg_i32(f, 0)), 4), p->wsum)), 4);
	before = cg_select(f, LLVMBuildICmp(B, LLVMIntEQ, p->warp, cg_i32(f, 0), ""), cg_i32(f, 0), before);
	return cg_add(f, v, before);
}

/*
 * The exclusive scan of the counters in (bucket, owner) order: thread t
 * takes C consecutive counters, sums them, and the block scan gives its
 * start; offsets[x] is the value at (x, 0), for x = 0..E (E: the dropped
 * bucket's start, the count of kept slots).
 */
static void
scan_counters(Pm *p)
{
	CgFn *f = p->f;
	int C = (p->F + p->threads - 1) / p->threads;
	LLVMValueRef f0 = cg_muli(f, p->tid, C), f1 = cg_min(f, cg_addi(f, f0, C), cg_i32(f, p->F));
	LLVMValueRef sum = cg_var(f, f->ti32, cg_i32(f, 0)), run, i;
	CgLoop l;
	CgIf c;

	i = cg_loop(f, &l, f0, f1, cg_i32(f, 1));
	cg_set(f, sum, cg_add(f, cg_get(f, sum), cg_sload(f, f->ti32, cnt_addr(p, i), 4)));
	cg_endloop(f, &l);
	run = cg_var(f, f->ti32, NULL);
	cg_set(f, run, cg_sub(f, block_scan(p, cg_get(f, sum)), cg_get(f, sum)));
	i = cg_loop(f, &l, f0, f1, cg_i32(f, 1));
	{
		LLVMValueRef at = cnt_addr(p, i), v = cg_sload(f, f->ti32, at, 4), r = cg_get(f, run);
		cg_sstore(f, r, at, 4);
		cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, cg_urem(f, i, cg_i32(f, p->P)), cg_i32(f, 0), ""));
		cg_gstore(f, r, cg_gep(f, p->offs, cg_sext64(f, cg_udiv(f, i, cg_i32(f, p->P))), 4), 4);
		cg_endif(f, &c);
		cg_set(f, run, cg_add(f, r, v));
	}
	cg_endloop(f, &l);
	cg_barrier(f);
}

/* Owners, counters and shared memory of a permute by `threads` threads
 * whose slots are at most nmax (0: any). */
static void
layout(Pm *p, int threads, int64_t nmax, int smem0)
{
	p->threads = threads;
	p->P = MIN(threads, CNT_WORDS / (p->s.E + 1));
	if (nmax > 0)	/* a segment of a few slots: fewer counters to zero and scan */
		p->P = (int)MAX(1, MIN(p->P, (nmax + 15) / 16));
	p->F = (p->s.E + 1) * p->P;
	p->cnt0 = smem0;
	p->wsum = smem0 + 4 * p->F;
	p->smem = p->wsum + 4 * 32;
}

/* The three phases, by every thread of the CTA (p->T, ids, offs, rows, pos set). */
static void
permute_body(Pm *p)
{
	CgIf c;

	p->tid = cg_tid(p->f, 0);
	p->lane = cg_and(p->f, p->tid, 31);
	p->warp = cg_shr(p->f, p->tid, 5);
	p->N = cg_muli(p->f, cg_max(p->f, p->T, cg_i32(p->f, 0)), p->s.k);
	p->S = cg_udiv(p->f, cg_addi(p->f, p->N, p->P - 1), cg_i32(p->f, p->P));
	p->seg0 = cg_min(p->f, cg_mul(p->f, p->tid, p->S), p->N);
	p->seg1 = cg_min(p->f, cg_add(p->f, p->seg0, p->S), p->N);

	zero_counters(p);
	cg_if(p->f, &c, cg_lt(p->f, p->tid, cg_i32(p->f, p->P)));
	walk(p, 0);
	cg_endif(p->f, &c);
	cg_barrier(p->f);
	scan_counters(p);
	cg_if(p->f, &c, cg_lt(p->f, p->tid, cg_i32(p->f, p->P)));
	walk(p, 1);
	cg_endif(p->f, &c);
}

int
cg_permute_smem(const CgPermuteSpec *s, int threads, int64_t nmax)
{
	Pm p;

	memset(&p, 0, sizeof p);
	p.s = *s;
	layout(&p, threads, nmax, 0);
	return p.smem;
}

int
cg_permute_check(const CgPermuteSpec *s, Diag *d)
{
	return check(s, d);
}

void
cg_permute_block(CgFn *f, const CgPermuteSpec *s, int threads, int64_t nmax, int smem0,
		 const CgPermuteIo *io)
{
	Pm p;

	memset(&p, 0, sizeof p);
	p.f = f;
	p.s = *s;
	layout(&p, threads, nmax, smem0);
	p.ids = io->ids;
	p.offs = io->offsets;
	p.rows = io->rows;
	p.pos = io->pos;
	p.T = io->T;
	permute_body(&p);
}

int
cg_emit_permute(CgModule *m, const char *name, const CgPermuteSpec *spec, Diag *d)
{
	CgParam par[5];
	int np = 0, block[3] = {THREADS, 1, 1};
	CgExpr grid[3] = {CG_EXPR_INT(1), CG_EXPR_INT(1), CG_EXPR_INT(1)};
	char note[128];
	Pm p;

	memset(&p, 0, sizeof p);
	if (check(spec, d) < 0)
		return -1;
	p.s = *spec;
	layout(&p, THREADS, 0, 0);
	par[np++] = (CgParam){CGP_PTR, "ids"};
	par[np++] = (CgParam){CGP_PTR, "offsets"};
	par[np++] = (CgParam){CGP_PTR, "rows"};
	if (p.s.want_pos)
		par[np++] = (CgParam){CGP_PTR, "pos"};
	par[np++] = (CgParam){CGP_I32, "T"};
	p.f = cg_fn_begin(m, name, par, np, THREADS, 1, d);
	if (!p.f)
		return -1;
	for (int i = 0; i < np - 1; i++)
		cg_arg_noalias(p.f, i);
	np = 0;
	p.ids = cg_arg(p.f, np++);
	p.offs = cg_arg(p.f, np++);
	p.rows = cg_arg(p.f, np++);
	if (p.s.want_pos)
		p.pos = cg_arg(p.f, np++);
	p.T = cg_muli(p.f, cg_arg(p.f, np++), p.s.m_per_t);	/* ids rows */
	permute_body(&p);
	snprintf(note, sizeof note, "permute E=%d k=%d %s owners=%d%s", p.s.E, p.s.k,
		 dtype_name(p.s.ids_dt), p.P, p.s.want_pos ? " pos" : "");
	return cg_fn_end(p.f, block, grid, p.smem, note);
}
