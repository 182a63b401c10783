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
 *
 * The grid sort (spec.grid; DBG_OLD_ROWS keeps one CTA): the same order from G CTAs
 * of a chunk of CH slots each, in two launches and no atomics:
 *	NAME_count: CTA c counts its chunk: hist[x][c] (the workspace; with
 *	            spec.counted the route kernel has counted them by atomic
 *	            adds, CgRouteSpec.count_ch, and there is no such launch)
 *	NAME:       CTA c scans the whole hist in (x, c) order for the start
 *	            of each (x, c) (offsets: CTA 0), ranks its chunk's slots
 *	            stably (match.any in a warp, the warps' counts scanned in
 *	            shared memory) and places them: rows[start + rank] = s
 * (expert, chunk, order in the chunk) is (expert, slot) order again.
 *
 * The small sort (spec.small, cg_permute_block with a slot a thread at
 * most: decode fronts' last CTA): each slot's bucket in shared memory, one
 * barrier, then each slot's place and each offset counted from all of them.
 * (spec.apart: the offsets by the threads past the slots' most, where the
 * block has them, at the same time as the places.  spec.keyed: each slot's
 * bucket << 16 | slot in shared memory, so that "before" and "below" are
 * each one compare of two words, not four operations.)
 */
#define CG_INTERNAL
#include <string.h>

#include "codegen.h"

#define THREADS 1024
#define CNT_WORDS 24576		/* 96 KiB of counters */
#define QUAD 8			/* spec.quad: buckets a trip of the small sort's loops (two 16-byte loads) */
#define KEY_SHIFT 16		/* spec.keyed: a slot's key is bucket << KEY_SHIFT | slot (slots < 1024) */

typedef struct Pm Pm;
struct Pm {
	CgFn *f;
	CgPermuteSpec s;
	int P, F, wsum, smem, threads, cnt0;
	int quad;		/* small, spec.quad and cnt0 16-byte aligned: QUAD buckets a loop trip */
	int sids;		/* CgPermuteIo.sids (small) */
	int apart;		/* small, spec.apart: the first thread counting offsets (0: after the places) */
	LLVMValueRef ids, offs, rows, pos, T, tid, lane, warp, N, S, seg0, seg1;
	/* the grid sort: W warps, R rounds of W*32 slots a chunk; the table of
	 * the warps' counts tbl[W][E+1] at 0, base[E+1] at sbase; G chunks */
	int W, R, CH, sbase;
	LLVMValueRef ws, c, G;
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
	s->grid = 0;
	s->max_slots = 0;
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

/* Bucket of id x (i64): its expert clamped to at most E-1; E if negative
 * (dropped).  i32. */
static LLVMValueRef
bucket(Pm *p, LLVMValueRef x)
{
	CgFn *f = p->f;

	x = cg_select(f, cg_lt(f, x, cg_i64(f, 0)), cg_i64(f, p->s.E),
		      cg_min(f, x, cg_i64(f, p->s.E - 1)));
	return LLVMBuildTrunc(f->B, x, f->ti32, "");
}

/* The counter of owner tid for id x. */
static LLVMValueRef
counter(Pm *p, LLVMValueRef x)
{
	CgFn *f = p->f;

	return cnt_addr(p, cg_add(f, cg_muli(f, bucket(p, x), p->P), p->tid));
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

/* Inclusive scan of v over the warp's lanes. */
static LLVMValueRef
warp_scan(Pm *p, LLVMValueRef v)
{
	CgFn *f = p->f;

	for (int d = 1; d < 32; d *= 2) {
		LLVMValueRef o = cg_shfl_up(f, v, d);
		v = cg_add(f, v, cg_select(f, cg_lt(f, p->lane, cg_i32(f, d)), cg_i32(f, 0), o));
	}
	return v;
}

/* Inclusive scan of v over the CTA (a warp scan, then one over the warps' sums). */
static LLVMValueRef
block_scan(Pm *p, LLVMValueRef v)
{
	CgFn *f = p->f;
	LLVMBuilderRef B = f->B;
	LLVMValueRef w, before;
	CgIf c;

	v = warp_scan(p, v);
	cg_if(f, &c, LLVMBuildICmp(B, LLVMIntEQ, p->lane, cg_i32(f, 31), ""));
	cg_sstore(f, v, cg_sptr(f, cg_addi(f, cg_muli(f, p->warp, 4), p->wsum)), 4);
	cg_endif(f, &c);
	cg_barrier(f);
	cg_if(f, &c, LLVMBuildICmp(B, LLVMIntEQ, p->warp, cg_i32(f, 0), ""));
	{
		LLVMValueRef at = cg_sptr(f, cg_addi(f, cg_muli(f, p->lane, 4), p->wsum));
		w = warp_scan(p, cg_sload(f, f->ti32, at, 4));
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

/* The spec's small sort for at most nmax slots by `threads` threads? */
int
cg_permute_small(const CgPermuteSpec *s, int threads, int64_t nmax)
{
	return s->small && nmax > 0 && nmax <= threads;
}

/* Owners, counters and shared memory of a permute by `threads` threads
 * whose slots are at most nmax (0: any). */
static void
layout(Pm *p, int threads, int64_t nmax, int smem0)
{
	if (cg_permute_small(&p->s, threads, nmax)) {	/* the slots' buckets (quad: padded to QUAD) */
		p->threads = threads;
		p->cnt0 = smem0;
		p->quad = p->s.quad && smem0 % 16 == 0 && threads % QUAD == 0;
		p->smem = smem0 + 4 * (int)(p->quad ? (nmax + QUAD - 1) / QUAD * QUAD : nmax);
		p->apart = p->s.apart && nmax + p->s.E + 1 <= threads ? (int)nmax : 0;
		return;
	}
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

/*
 * The small sort (spec.small, at most a slot a thread): thread s < N puts
 * its slot's bucket in shared memory; after a barrier its place is the
 * count of slots before it in (bucket, slot) order, and offsets[x] (x =
 * 0..E, strided over the threads) the count of buckets below x: the
 * counting sort's results, with one barrier and N compares a thread.
 */
static LLVMValueRef
bucket_at(Pm *p, LLVMValueRef s)
{
	return cg_sptr(p->f, cg_addi(p->f, cg_muli(p->f, s, 4), p->cnt0));
}

/* A slot's test: (bucket o of slot s2, the caller's argument) -> i1. */
typedef LLVMValueRef SlotCmp(Pm *, LLVMValueRef o, LLVMValueRef s2, LLVMValueRef arg);

/* spec.quad: the sum over slots s2 < N of cmp(bucket[s2], s2), the buckets
 * read QUAD at a time (padded with INT32_MAX past N: no bucket is above it,
 * so a pad counts in neither sum); the same integer. */
static LLVMValueRef
count_quad(Pm *p, LLVMValueRef N, SlotCmp *cmp,
	   LLVMValueRef arg)
{
	CgFn *f = p->f;
	LLVMTypeRef v4 = LLVMVectorType(f->ti32, 4);
	LLVMValueRef cnt = cg_var(f, f->ti32, cg_i32(f, 0)), s2, sum;
	CgLoop l;

	s2 = cg_loop(f, &l, cg_i32(f, 0), cg_and(f, cg_addi(f, N, QUAD - 1), -QUAD), cg_i32(f, QUAD));
	sum = cg_get(f, cnt);
	for (int h = 0; h < QUAD / 4; h++) {
		LLVMValueRef v = cg_sload(f, v4, bucket_at(p, cg_addi(f, s2, 4 * h)), 16);
		for (int j = 0; j < 4; j++) {
			LLVMValueRef o = cmp(p, LLVMBuildExtractElement(f->B, v, cg_i32(f, j), ""),
					     cg_addi(f, s2, 4 * h + j), arg);
			sum = cg_add(f, sum, LLVMBuildZExt(f->B, o, f->ti32, ""));
		}
	}
	cg_set(f, cnt, sum);
	cg_endloop(f, &l);
	return cg_get(f, cnt);
}

/* Slot s2 (bucket o) comes before the thread's slot (bucket b, slot tid). */
static LLVMValueRef
before(Pm *p, LLVMValueRef o, LLVMValueRef s2, LLVMValueRef b)
{
	LLVMBuilderRef B = p->f->B;

	return LLVMBuildOr(B, cg_lt(p->f, o, b), LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntEQ, o, b, ""),
							      cg_lt(p->f, s2, p->tid), ""), "");
}

/* Slot s2's bucket o is below x (spec keyed: key o below key x; a slot's
 * place, x its own key, and an offset, x = bucket << KEY_SHIFT). */
static LLVMValueRef
below(Pm *p, LLVMValueRef o, LLVMValueRef s2, LLVMValueRef x)
{
	(void)s2;
	return cg_lt(p->f, o, x);
}

/* How many of the N slots cmp counts: QUAD a trip (p->quad), else one. */
static LLVMValueRef
count_slots(Pm *p, LLVMValueRef N, SlotCmp *cmp,
	    LLVMValueRef arg)
{
	CgFn *f = p->f;
	LLVMValueRef cnt, s2, o;
	CgLoop l;

	if (p->quad)
		return count_quad(p, N, cmp, arg);
	cnt = cg_var(f, f->ti32, cg_i32(f, 0));
	s2 = cg_loop(f, &l, cg_i32(f, 0), N, cg_i32(f, 1));
	o = cmp(p, cg_sload(f, f->ti32, bucket_at(p, s2), 4), s2, arg);
	cg_set(f, cnt, cg_add(f, cg_get(f, cnt), LLVMBuildZExt(f->B, o, f->ti32, "")));
	cg_endloop(f, &l);
	return cg_get(f, cnt);
}

static void
permute_small(Pm *p)
{
	CgFn *f = p->f;
	LLVMValueRef tid = cg_tid(f, 0), N = cg_muli(f, cg_max(f, p->T, cg_i32(f, 0)), p->s.k);
	LLVMValueRef mine = cg_lt(f, tid, N), b, cnt, x;
	CgLoop l;
	CgIf c;

	p->tid = tid;
	cg_if(f, &c, mine);
	b = bucket_at(p, tid);
	x = p->sids ? cg_sext64(f, cg_sload(f, f->ti32, cg_sptr(f, cg_addi(f, cg_muli(f, tid, 4), p->sids)), 4))
		: load_id(p, cg_min(f, tid, cg_addi(f, N, -1)));
	x = bucket(p, x);
	if (p->s.keyed)	/* (bucket, slot) as one word */
		x = LLVMBuildOr(f->B, cg_shl(f, x, KEY_SHIFT), tid, "");
	cg_sstore(f, x, b, 4);
	cg_endif(f, &c);
	if (p->quad) {	/* the pads up to a multiple of QUAD */
		cg_if(f, &c, LLVMBuildAnd(f->B, LLVMBuildNot(f->B, mine, ""),
					  cg_lt(f, tid, cg_and(f, cg_addi(f, N, QUAD - 1), -QUAD)), ""));
		cg_sstore(f, cg_i32(f, INT32_MAX), bucket_at(p, tid), 4);
		cg_endif(f, &c);
	}
	cg_barrier(f);
	cg_if(f, &c, mine);
	b = cg_sload(f, f->ti32, bucket_at(p, tid), 4);
	cnt = count_slots(p, N, p->s.keyed ? below : before, b);
	cg_gstore(f, tid, cg_gep(f, p->rows, cg_sext64(f, cnt), 4), 4);
	if (p->s.want_pos)
		cg_gstore(f, cnt, cg_gep(f, p->pos, cg_sext64(f, tid), 4), 4);
	cg_endif(f, &c);
	if (p->apart)	/* threads apart from the slots' count the offsets */
		cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntUGE, tid, cg_i32(f, p->apart), ""));
	x = cg_loop(f, &l, cg_addi(f, tid, -p->apart), cg_i32(f, p->s.E + 1), cg_i32(f, p->threads));
	cnt = count_slots(p, N, below, p->s.keyed ? cg_shl(f, x, KEY_SHIFT) : x);
	cg_gstore(f, cnt, cg_gep(f, p->offs, cg_sext64(f, x), 4), 4);
	cg_endloop(f, &l);
	if (p->apart)
		cg_endif(f, &c);
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
	p.sids = io->sids;
	if (cg_permute_small(&p.s, threads, nmax))
		permute_small(&p);
	else
		permute_body(&p);
}


/* --- the grid sort (spec.grid) ------------------------------------------- */

enum {
	TBL_WORDS = 16384,	/* the warps' counts tbl[W][E+1]: 64 KiB at most */
	HIST_MAX = 16384,	/* hist entries a CTA scans, where rounds can keep it so */
	BATCH_H = 8		/* hist entries a thread loads before it adds any */
};

/*
 * Warps W (up to 32, so that tbl fits), rounds R and the chunk CH = 32 W R
 * slots of a CTA, for at most `slots` slots (0: unknown, one round).  A
 * round is W*32 slots, one a thread; rounds are added only where the G x
 * (E+1) hist every CTA scans would be larger than HIST_MAX (many experts:
 * E = 1024 has W = 15).  Shared memory: tbl, base[E+1], the block scan's
 * 32 warp sums.
 */
static void
grid_layout(Pm *p, int64_t slots)
{
	int e1 = p->s.E + 1;

	p->W = MIN(32, TBL_WORDS / e1);
	p->threads = 32 * p->W;
	p->R = 1;
	if (slots > 0) {
		int64_t g = slots / p->threads + 1;
		p->R = (int)MIN(64, MAX(1, (g * e1 + HIST_MAX - 1) / HIST_MAX));
	}
	p->CH = p->threads * p->R;
	p->sbase = 4 * p->W * e1;
	p->wsum = p->sbase + 4 * e1;
	p->smem = p->wsum + 4 * 32;
}

/* tid, lane, warp, the CTA's chunk c, N slots and G = cdiv(N + 1, CH) chunks
 * (the grid: one more than needed where CH divides N, so that T = 0 has one
 * CTA to write the offsets). */
static void
grid_begin(Pm *p)
{
	CgFn *f = p->f;

	p->tid = cg_tid(f, 0);
	p->lane = cg_and(f, p->tid, 31);
	p->warp = cg_shr(f, p->tid, 5);
	p->c = cg_ctaid(f, 0);
	p->N = cg_muli(f, cg_max(f, p->T, cg_i32(f, 0)), p->s.k);
	p->G = cg_udiv(f, cg_addi(f, p->N, p->CH), cg_i32(f, p->CH));
}

static LLVMValueRef
tbl(Pm *p, LLVMValueRef w, LLVMValueRef x)
{
	CgFn *f = p->f;

	return cg_sptr(f, cg_muli(f, cg_add(f, cg_muli(f, w, p->s.E + 1), x), 4));
}

static LLVMValueRef
base_at(Pm *p, LLVMValueRef x)
{
	return cg_sptr(p->f, cg_addi(p->f, cg_muli(p->f, x, 4), p->sbase));
}

static void
zero_tbl(Pm *p)
{
	CgFn *f = p->f;
	CgLoop l;
	LLVMValueRef i = cg_loop(f, &l, p->tid, cg_i32(f, p->W * (p->s.E + 1)), cg_i32(f, p->threads));

	cg_sstore(f, cg_i32(f, 0), cg_sptr(f, cg_muli(f, i, 4)), 4);
	cg_endloop(f, &l);
}

/* This thread's slot of round r and its bucket (E+1 past the N slots: a
 * key no slot has, so match.any groups such lanes apart). */
static LLVMValueRef
round_slot(Pm *p, LLVMValueRef r, LLVMValueRef xv)
{
	CgFn *f = p->f;
	LLVMValueRef s = cg_add(f, cg_add(f, cg_muli(f, p->c, p->CH), cg_muli(f, r, p->threads)), p->tid);
	CgIf c;

	cg_set(f, xv, cg_i32(f, p->s.E + 1));
	cg_if(f, &c, cg_lt(f, s, p->N));
	cg_set(f, xv, bucket(p, load_id(p, s)));
	cg_endif(f, &c);
	return s;
}

static LLVMValueRef
popc(CgFn *f, LLVMValueRef v)
{
	return cg_intrinsic(f, "llvm.ctpop", f->ti32, &f->ti32, 1, &v, 1);
}

/* The lanes of this warp with bucket x (match.any), and those below this lane. */
static LLVMValueRef
match(Pm *p, LLVMValueRef x, LLVMValueRef *below)
{
	CgFn *f = p->f;
	LLVMValueRef m = cg_match_any(f, x);

	*below = LLVMBuildAnd(f->B, m, cg_addi(f, LLVMBuildShl(f->B, cg_i32(f, 1), p->lane, ""), -1), "");
	return m;
}

static LLVMValueRef
eq0(CgFn *f, LLVMValueRef v)
{
	return LLVMBuildICmp(f->B, LLVMIntEQ, v, cg_i32(f, 0), "");
}

static LLVMValueRef
and1(CgFn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildAnd(f->B, a, b, "");
}

/* NAME_count: hist[x][c] = the slots of bucket x in chunk c.  Each warp
 * counts into its own row of tbl (one lane a bucket: no atomics). */
static void
count_body(Pm *p)
{
	CgFn *f = p->f;
	LLVMValueRef xv = cg_var(f, f->ti32, NULL), r, s, x, m, below, sum;
	CgLoop l;
	CgIf c;

	grid_begin(p);
	zero_tbl(p);
	cg_barrier(f);
	r = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, p->R), cg_i32(f, 1));
	s = round_slot(p, r, xv);
	x = cg_get(f, xv);
	m = match(p, x, &below);
	cg_if(f, &c, and1(f, cg_lt(f, s, p->N), eq0(f, below)));
	{
		LLVMValueRef at = tbl(p, p->warp, x);
		cg_sstore(f, cg_add(f, cg_sload(f, f->ti32, at, 4), popc(f, m)), at, 4);
	}
	cg_endif(f, &c);
	cg_syncwarp(f);		/* the next round's lane of x sees this one's count */
	cg_endloop(f, &l);
	cg_barrier(f);
	x = cg_loop(f, &l, p->tid, cg_i32(f, p->s.E + 1), cg_i32(f, p->threads));
	sum = cg_i32(f, 0);
	for (int w = 0; w < p->W; w++)
		sum = cg_add(f, sum, cg_sload(f, f->ti32, tbl(p, cg_i32(f, w), x), 4));
	cg_gstore(f, sum, cg_gep(f, p->ws, cg_sext64(f, cg_add(f, cg_mul(f, x, p->G), p->c)), 4), 4);
	cg_endloop(f, &l);
}

/* BATCH_H hist entries from i (0 past end; the address clamped below F). */
static void
load_hist(Pm *p, LLVMValueRef i, LLVMValueRef end, LLVMValueRef F, LLVMValueRef *v)
{
	CgFn *f = p->f;

	for (int j = 0; j < BATCH_H; j++) {
		LLVMValueRef at = cg_min(f, cg_addi(f, i, j), cg_addi(f, F, -1));
		v[j] = cg_gload(f, f->ti32, cg_gep(f, p->ws, cg_sext64(f, at), 4), 4);
	}
	for (int j = 0; j < BATCH_H; j++)
		v[j] = cg_select(f, cg_lt(f, cg_addi(f, i, j), end), v[j], cg_i32(f, 0));
}

/*
 * The exclusive scan of hist in (x, c) order, i.e. of its F = (E+1) G
 * words in memory order: thread t sums a run of cdiv(F, threads), a block
 * scan of the sums, then the run again; the value at (x, c) for this CTA's
 * c is base[x] (shared), at (x, 0) offsets[x] (CTA 0 stores them).
 */
static void
scan_hist(Pm *p)
{
	CgFn *f = p->f;
	LLVMValueRef F = cg_mul(f, cg_i32(f, p->s.E + 1), p->G), v[BATCH_H];
	LLVMValueRef C = cg_udiv(f, cg_addi(f, F, p->threads - 1), cg_i32(f, p->threads));
	LLVMValueRef f0 = cg_min(f, cg_mul(f, p->tid, C), F), f1 = cg_min(f, cg_add(f, f0, C), F);
	LLVMValueRef sum = cg_var(f, f->ti32, cg_i32(f, 0)), run, i;
	CgLoop l;
	CgIf c, c0;

	i = cg_loop(f, &l, f0, f1, cg_i32(f, BATCH_H));
	load_hist(p, i, f1, F, v);
	for (int j = 0; j < BATCH_H; j++)
		cg_set(f, sum, cg_add(f, cg_get(f, sum), v[j]));
	cg_endloop(f, &l);
	run = cg_var(f, f->ti32, NULL);
	cg_set(f, run, cg_sub(f, block_scan(p, cg_get(f, sum)), cg_get(f, sum)));
	i = cg_loop(f, &l, f0, f1, cg_i32(f, BATCH_H));
	load_hist(p, i, f1, F, v);
	for (int j = 0; j < BATCH_H; j++) {
		LLVMValueRef at = cg_addi(f, i, j), x = cg_udiv(f, at, p->G), r = cg_get(f, run);
		LLVMValueRef mine = LLVMBuildICmp(f->B, LLVMIntEQ, cg_urem(f, at, p->G), p->c, "");
		cg_if(f, &c, and1(f, cg_lt(f, at, f1), mine));
		cg_sstore(f, r, base_at(p, x), 4);
		cg_if(f, &c0, eq0(f, p->c));
		cg_gstore(f, r, cg_gep(f, p->offs, cg_sext64(f, x), 4), 4);
		cg_endif(f, &c0);
		cg_endif(f, &c);
		cg_set(f, run, cg_add(f, r, v[j]));
	}
	cg_endloop(f, &l);
	cg_barrier(f);
}

/* The warps' counts of this round, column x = warp, warp + W, ...: lane w
 * holds tbl[w][x]; a warp scan makes tbl[w][x] the first position of warp
 * w's slots of x, and base[x] moves past the round's. */
static void
scan_columns(Pm *p)
{
	CgFn *f = p->f;
	LLVMValueRef live = cg_lt(f, p->lane, cg_i32(f, p->W)), x, v, inc, b;
	LLVMValueRef w = cg_min(f, p->lane, cg_i32(f, p->W - 1));
	CgLoop l;
	CgIf c;

	x = cg_loop(f, &l, p->warp, cg_i32(f, p->s.E + 1), cg_i32(f, p->W));
	v = cg_select(f, live, cg_sload(f, f->ti32, tbl(p, w, x), 4), cg_i32(f, 0));
	inc = warp_scan(p, v);
	b = cg_sload(f, f->ti32, base_at(p, x), 4);
	cg_if(f, &c, live);
	cg_sstore(f, cg_sub(f, cg_add(f, b, inc), v), tbl(p, w, x), 4);
	cg_endif(f, &c);
	cg_syncwarp(f);		/* every lane has read base[x] */
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, p->lane, cg_i32(f, 31), ""));
	cg_sstore(f, cg_add(f, b, inc), base_at(p, x), 4);
	cg_endif(f, &c);
	cg_endloop(f, &l);
}

/* NAME: base[] from the whole hist, then each round's slots ranked and placed. */
static void
place_body(Pm *p)
{
	CgFn *f = p->f;
	LLVMValueRef xv = cg_var(f, f->ti32, NULL), nv = cg_var(f, f->ti32, NULL);
	LLVMValueRef r, s, x, m, below, at;
	CgLoop l;
	CgIf c;

	grid_begin(p);
	s = round_slot(p, cg_i32(f, 0), nv);	/* round 0's id in flight during the scan */
	(void)s;
	zero_tbl(p);
	scan_hist(p);		/* its last barrier orders zero_tbl too */
	r = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, p->R), cg_i32(f, 1));
	s = cg_add(f, cg_add(f, cg_muli(f, p->c, p->CH), cg_muli(f, r, p->threads)), p->tid);
	x = cg_get(f, nv);
	cg_set(f, xv, x);
	m = match(p, x, &below);
	cg_if(f, &c, and1(f, cg_lt(f, s, p->N), eq0(f, below)));
	cg_sstore(f, popc(f, m), tbl(p, p->warp, x), 4);
	cg_endif(f, &c);
	if (p->R > 1) {		/* the next round's id in flight */
		cg_if(f, &c, cg_lt(f, cg_addi(f, r, 1), cg_i32(f, p->R)));
		(void)round_slot(p, cg_addi(f, r, 1), nv);
		cg_endif(f, &c);
	}
	cg_barrier(f);
	scan_columns(p);
	cg_barrier(f);
	x = cg_get(f, xv);
	cg_if(f, &c, cg_lt(f, s, p->N));
	at = cg_add(f, cg_sload(f, f->ti32, tbl(p, p->warp, x), 4), popc(f, below));
	cg_gstore(f, s, cg_gep(f, p->rows, cg_sext64(f, at), 4), 4);
	if (p->s.want_pos)
		cg_gstore(f, at, cg_gep(f, p->pos, cg_sext64(f, s), 4), 4);
	cg_endif(f, &c);
	if (p->R > 1) {		/* tbl zero again for the next round */
		cg_barrier(f);
		zero_tbl(p);
		cg_barrier(f);
	}
	cg_endloop(f, &l);
}

/* The grid sort's chunk (slots a count covers) at s's max_slots. */
int
cg_permute_chunk(const CgPermuteSpec *s)
{
	Pm p;

	memset(&p, 0, sizeof p);
	p.s = *s;
	grid_layout(&p, s->max_slots);
	return p.CH;
}

int64_t
cg_permute_ws_bytes(const CgPermuteSpec *s)
{
	return 4 * (int64_t)(s->E + 1) * (MAX(s->max_slots, 0) / cg_permute_chunk(s) + 1);
}

/* The two kernels of the grid sort. */
/* The permute kernels' parameters (ids, offsets, rows, [pos], [splitk_ws], T;
 * the pointers noalias) bound into p: the one-CTA sort's, and with ws the
 * grid sort's place launch. */
static int
begin(CgModule *m, const char *name, Pm *p, int threads, int ws, Diag *d)
{
	CgParam par[6];
	int np = 0;

	par[np++] = (CgParam){CGP_PTR, "ids"};
	par[np++] = (CgParam){CGP_PTR, "offsets"};
	par[np++] = (CgParam){CGP_PTR, "rows"};
	if (p->s.want_pos)
		par[np++] = (CgParam){CGP_PTR, "pos"};
	if (ws)
		par[np++] = (CgParam){CGP_PTR, p->s.counted ? "count_ws" : "splitk_ws"};
	par[np++] = (CgParam){CGP_I32, "T"};
	p->f = cg_fn_begin(m, name, par, np, threads, 1, d);
	if (!p->f)
		return -1;
	for (int i = 0; i < np - 1 - ws; i++)	/* not the workspace, not T */
		cg_arg_noalias(p->f, i);
	np = 0;
	p->ids = cg_arg(p->f, np++);
	p->offs = cg_arg(p->f, np++);
	p->rows = cg_arg(p->f, np++);
	if (p->s.want_pos)
		p->pos = cg_arg(p->f, np++);
	if (ws)
		p->ws = cg_arg(p->f, np++);
	p->T = cg_muli(p->f, cg_arg(p->f, np++), p->s.m_per_t);	/* ids rows */
	return 0;
}

/* NAME_count ("ids", "splitk_ws", "T"): the grid sort's first launch. */
static int
emit_count(CgModule *m, const char *cname, Pm *p, const int *block, const CgExpr *grid, Diag *d)
{
	CgParam par[3] = {{CGP_PTR, "ids"}, {CGP_PTR, "splitk_ws"}, {CGP_I32, "T"}};
	char note[160];

	p->f = cg_fn_begin(m, cname, par, 3, p->threads, 1, d);
	if (!p->f)
		return -1;
	p->ids = cg_arg(p->f, 0);
	p->ws = cg_arg(p->f, 1);
	p->T = cg_muli(p->f, cg_arg(p->f, 2), p->s.m_per_t);
	count_body(p);
	snprintf(note, sizeof note, "permute count E=%d k=%d %s chunk=%d (%d warps x %d rounds)", p->s.E,
		 p->s.k, dtype_name(p->s.ids_dt), p->CH, p->W, p->R);
	return cg_fn_end(p->f, block, grid, p->sbase, note);
}

static int
emit_grid(CgModule *m, const char *name, const CgPermuteSpec *spec, Diag *d)
{
	int block[3] = {0, 1, 1};
	char note[160], cname[256];
	CgExpr grid[3] = {CG_EXPR_INT(1), CG_EXPR_INT(1), CG_EXPR_INT(1)};
	Pm p;

	memset(&p, 0, sizeof p);
	p.s = *spec;
	grid_layout(&p, spec->max_slots);
	if (cg_permute_ws_bytes(spec) > INT32_MAX)
		return diag_error(d, LOC_NONE, "permute: %lld slots make a workspace over 2 GiB",
				  (long long)spec->max_slots);
	if (snprintf(cname, sizeof cname, "%s_count", name) >= (int)sizeof cname)
		return diag_error(d, LOC_NONE, "permute: kernel name '%s' too long", name);
	block[0] = p.threads;
	grid[0] = (CgExpr){(int64_t)spec->m_per_t * spec->k, 1, p.CH};
	if (!spec->counted && emit_count(m, cname, &p, block, grid, d) != 0)	/* else the route wrote hist */
		return -1;
	if (begin(m, name, &p, p.threads, 1, d) < 0)
		return -1;
	place_body(&p);
	snprintf(note, sizeof note, "permute place E=%d k=%d %s chunk=%d (%d warps x %d rounds)%s%s", p.s.E,
		 p.s.k, dtype_name(p.s.ids_dt), p.CH, p.W, p.R, p.s.want_pos ? " pos" : "",
		 p.s.counted ? " counted by the route" : "");
	return cg_fn_end(p.f, block, grid, p.smem, note);
}

int
cg_emit_permute(CgModule *m, const char *name, const CgPermuteSpec *spec, Diag *d)
{
	int block[3] = {THREADS, 1, 1};
	CgExpr grid[3] = {CG_EXPR_INT(1), CG_EXPR_INT(1), CG_EXPR_INT(1)};
	char note[128];
	Pm p;

	memset(&p, 0, sizeof p);
	if (check(spec, d) < 0)
		return -1;
	if (spec->grid)
		return emit_grid(m, name, spec, d);
	p.s = *spec;
	layout(&p, THREADS, 0, 0);
	if (begin(m, name, &p, THREADS, 0, d) < 0)
		return -1;
	permute_body(&p);
	snprintf(note, sizeof note, "permute E=%d k=%d %s owners=%d%s", p.s.E, p.s.k,
		 dtype_name(p.s.ids_dt), p.P, p.s.want_pos ? " pos" : "");
	return cg_fn_end(p.f, block, grid, p.smem, note);
}
