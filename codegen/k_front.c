/*
 * k_front.c — a decode block's front in one launch: the router's RMSNorm,
 * the router GEMM, the routing and the permutation, for T <= 64.
 *
 *	before (6 launches, 2 of them one CTA or a chain):
 *	  h = rms_norm(x, gamma)        row kernel, grid T
 *	  rstd = rstd(x)                row kernel, grid T (the folded norm's 1/rms)
 *	  memset flags; logits = h @ W^T  GEMM, split-K chain
 *	  w, ids = route(logits)        grid cdiv(T,4)
 *	  offs, rows = permute(ids)     one CTA of 1024
 *	  memset flags                  (the next split GEMM's)
 *	after (1 memset, 1 launch):
 *	  memset flags; front<<<E/EB x S, 32 W>>>   (W warps: 4 for T <= 4, else 8; EB experts a CTA;
 *	    E/EB and the slices S within the targets' SMs)
 *	    CTA (slice, experts e..e+EB-1), warp w, tokens t = W slice + w, then every W S: rstd of row t,
 *	      h = norm(x[t]) as the row kernel rounds it, logits[t][e+b] = the dot of h with W[e+b] (+ bias)
 *	      (--debug=front-pair: two of a warp's tokens in one pass, cg_front_pair; sums broadcast by shuffles)
 *	    every CTA but the last: fence, flag[e] = 1 (acq_rel: barrier, then thread 0's
 *	      fence.acq_rel.gpu and flag: a release)
 *	    the last CTA (launched last, so every other one is resident or done):
 *	      waits for each flag (and clears it), then routes all T tokens
 *	      (cg_route_tokens: exactly k_route.c's kernel), permutes them
 *	      (cg_permute_block: k_permute.c's), and zeroes the next split
 *	      GEMM's flags (zero_words, bound by program.c)
 *	    (--debug=front3, CgFrontSpec.ticket: the last CTA to finish routes,
 *	      found by an atomic ticket in flags[0]; the chain's flags zeroed by
 *	      every CTA at its start; the ids handed to the sort in shared memory)
 *	    (CG_FRONT_SPLIT_DEFAULT, CgFrontSpec.part, with the ticket's layout: two
 *	      launches of one parameter list, part 1 the CTAs above with no
 *	      hand-over, part 2 one CTA running the last CTA's route and sort after
 *	      part 1's grid dependency: a PDL hand-over measured ~0.5 us cheaper
 *	      than the ticket's fences and atomic at the end of a grid, session 38;
 *	      CG_ROUTE2_DEFAULT: part 2 with its own warps, route_warps, a token
 *	      each for up to 16, and the route's redux, session 39)
 *
 * Deterministic: every logit is one warp's sum in a fixed order, the last
 * CTA reads them through the same code as the route kernel; no atomics (a
 * flag has one writer).  The flags must be 0 at launch (the memset step;
 * the kernel leaves them 0 as well).
 */
#define CG_INTERNAL
#include <math.h>
#include <string.h>

#include "codegen.h"

#define SMEM0 32		/* the per-warp broadcast slots; then the route's or the permute's */
#define KEEP_MAX 64	/* KEEP * LV */

static int
io_float(DType t)
{
	return t == DT_F32 || t == DT_BF16 || t == DT_F16;
}

int
cg_front_check(const CgFrontSpec *s, Diag *d)
{
	if (s->H < 1 || s->H > (1 << 20))
		return diag_error(d, LOC_NONE, "front: row length %lld (needs 1..2^20)", (long long)s->H);
	if (!io_float(s->x_dt) || !io_float(s->w_dt) || !io_float(s->logits_dt) ||
	    !io_float(s->round_dt) || (s->bias && !io_float(s->bias_dt)) || (s->norm && (!io_float(s->gamma_dt) || !io_float(s->h_dt) ||
						   !io_float(s->hout_dt))))
		return diag_error(d, LOC_NONE, "front: x %s, router weight %s, logits %s (need f32, bf16 "
				  "or f16)", dtype_name(s->x_dt), dtype_name(s->w_dt),
				  dtype_name(s->logits_dt));
	if (s->max_t < 1 || s->max_t > CG_FRONT_MAX_T)
		return diag_error(d, LOC_NONE, "front: up to %d tokens (not %lld)", CG_FRONT_MAX_T,
				  (long long)s->max_t);
	if (s->route.logits_dt != s->logits_dt || s->route.m_per_t != 1 || s->perm.m_per_t != 1 ||
	    s->perm.E != s->route.E || s->perm.k != s->route.k || s->perm.ids_dt != DT_I32)
		return diag_error(d, LOC_NONE, "front: the route and permute specs disagree");
	if (s->part < 0 || s->part > 2 || (s->part && !s->ticket))
		return diag_error(d, LOC_NONE, "front: part %d (0, or 1 and 2 with the ticket's layout)", s->part);
	if (s->route_warps < 0 || s->route_warps > 32)
		return diag_error(d, LOC_NONE, "front: %d route warps (0..32)", s->route_warps);
	if (cg_route_check(&s->route, d) || cg_permute_check(&s->perm, d))
		return -1;
	return 0;
}

typedef struct Fr Fr;
struct Fr {
	CgFn *f;
	const CgFrontSpec *s;
	LLVMValueRef x, gamma, w, bias, selbias, h, rstd, logits, weights, ids, offs, rows, pos, flags,
		zero_words, T;
	LLVMValueRef lane, warp, cta, e, grp;	/* CTA cta = (slice, experts e .. e+EB-1), grp = cta % (E/EB) */
	LLVMValueRef wk[KEEP_MAX], gk[KEEP_MAX];	/* preload(): the W row and gamma */
	int kept;
	int nw;			/* warps per CTA */
	int ng;			/* vector rows: the groups a warp reads (split: G / W) */
	LLVMValueRef g0;	/* split: the warp's first group (warp * ng); NULL: 0 */
	int eb;			/* experts per CTA (EB) */
	int nt;			/* tokens a warp takes at a time (cg_front_pair) */
	int kept_g;		/* gamma kept in registers (with W, one token at a time) */
};

/* Warps per CTA: 4 tokens at a time for T <= 4, else 8 (256 threads, at
 * most 255 registers each; the last CTA routes 8 tokens at a time). */
static int
nwarps(const CgFrontSpec *s)
{
	return s->max_t <= 4 ? 4 : 8;
}

/* Warps of the CTA that routes and sorts: part 2's own (route_warps) or the front's. */
static int
route_warps(const CgFrontSpec *s)
{
	return s->part == 2 && s->route_warps ? s->route_warps : nwarps(s);
}

/* The SMs the grid is sized for (CgFrontSpec.sms; 132 when unset). */
static int
front_sms(const CgFrontSpec *s)
{
	return s->sms > 0 ? s->sms : 132;
}

/* Experts per CTA (EB): 1, or the fewest (a divisor of E, up to 8) that keep
 * E / EB CTAs within the SMs (132 on an H100/H200): DeepSeek-V3's 256
 * experts two to a CTA, one wave, and x read by half as many CTAs (each
 * element of h is normed once for EB dot products). */
int
cg_front_experts(const CgFrontSpec *s)
{
	for (int b = 1; b <= 8; b++)
		if (s->route.E % b == 0 && s->route.E / b <= front_sms(s))
			return b;
	return 1;
}

/* The warp's sum (shfl.sync.up scan, a fixed order), in lane 31. */
static LLVMValueRef
warp_sum31(Fr *r, LLVMValueRef v)
{
	CgFn *f = r->f;

	for (int d = 1; d < 32; d *= 2) {
		LLVMValueRef o = LLVMBuildBitCast(f->B, cg_shfl_up(f, LLVMBuildBitCast(f->B, v, f->ti32, ""), d),
						  f->tf32, "");
		o = cg_select(f, cg_lt(f, r->lane, cg_i32(f, d)), cg_f32(f, 0), o);
		v = LLVMBuildFAdd(f->B, o, v, "");
	}
	return v;
}

/*
 * Row elements a lane reads.  Vector rows (H a multiple of 256, W [E,H]):
 * group g of lane L is elements (32g + L)*8 .. +7, one 16-byte load of
 * bf16/f16 (two of f32), all of a batch issued before any is used; else
 * element 32j + L, one at a time.
 */
#define LV 8
#define BATCH 8		/* groups loaded before they are used */
#define BATCH_MAX 16	/* ... with CgFrontSpec.wide (a whole row of up to 4096 bf16) */
#define KEEP 8		/* W and gamma rows of up to this many groups stay in registers */

/* Vector rows: H a multiple of LV (16-byte groups), W [E,H]; a lane's groups,
 * the last one partial where 32 LV does not divide H (gpt-oss's 2880: 12,
 * the last in lanes 0-7 only).  0: strided rows. */
static int
groups(const CgFrontSpec *s)
{
	return !s->w_kn && s->H % LV == 0 ? (int)((s->H + 32 * LV - 1) / (32 * LV)) : 0;
}

/* Groups loaded before any is used: BATCH, or with CgFrontSpec.wide the
 * whole rows of a warp's tokens (one or a pair) where they make more than
 * BATCH groups and at most BATCH_MAX, one expert a CTA (Mixtral's 4096 and
 * gpt-oss's 2880 a token, Qwen3-30B-A3B's two rows of 2048): x's rows in one
 * round trip, gamma's (and W's, unless kept; loaded ahead) in another,
 * instead of two each.  The same sums in the same order: only when the loads
 * are issued changes. */
static int
batch(const CgFrontSpec *s)
{
	int G = groups(s), nt;

	if (!s->wide || !s->pair || !G || cg_front_split(s) || cg_front_experts(s) != 1)
		return BATCH;
	nt = cg_front_pair(s);
	return G * nt > BATCH && G * nt <= BATCH_MAX ? G * nt : BATCH;
}

static void
load8(Fr *r, DType dt, LLVMValueRef base, LLVMValueRef at, LLVMValueRef *out)
{
	CgFn *f = r->f;
	int es = dtype_bits(dt) / 8;
	LLVMValueRef x;

	if (dt == DT_BF16) {	/* as words: an element is a shift or a mask (not unpack, widen, shift) */
		x = cg_gload(f, LLVMVectorType(f->ti32, LV / 2), cg_gep(f, base, at, 2), 16);
		for (int j = 0; j < LV / 2; j++) {
			LLVMValueRef w = LLVMBuildExtractElement(f->B, x, cg_i32(f, j), "");
			out[2 * j] = LLVMBuildBitCast(f->B, cg_shl(f, w, 16), f->tf32, "");
			out[2 * j + 1] = LLVMBuildBitCast(f->B, LLVMBuildAnd(f->B, w, cg_i32(f, (int32_t)0xffff0000u), ""),
							  f->tf32, "");
		}
		return;
	}
	x = cg_gload(f, LLVMVectorType(cg_raw_type(f, dt), LV), cg_gep(f, base, at, es), MIN(16, LV * es));
	for (int j = 0; j < LV; j++)
		out[j] = cg_to_f32(f, LLVMBuildExtractElement(f->B, x, cg_i32(f, j), ""), dt);
}

/* v rounded to dt, as cg_round_dt rounds it (to nearest even); bf16 with
 * one cvt.rn.bf16.f32 on the device instead of the integer sequence
 * (the same bits: the operand is a product, never a NaN with a payload
 * the device would keep). */
static LLVMValueRef
round_to(CgFn *f, LLVMValueRef v, DType dt)
{
	if (dt == DT_BF16)
		return cg_to_f32(f, cg_from_f32(f, v, dt), dt);
	return cg_round_dt(f, v, dt);
}

/* Element index (i64) of group g's first element, from row start row. */
static LLVMValueRef
group_at(Fr *r, LLVMValueRef row, int g)
{
	LLVMValueRef v = cg_addi(r->f, r->lane, 32 * g);

	if (r->g0)	/* split: the warp's share of the row starts at group g0 */
		v = cg_add(r->f, v, cg_muli(r->f, r->g0, 32));
	return cg_add(r->f, row, cg_sext64(r->f, cg_muli(r->f, v, LV)));
}

/* Whether the lane's group g lies in the row: NULL where every lane's does
 * (all groups but a partial last one; split rows are whole). */
static LLVMValueRef
group_ok(Fr *r, int g)
{
	if (g < r->ng - 1 || r->s->H % (32 * LV) == 0)
		return NULL;
	return cg_lt(r->f, cg_addi(r->f, r->lane, 32 * g), cg_i32(r->f, (int)(r->s->H / LV)));
}

/* The lane's group g of the row at element `row` (i64): its LV values, zeros
 * past the row's end (the load then reads the row's first group). */
static void
load_group(Fr *r, DType dt, LLVMValueRef base, LLVMValueRef row, int g, LLVMValueRef *out)
{
	CgFn *f = r->f;
	LLVMValueRef ok = group_ok(r, g);

	load8(r, dt, base, ok ? cg_select(f, ok, group_at(r, row, g), row) : group_at(r, row, g), out);
	for (int j = 0; ok && j < LV; j++)
		out[j] = cg_select(f, ok, out[j], cg_f32(f, 0));
}

/* The CTA's W row and gamma, in registers when short (KEEP groups). */
static void
preload(Fr *r)
{
	int G = r->ng;
	LLVMValueRef wrow = cg_muli(r->f, cg_sext64(r->f, r->e), r->s->H);

	if (!G || G > KEEP || r->eb > 1)
		return;
	r->kept_g = r->s->norm && r->nt == 1;	/* two tokens: gamma's registers hold the second x */
	for (int g = 0; g < G; g++) {
		load_group(r, r->s->w_dt, r->w, wrow, g, &r->wk[g * LV]);
		if (r->kept_g)
			load_group(r, r->s->gamma_dt, r->gamma, cg_i64(r->f, 0), g, &r->gk[g * LV]);
	}
	r->kept = 1;
}

/*
 * Rows that are not vector rows: lane L's elements L, L + 32, ... in order,
 * 8 of them (a chunk of 256) loaded before any is used, then the rest one at
 * a time.  The loop over the chunks (tail 0: i is the chunk's first element
 * of the lane) or over the rest (tail 1); the caller ends it.
 */
static LLVMValueRef
strided(Fr *r, CgLoop *l, int tail)
{
	CgFn *f = r->f;
	int64_t full = r->s->H / (32 * LV) * (32 * LV);
	LLVMValueRef lane = cg_sext64(f, r->lane);

	if (!tail)
		return cg_loop(f, l, lane, cg_i64(f, full), cg_i64(f, 32 * LV));
	return cg_loop(f, l, cg_addi(f, lane, full), cg_i64(f, r->s->H), cg_i64(f, 32));
}

/* The lane's sums of squares of the rows row[0 .. nt-1] of x (ss[t]; strided
 * rows: one), each in the lane's element order; the tokens' loads of a batch
 * are all issued before any is used. */
static void
sum_squares(Fr *r, const LLVMValueRef *row, LLVMValueRef *ss)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;
	const CgFrontSpec *s = r->s;
	int G = r->ng, nt = r->nt, per = MAX(1, batch(r->s) / nt);
	LLVMValueRef i, xv[BATCH_MAX * LV];
	CgLoop l;

	if (!G) {
		LLVMValueRef var = cg_var(f, f->tf32, cg_f32(f, 0));
		for (int tail = 0; tail < 2; tail++) {
			int n = tail ? 1 : LV;
			i = strided(r, &l, tail);
			for (int j = 0; j < n; j++)
				xv[j] = cg_load_dt(f, s->x_dt, r->x, cg_add(f, row[0], cg_addi(f, i, 32 * j)));
			for (int j = 0; j < n; j++)
				cg_set(f, var, LLVMBuildFAdd(B, cg_get(f, var), LLVMBuildFMul(B, xv[j], xv[j], ""), ""));
			cg_endloop(f, &l);
		}
		ss[0] = cg_get(f, var);
		return;
	}
	for (int t = 0; t < nt; t++)
		ss[t] = cg_f32(f, 0);
	for (int g0 = 0; g0 < G; g0 += per) {
		int n = MIN(per, G - g0);
		for (int t = 0; t < nt; t++)
			for (int g = 0; g < n; g++)
				load_group(r, s->x_dt, r->x, row[t], g0 + g, &xv[(t * n + g) * LV]);
		for (int t = 0; t < nt; t++)
			for (int j = 0; j < n * LV; j++) {
				LLVMValueRef x = xv[t * n * LV + j];
				ss[t] = LLVMBuildFAdd(B, ss[t], LLVMBuildFMul(B, x, x, ""), "");
			}
	}
}

/* The router's operand element: x, or the norm of x rounded as h is; stored
 * to h when this CTA owns the row. */
static LLVMValueRef
operand(Fr *r, LLVMValueRef a, LLVMValueRef g, LLVMValueRef inv, LLVMValueRef mine, LLVMValueRef at)
{
	CgFn *f = r->f;
	const CgFrontSpec *s = r->s;
	CgIf c;

	if (!s->norm)
		return a;
	a = round_to(f, LLVMBuildFMul(f->B, LLVMBuildFMul(f->B, a, inv, ""), g, ""), s->h_dt);
	if (s->hout_dt != s->h_dt && s->hout_dt != DT_F32)	/* the norm kernel's casts (widening: exact) */
		a = round_to(f, a, s->hout_dt);
	if (s->write_h) {
		cg_if(f, &c, mine);
		cg_store_dt(f, s->hout_dt, r->h, at, a);
		cg_endif(f, &c);
	}
	return a;
}

/* Vector rows: the groups of a batch of the dot products (each token's x,
 * the CTA's W rows and gamma loaded, then used). */
static int
dot_batch(const Fr *r)
{
	return MAX(1, batch(r->s) / (r->eb * r->nt));
}

/* Group g's elements of the W rows starting at wrow[] (unless kept) and of
 * gamma (unless kept), to slot q of the batch. */
static void
load_wg(Fr *r, const LLVMValueRef *wrow, int g, int q, LLVMValueRef (*wv)[BATCH_MAX * LV], LLVMValueRef *gv)
{
	for (int b = 0; b < r->eb && !r->kept; b++)
		load_group(r, r->s->w_dt, r->w, wrow[b], g, &wv[b][q * LV]);
	if (r->s->norm && !r->kept_g)
		load_group(r, r->s->gamma_dt, r->gamma, cg_i64(r->f, 0), g, &gv[q * LV]);
}

/* Element index (i64) of W[e + b]'s row, b < EB. */
static LLVMValueRef
w_row(Fr *r, int b)
{
	return cg_muli(r->f, cg_sext64(r->f, cg_addi(r->f, r->e, b)), r->s->H);
}

/* The lane's parts of the dot products of rows row[0 .. nt-1] (normed) with
 * W[e] .. W[e + EB - 1], in acc[t][]: each in the same element order as one
 * expert's and one token's; a batch's W and gamma loads serve every token.
 * wa, ga: the first batch's W and gamma, loaded ahead (or NULL).  Strided
 * rows: one token. */
static void
dot(Fr *r, const LLVMValueRef *row, const LLVMValueRef *inv, const LLVMValueRef *mine, LLVMValueRef (*acc)[8],
    LLVMValueRef (*wa)[BATCH_MAX * LV], LLVMValueRef *ga)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;
	const CgFrontSpec *s = r->s;
	int G = r->ng, EB = r->eb, nt = r->nt, nb = dot_batch(r);
	LLVMValueRef wrow[8], i;
	LLVMValueRef xv[BATCH_MAX * LV], wv[8][BATCH_MAX * LV], gv[BATCH_MAX * LV];
	CgLoop l;

	for (int b = 0; b < EB; b++) {
		wrow[b] = w_row(r, b);
		for (int t = 0; t < nt; t++)
			acc[t][b] = cg_f32(f, 0);
	}
	if (!G) {
		LLVMValueRef var[8];
		for (int b = 0; b < EB; b++)
			var[b] = cg_var(f, f->tf32, cg_f32(f, 0));
		for (int tail = 0; tail < 2; tail++) {
			int n = tail ? 1 : MAX(1, LV / EB);
			LLVMValueRef i0 = strided(r, &l, tail);
			for (int c = 0; c < (tail ? 1 : LV); c += n) {	/* n elements loaded, then used */
				for (int j = 0; j < n; j++) {
					i = cg_addi(f, i0, 32 * (c + j));
					xv[j] = cg_load_dt(f, s->x_dt, r->x, cg_add(f, row[0], i));
					gv[j] = s->norm ? cg_load_dt(f, s->gamma_dt, r->gamma, i) : NULL;
					for (int b = 0; b < EB; b++) {
						LLVMValueRef eb = cg_sext64(f, cg_addi(f, r->e, b));
						LLVMValueRef wi = s->w_kn ? cg_add(f, cg_muli(f, i, s->route.E), eb)
							: cg_add(f, wrow[b], i);
						wv[b][j] = cg_load_dt(f, s->w_dt, r->w, wi);
					}
				}
				for (int j = 0; j < n; j++) {
					i = cg_addi(f, i0, 32 * (c + j));
					LLVMValueRef a = operand(r, xv[j], gv[j], inv[0], mine[0], cg_add(f, row[0], i));
					for (int b = 0; b < EB; b++)
						cg_set(f, var[b], LLVMBuildFAdd(B, cg_get(f, var[b]),
										LLVMBuildFMul(B, a, wv[b][j], ""), ""));
				}
			}
			cg_endloop(f, &l);
		}
		for (int b = 0; b < EB; b++)
			acc[0][b] = cg_get(f, var[b]);
		return;
	}
	for (int g0 = 0; g0 < G; g0 += nb) {
		int n = MIN(nb, G - g0);
		for (int g = 0; g < n; g++) {
			for (int t = 0; t < nt; t++)
				load_group(r, s->x_dt, r->x, row[t], g0 + g, &xv[(t * n + g) * LV]);
			if (g0 || !wa)
				load_wg(r, wrow, g0 + g, g, wv, gv);
		}
		if (!g0 && wa) {	/* loaded ahead */
			memcpy(wv, wa, sizeof wv);
			memcpy(gv, ga, sizeof gv);
		}
		for (int t = 0; t < nt; t++)
			for (int g = 0; g < n; g++)
				for (int j = 0; j < LV; j++) {
					int q = g * LV + j, k = (g0 + g) * LV + j;
					LLVMValueRef at = cg_addi(f, group_at(r, row[t], g0 + g), j), ok = group_ok(r, g0 + g);
					LLVMValueRef a = operand(r, xv[t * n * LV + q],
								 s->norm ? (r->kept_g ? r->gk[k] : gv[q]) : NULL, inv[t],
								 ok ? LLVMBuildAnd(B, mine[t], ok, "") : mine[t], at);
					for (int b = 0; b < EB; b++)
						acc[t][b] = LLVMBuildFAdd(B, acc[t][b], LLVMBuildFMul(B, a, r->kept ? r->wk[k]
													 : wv[b][q], ""), "");
				}
	}
}

/* The warp's tokens tok[0 .. nt-1] (each clamped to T-1): their logits for
 * experts e .. e+EB-1, and of the rows this CTA owns (tok % (E/EB) == grp)
 * h and rstd. */
static void
tokens(Fr *r, const LLVMValueRef *tok)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;
	const CgFrontSpec *s = r->s;
	LLVMValueRef row[2], inv[2] = {NULL, NULL}, acc[2][8], active[2], mine[2], ss[2], bcast;
	LLVMValueRef wa[8][BATCH_MAX * LV], ga[BATCH_MAX * LV], wrow[8];
	int ahead = s->pair && r->ng;	/* the dot's first W and gamma loads before the sums of squares */
	CgIf c;

	for (int t = 0; t < r->nt; t++) {
		row[t] = cg_muli(f, cg_sext64(f, cg_min(f, tok[t], cg_addi(f, r->T, -1))), s->H);
		active[t] = cg_lt(f, tok[t], r->T);
		mine[t] = LLVMBuildAnd(B, active[t], LLVMBuildICmp(B, LLVMIntEQ,
								   cg_urem(f, tok[t], cg_i32(f, s->route.E / r->eb)),
								   r->grp, ""), "");
	}
	bcast = cg_sptr(f, cg_muli(f, r->warp, 4));
	memset(wa, 0, sizeof wa);
	memset(ga, 0, sizeof ga);
	for (int b = 0; ahead && b < r->eb; b++)
		wrow[b] = w_row(r, b);
	for (int g = 0; ahead && g < MIN(dot_batch(r), r->ng); g++)
		load_wg(r, wrow, g, g, wa, ga);
	if (s->norm || s->rstd)
		sum_squares(r, row, ss);
	for (int t = 0; t < r->nt && (s->norm || s->rstd); t++) {
		LLVMValueRef ms = warp_sum31(r, ss[t]);	/* every lane: a warp collective */
		if (s->pair)	/* lane 31's sum by shuffles */
			ms = cg_bcast31(r->f, ms);	/* no shared slot, no CTA barriers */
		else {		/* ... or through the warp's shared slot */
			cg_if(f, &c, LLVMBuildICmp(B, LLVMIntEQ, r->lane, cg_i32(f, 31), ""));
			cg_sstore(f, ms, bcast, 4);
			cg_endif(f, &c);
			cg_barrier(f);
			ms = cg_sload(f, f->tf32, bcast, 4);
		}
		ms = LLVMBuildFDiv(B, ms, cg_f32(f, (double)s->H), "");
		if (!s->pair)
			cg_barrier(f);	/* the slot is rewritten by the next token */
		if (s->norm)
			inv[t] = cg_inv_std(f, ms, s->eps);
		if (s->rstd) {
			LLVMValueRef inv_r = cg_inv_std(f, ms, s->rstd_eps);
			cg_if(f, &c, LLVMBuildAnd(B, mine[t], LLVMBuildICmp(B, LLVMIntEQ, r->lane, cg_i32(f, 0), ""),
						  ""));
			cg_gstore(f, inv_r, cg_gep(f, r->rstd, cg_sext64(f, tok[t]), 4), 4);
			cg_endif(f, &c);
		}
	}
	dot(r, row, inv, mine, acc, ahead ? wa : NULL, ga);
	for (int t = 0; t < r->nt; t++)
		for (int b = 0; b < r->eb; b++) {
			LLVMValueRef e = cg_sext64(f, cg_addi(f, r->e, b)), v = warp_sum31(r, acc[t][b]);
			if (s->bias)	/* the GEMM epilogue's add, before its rounding */
				v = LLVMBuildFAdd(B, v, cg_load_dt(f, s->bias_dt, r->bias, e), "");
			v = cg_round_dt(f, cg_round_dt(f, v, s->round_dt), s->logits_dt);
			cg_if(f, &c, LLVMBuildAnd(B, active[t], LLVMBuildICmp(B, LLVMIntEQ, r->lane, cg_i32(f, 31), ""),
						  ""));
			cg_store_dt(f, s->logits_dt, r->logits,
				    cg_add(f, cg_muli(f, cg_sext64(f, tok[t]), s->route.E), e), v);
			cg_endif(f, &c);
		}
}

/*
 * Split rows (cg_front_split: W = 4 warps, max_t <= 4, vector rows whose
 * groups the warps share, one expert a CTA): the CTA's warps take token tok
 * together, warp w the groups w G/W .. (w+1) G/W - 1 of its row.  Each
 * warp's sum (of squares, then of the products) goes to its slot, and the
 * slots are added in warp order: the sum of the row is ((s0 + s1) + s2) + s3,
 * each s_w in the lane order above.  At T = 1 a warp issues a quarter of
 * the row's instructions (1 warp a scheduler, ~9 cycles an instruction on
 * the H200: the row's ~990 instructions were the CTAs' 9200 cycles).
 */
static LLVMValueRef
split_sum(Fr *r, LLVMValueRef v, int slot0)
{
	CgFn *f = r->f;
	LLVMValueRef sum = NULL;
	CgIf c;

	v = warp_sum31(r, v);
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, r->lane, cg_i32(f, 31), ""));
	cg_sstore(f, v, cg_sptr(f, cg_addi(f, cg_muli(f, r->warp, 4), slot0)), 4);
	cg_endif(f, &c);
	cg_barrier(f);
	for (int w = 0; w < r->nw; w++) {
		LLVMValueRef x = cg_sload(f, f->tf32, cg_sptr(f, cg_i32(f, slot0 + 4 * w)), 4);
		sum = sum ? LLVMBuildFAdd(f->B, sum, x, "") : x;
	}
	return sum;
}

static void
token_split(Fr *r, LLVMValueRef tok)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;
	const CgFrontSpec *s = r->s;
	LLVMValueRef row = cg_muli(f, cg_sext64(f, tok), s->H), inv = NULL, acc[1][8], v;
	LLVMValueRef mine = LLVMBuildICmp(B, LLVMIntEQ, cg_urem(f, tok, cg_i32(f, s->route.E)), r->grp, "");
	CgIf c;

	if (s->norm || s->rstd) {	/* slots 0..W-1 */
		LLVMValueRef ss, ms;
		sum_squares(r, &row, &ss);
		ms = LLVMBuildFDiv(B, split_sum(r, ss, 0), cg_f32(f, (double)s->H), "");
		if (s->norm)
			inv = cg_inv_std(f, ms, s->eps);
		if (s->rstd) {
			LLVMValueRef inv_r = cg_inv_std(f, ms, s->rstd_eps);
			cg_if(f, &c, LLVMBuildAnd(B, mine, LLVMBuildICmp(B, LLVMIntEQ, cg_tid(f, 0), cg_i32(f, 0), ""), ""));
			cg_gstore(f, inv_r, cg_gep(f, r->rstd, cg_sext64(f, tok), 4), 4);
			cg_endif(f, &c);
		}
	}
	dot(r, &row, &inv, &mine, acc, NULL, NULL);
	v = split_sum(r, acc[0][0], 4 * r->nw);	/* slots W..2W-1 */
	if (s->bias)	/* the GEMM epilogue's add, before its rounding */
		v = LLVMBuildFAdd(B, v, cg_load_dt(f, s->bias_dt, r->bias, cg_sext64(f, r->e)), "");
	v = cg_round_dt(f, cg_round_dt(f, v, s->round_dt), s->logits_dt);
	cg_if(f, &c, LLVMBuildICmp(B, LLVMIntEQ, cg_tid(f, 0), cg_i32(f, 0), ""));
	cg_store_dt(f, s->logits_dt, r->logits, cg_add(f, cg_muli(f, cg_sext64(f, tok), s->route.E),
							cg_sext64(f, r->e)), v);
	cg_endif(f, &c);
	cg_barrier(f);	/* the slots are rewritten by the next token */
}

int
cg_front_split(const CgFrontSpec *s)
{
	int G = groups(s);

	return s->split && s->max_t <= 4 && G >= 4 && G % 4 == 0 && s->H % (32 * LV) == 0 &&
	       cg_front_experts(s) == 1;
}

/* The last CTA: wait for (and clear) every other CTA's flag, then a fence
 * (with the spec's acq_rel an acquire of what the flags released) and the
 * barrier. */
static void
gather_flags(Fr *r)
{
	CgFn *f = r->f;
	CgLoop l;
	LLVMValueRef i = cg_loop(f, &l, cg_tid(f, 0), cg_i32(f, cg_front_ctas(r->s) - 1), cg_i32(f, 32 * r->nw));
	LLVMValueRef at = cg_gep(f, r->flags, cg_sext64(f, i), 4);

	cg_spin_until(f, at, cg_i32(f, 1));
	cg_gstore_volatile(f, cg_i32(f, 0), at, 4);
	cg_endloop(f, &l);
	if (r->s->acq_rel)
		cg_fence_acq_rel(f);
	else
		cg_fence(f);
	cg_barrier(f);
}

/* CgFrontSpec.ticket where the route takes more than one round of W tokens
 * (T = 16: two): every line of the logits toward L1 before the first, so the
 * later rounds' loads (after a barrier each) do not wait for L2 again. */
static void
prefetch_logits(Fr *r)
{
	CgFn *f = r->f;
	int es = dtype_bits(r->s->logits_dt) / 8, nthr = 32 * r->nw;
	LLVMValueRef bytes = cg_muli(f, r->T, (int64_t)r->s->route.E * es);
	CgLoop l;
	LLVMValueRef i = cg_loop(f, &l, cg_muli(f, cg_tid(f, 0), 128), bytes, cg_i32(f, 128 * nthr));

	cg_prefetch_l1(f, cg_gep(f, r->logits, cg_sext64(f, i), 1));
	cg_endloop(f, &l);
}

/* CgFrontSpec.ticket with the small sort: the byte where the route's ids
 * are also stored in shared memory, after the route's own (its warps write
 * them while others still use their slots), for the sort to read them there
 * instead of back from memory (a round trip); its buckets come after them.
 * 0: none. */
static int
ids_smem(const CgFrontSpec *s)
{
	if (!s->ticket || !cg_permute_small(&s->perm, 32 * route_warps(s), s->max_t * s->perm.k))
		return 0;
	return (SMEM0 + cg_route_smem(&s->route, route_warps(s)) + 15) & ~15;
}

/* Where the permute's shared memory starts. */
static int
perm_smem0(const CgFrontSpec *s)
{
	int at = ids_smem(s);

	return at ? (at + 4 * (int)(s->max_t * s->perm.k) + 15) & ~15 : SMEM0;
}

static void
last_cta(Fr *r)
{
	CgFn *f = r->f;
	const CgFrontSpec *s = r->s;
	CgRouteIo rio = {r->logits, r->selbias, r->weights, r->ids, r->T, ids_smem(s)};
	CgPermuteIo pio = {r->ids, r->offs, r->rows, r->pos, r->T, ids_smem(s)};
	CgLoop l;
	LLVMValueRef i;

	if (!s->ticket)
		gather_flags(r);
	else if (s->max_t > r->nw)
		prefetch_logits(r);
	cg_route_tokens(f, &s->route, r->nw, SMEM0, &rio);
	cg_permute_block(f, &s->perm, 32 * r->nw, s->max_t * s->perm.k, perm_smem0(s), &pio);
	if (s->ticket)	/* every CTA zeroed them at its start */
		return;
	i = cg_loop(f, &l, cg_tid(f, 0), r->zero_words, cg_i32(f, 32 * r->nw));
	cg_gstore(f, cg_i32(f, 0), cg_gep(f, r->flags, cg_sext64(f, i), 4), 4);
	cg_endloop(f, &l);
}

/*
 * CgFrontSpec.ticket: the flags of the split GEMMs after the front,
 * flags[ctas .. zero_words), zeroed by the whole grid at its start, a word a
 * thread (the GEMMs that used them have completed: the grid dependency
 * before any access; the next kernel reads them only once this one has
 * completed), so the last CTA's tail does not.  The front's own words
 * [0, ctas) are not touched: word 0 is the ticket, the others stay 0.
 */
static void
zero_chain(Fr *r)
{
	CgFn *f = r->f;
	int n = cg_front_ctas(r->s), nthr = 32 * r->nw;
	LLVMValueRef i0 = cg_addi(f, cg_add(f, cg_muli(f, r->cta, nthr), cg_tid(f, 0)), n);
	CgLoop l;
	LLVMValueRef i = cg_loop(f, &l, i0, r->zero_words, cg_i32(f, n * nthr));

	cg_gstore(f, cg_i32(f, 0), cg_gep(f, r->flags, cg_sext64(f, i), 4), 4);
	cg_endloop(f, &l);
}

/*
 * CgFrontSpec.ticket: thread 0 of each CTA, after the CTA's barrier,
 * releases the CTA's results (fence.acq_rel.gpu), adds 1 to flags[0] and,
 * where it drew the last ticket (ctas - 1), resets the counter to 0 and
 * acquires the others' results (the fence again): that CTA routes, whichever
 * it is.  The CTA learns its draw through shared slot 0 (free after the
 * barrier: every warp's broadcasts are read) and a second barrier.  No
 * flag a CTA to wait for and clear, nothing waits for a CTA still running;
 * the routing reads the same logits through the same code: the same bits.
 */
static LLVMValueRef
draw_ticket(Fr *r)
{
	return cg_last_cta(r->f, cg_tid(r->f, 0), r->flags, cg_i32(r->f, cg_front_ctas(r->s)));
}

/* After the CTA's barrier: the last CTA to finish (ticket) or the last
 * launched (flags) routes and sorts; the others hand their logits over. */
static void
hand_over(Fr *r)
{
	CgFn *f = r->f;
	CgIf c, c0;

	if (r->s->ticket) {
		cg_if(f, &c, draw_ticket(r));
		last_cta(r);
		cg_endif(f, &c);
		return;
	}
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, r->cta, cg_i32(f, cg_front_ctas(r->s) - 1), ""));
	last_cta(r);
	cg_else(f, &c);
	cg_if(f, &c0, LLVMBuildICmp(f->B, LLVMIntEQ, cg_tid(f, 0), cg_i32(f, 0), ""));
	if (r->s->acq_rel)	/* the barrier, then thread 0's release of the CTA's results */
		cg_fence_acq_rel(f);
	cg_gstore_volatile(f, cg_i32(f, 1), cg_gep(f, r->flags, cg_sext64(f, r->cta), 4), 4);
	cg_endif(f, &c0);
	cg_endif(f, &c);
}

/* Token slices: each group of EB experts' tokens in S slices of W (one token
 * per warp) so that a few experts (Mixtral's 8) still fill the SMs:
 * S = min(SMs / (E / EB), cdiv(max_t, W)). */
static int
slices(const CgFrontSpec *s)
{
	int ne = s->route.E / cg_front_experts(s);

	return (int)MAX(1, MIN(front_sms(s) / ne, (s->max_t + nwarps(s) - 1) / nwarps(s)));
}

int
cg_front_ctas(const CgFrontSpec *s)
{
	return s->route.E / cg_front_experts(s) * slices(s);
}

/* Tokens a warp takes at a time: 2 with --debug=front-pair where a warp gets
 * more than one (max_t > W S: Qwen3-30B-A3B's front at T = 16, one slice of
 * 8 warps), the rows are vector rows and a CTA has one expert; else 1.
 * (DeepSeek-V3's two experts a CTA already make two chains a token, and its
 * pairs spilled: 128 registers and 4.7 KB of spill stores, against 254 and
 * none.) */
int
cg_front_pair(const CgFrontSpec *s)
{
	return s->pair && groups(s) && !cg_front_split(s) && cg_front_experts(s) == 1 &&
	       s->max_t > (int64_t)nwarps(s) * slices(s) ? 2 : 1;
}

int
cg_front_smem(const CgFrontSpec *s)
{
	int route = cg_route_smem(&s->route, route_warps(s));
	int perm = cg_permute_smem(&s->perm, 32 * route_warps(s), s->max_t * s->perm.k);

	if (ids_smem(s))	/* route, ids, permute one after another */
		return perm_smem0(s) + perm;
	return SMEM0 + MAX(route, perm);
}

int
cg_emit_front(CgModule *m, const char *name, const CgFrontSpec *s, Diag *d)
{
	CgParam p[16];
	int np = 0, block[3] = {32 * route_warps(s), 1, 1}, smem;
	CgExpr grid[3] = {CG_EXPR_INT(s->part == 2 ? 1 : cg_front_ctas(s)), CG_EXPR_INT(1), CG_EXPR_INT(1)};
	char note[200];
	LLVMValueRef *slot[16];
	CgLoop l;
	Fr r;

	memset(&r, 0, sizeof r);
	if (cg_front_check(s, d) < 0)
		return -1;
	r.s = s;
	smem = cg_front_smem(s);
#define P(kind, role, field) (slot[np] = &r.field, p[np++] = (CgParam){kind, role})
	P(CGP_PTR, "x", x);
	if (s->norm)
		P(CGP_PTR, "gamma", gamma);
	P(CGP_PTR, "w_router", w);
	if (s->bias)
		P(CGP_PTR, "bias", bias);
	if (s->route.has_selbias)
		P(CGP_PTR, "selbias", selbias);
	if (s->write_h)
		P(CGP_PTR, "h", h);
	if (s->rstd)
		P(CGP_PTR, "rstd", rstd);
	P(CGP_PTR, "logits", logits);
	P(CGP_PTR, "weights", weights);
	P(CGP_PTR, "ids", ids);
	P(CGP_PTR, "offsets", offs);
	P(CGP_PTR, "rows", rows);
	if (s->perm.want_pos)
		P(CGP_PTR, "pos", pos);
	P(CGP_PTR, "flags", flags);
	P(CGP_I32, "zero_words", zero_words);
	P(CGP_I32, "T", T);
#undef P
	r.nw = route_warps(s);	/* nwarps(s) but in part 2 */
	r.eb = cg_front_experts(s);
	r.f = cg_fn_begin(m, name, p, np, 32 * r.nw, 0, d);
	if (!r.f)
		return -1;
	for (int i = 0; i < np; i++)
		*slot[i] = cg_arg(r.f, i);
	r.lane = cg_and(r.f, cg_tid(r.f, 0), 31);
	r.warp = cg_shr(r.f, cg_tid(r.f, 0), 5);
	r.cta = cg_ctaid(r.f, 0);
	r.grp = cg_urem(r.f, r.cta, cg_i32(r.f, s->route.E / r.eb));
	r.e = cg_muli(r.f, r.grp, r.eb);
	r.ng = groups(s);
	r.nt = cg_front_pair(s);
	if (cg_front_split(s)) {
		r.ng /= r.nw;
		r.g0 = cg_muli(r.f, r.warp, r.ng);
	}
	if (s->part == 2) {	/* the route and sort alone: part 1's logits are out (the grid dependency) */
		last_cta(&r);
		goto done;
	}
	if (s->ticket)
		zero_chain(&r);
	preload(&r);

	if (r.g0) {	/* split: the CTA's warps take each token together (one slice: S = 1) */
		LLVMValueRef tok = cg_loop(r.f, &l, cg_i32(r.f, 0), r.T, cg_i32(r.f, 1));
		token_split(&r, tok);
		cg_endloop(r.f, &l);
	} else {	/* CTA (slice, grp) takes tokens W slice + w, then W S later, ... (nt at a time) */
		int step = r.nw * slices(s);
		LLVMValueRef tok[2], tok0 = cg_loop(r.f, &l, cg_muli(r.f, cg_udiv(r.f, r.cta, cg_i32(r.f, s->route.E / r.eb)),
								      r.nw), r.T, cg_i32(r.f, step * r.nt));
		tok[0] = cg_add(r.f, tok0, r.warp);
		tok[1] = cg_addi(r.f, tok[0], step);
		tokens(&r, tok);
		cg_endloop(r.f, &l);
	}
	if (s->part == 0) {	/* part 1 hands over by completing */
		if (!s->acq_rel)	/* every thread's fence.sc, then the barrier */
			cg_fence(r.f);
		cg_barrier(r.f);
		hand_over(&r);
	}
done:
	if (s->part == 2) {
		snprintf(note, sizeof note, "front part 2 of 2: route and sort E=%d k=%d T<=%lld", s->route.E,
			 s->route.k, (long long)s->max_t);
		return cg_fn_end(r.f, block, grid, smem, note);
	}
	snprintf(note, sizeof note, "front%s H=%lld E=%d (%d a CTA) k=%d%s%s%s%s T<=%lld%s%s%s",
		 s->part == 1 ? " part 1 of 2 (experts)" : "", (long long)s->H,
		 s->route.E, r.eb, s->route.k, s->norm ? " rms_norm" : "", s->rstd ? " rstd" : "",
		 s->write_h ? " h" : "", s->bias ? " bias" : "", (long long)s->max_t,
		 r.g0 ? " rows split over the warps" : r.nt > 1 ? " tokens in pairs" : "",
		 batch(s) > BATCH ? " whole rows a batch" : "", s->ticket ? " ticket" : "");
	return cg_fn_end(r.f, block, grid, smem, note);
}

/* --- which calls of the main graph make a front ------------------------------ */

/* The kernel's one node of op (constants aside), or NULL. */
const Node *
cg_only_node(const Graph *k, Op op)
{
	const Node *found = NULL;

	for (const Node *n = k->first; n; n = n->next) {
		if (n->op == OP_CONST)
			continue;
		if (n->op != op || found)
			return NULL;
		found = n;
	}
	return found;
}

/* Does anything in g but `but` (or g's results) read v? */
static int
read_elsewhere(const Graph *g, const Value *v, const Node *but)
{
	for (const Node *n = g->first; n; n = n->next)
		for (int i = 0; n != but && i < n->nin; i++)
			if (n->in[i] == v)
				return 1;
	for (int i = 0; i < g->nret; i++)
		if (g->ret[i] == v)
			return 1;
	return 0;
}

static int
why(char *buf, size_t n, const char *s)
{
	snprintf(buf, n, "%s", s);
	return 0;
}

/* A row kernel rms_norm(p0, p1) over the last axis [-> a cast] -> ret, rows of H (k_norm.c). */
static int
norm_body(const Node *call, CgFrontSpec *s)
{
	CgNormSpec ns;

	memset(&ns, 0, sizeof ns);
	if (!cg_norm_body(call, &ns) || ns.H != s->H)
		return 0;
	s->eps = ns.eps;
	s->gamma_dt = ns.gamma_dt;
	s->h_dt = ns.h_dt;
	s->hout_dt = ns.hout_dt;
	return 1;
}

/* The router GEMM's body: matmul(p0, p1, to=f32) [-> cast -> cast] -> ret. */
static int
gemm_body(const Node *call, CgFrontSpec *s, char *buf, size_t n)
{
	const Graph *k = call->callee;
	const Node *mm = NULL;
	const Value *v = NULL;

	for (const Node *x = k->first; x; x = x->next) {
		if (x->op == OP_CONST)
			continue;
		if (!mm) {
			if (x->op != OP_MATMUL || x->nin < 2 || x->nin > 3 || cg_param_index(k, x->in[0]) != 0 ||
			    cg_param_index(k, x->in[1]) != 1 || x->out[0]->type.dt != DT_F32 ||
			    (x->nin == 3 && x->in[2] && cg_param_index(k, x->in[2]) != 2))
				return why(buf, n, "the router GEMM is not a plain matmul to f32");
			mm = x;
			v = x->out[0];
			continue;
		}
		if (x->op != OP_CAST || x->in[0] != v || !io_float(x->out[0]->type.dt))
			return why(buf, n, "the router GEMM has an epilogue other than casts");
		if (x->out[0]->type.dt != DT_F32)	/* the narrowest rounding wins */
			s->round_dt = x->out[0]->type.dt;
		v = x->out[0];
	}
	if (!mm || k->nret != 1 || k->ret[0] != v)
		return why(buf, n, "the router GEMM returns something else");
	const Type *a = &mm->in[0]->type, *b = &mm->in[1]->type;
	s->w_kn = !ir_attr_int(mm, "trans_b", 0);
	if (a->rank != 2 || b->rank != 2 || !ir_dim_is_static(a->dim[1]) ||
	    b->dim[s->w_kn ? 0 : 1] != a->dim[1] || !ir_dim_is_static(b->dim[0]) ||
	    !ir_dim_is_static(b->dim[1]) || !io_float(a->dt) || !io_float(b->dt))
		return why(buf, n, "the router GEMM's operands are not [T,H] and a static [E,H]");
	if (mm->nin == 3 && mm->in[2]) {	/* a bias [E] or [1,E], added before the rounding */
		const Type *c = &mm->in[2]->type;
		int64_t E = b->dim[s->w_kn ? 1 : 0];
		if (!(c->rank == 1 && c->dim[0] == E) && !(c->rank == 2 && c->dim[0] == 1 && c->dim[1] == E))
			return why(buf, n, "the router GEMM's bias is not one value per expert");
		s->bias = 1;
		s->bias_dt = c->dt;
	}
	s->H = a->dim[1];
	s->x_dt = a->dt;
	s->w_dt = b->dt;
	s->logits_dt = v->type.dt;
	return 1;
}

/* The front runs at its first call: is each of its operands computed before it? */
static int
ready_before(const Graph *g, const CgFrontMatch *fm)
{
	const Value *in[5] = {fm->x, fm->gamma, fm->w, fm->bias, fm->selbias};
	const Node *first = NULL;

	for (const Node *n = g->first; n && !first; n = n->next)
		if (n == fm->norm || n == fm->rstd_call || n == fm->gemm || n == fm->route || n == fm->perm)
			first = n;
	for (int i = 0; i < 5; i++) {
		if (!in[i] || in[i]->kind != V_RESULT || ir_weight_only(in[i]))	/* weights: computed at init */
			continue;
		const Node *n = g->first;
		while (n && n != in[i]->def && n != first)
			n = n->next;
		if (n != in[i]->def)
			return 0;
	}
	return 1;
}

int
cg_front_match(const Module *m, const Node *route_call, int64_t max_t, CgFrontMatch *fm,
	       char *buf, size_t n)
{
	const Graph *g = route_call->callee ? ir_main_graph(m) : NULL;
	const Node *r, *pm, *gc, *nc = NULL;
	CgFrontSpec *s = &fm->s;
	Diag quiet;

	memset(fm, 0, sizeof *fm);
	diag_init(&quiet, NULL);
	s->round_dt = DT_F32;
	if (!g || ir_kernel_template(route_call->callee) != IR_TMPL_ROUTE ||
	    !(r = cg_only_node(route_call->callee, OP_ROUTE)))
		return why(buf, n, "not a route kernel");
	if (max_t > CG_FRONT_MAX_T)
		return why(buf, n, "max_tokens is above the decode range");
	if (cg_route_spec(r, &s->route, &quiet) || route_call->nout != 2 ||
	    cg_param_index(route_call->callee, r->in[0]) != 0 ||
	    (s->route.has_selbias && cg_param_index(route_call->callee, r->in[1]) != 1))
		return why(buf, n, "the route kernel reads something else");
	/* the permute of its ids, anywhere after it */
	for (pm = route_call->next; pm; pm = pm->next)
		if (pm->op == OP_CALL && pm->nin == 1 && pm->in[0] == route_call->out[1])
			break;
	const Node *pn = pm && ir_kernel_template(pm->callee) == IR_TMPL_PERMUTE
		? cg_only_node(pm->callee, OP_PERMUTE) : NULL;
	if (!pn || cg_permute_spec(pn, &s->perm, &quiet))
		return why(buf, n, "its ids are not permuted by a permute kernel");
	s->perm.want_pos = pm->callee->nret > 2;
	gc = route_call->in[0]->kind == V_RESULT ? route_call->in[0]->def : NULL;
	if (!gc || gc->op != OP_CALL || ir_kernel_template(gc->callee) != IR_TMPL_GEMM || gc->nout != 1 ||
	    gc->nin < 2 || gc->nin > 3)
		return why(buf, n, "its logits are not computed by a GEMM kernel");
	if (!gemm_body(gc, s, buf, n))
		return 0;
	if (gc->in[1]->type.dim[s->w_kn ? 1 : 0] != s->route.E)
		return why(buf, n, "the router weight's experts are not the route's");
	fm->x = gc->in[0];
	/* the norm feeding the router, when a row kernel computes it from x alone */
	if (fm->x->kind == V_RESULT && fm->x->def->op == OP_CALL && fm->x->def->nin == 2 &&
	    norm_body(fm->x->def, s)) {
		nc = fm->x->def;
		s->norm = 1;
		fm->h = fm->x;
		fm->x = nc->in[0];
		fm->gamma = nc->in[1];
		s->x_dt = fm->x->type.dt;
		s->write_h = read_elsewhere(g, fm->h, gc);
	}
	/* an rstd kernel of the same rows (a norm folded into a GEMM elsewhere) */
	for (const Node *c = g->first; c && s->norm; c = c->next) {
		const Node *rn = c->op == OP_CALL && c->nin == 1 && c->in[0] == fm->x ? cg_row_op(c, OP_RSTD, s->H)
			: NULL;
		if (rn && !ir_attr_int(rn, "center", 0) && rn->out[0]->type.dt == DT_F32 &&
		    c->callee->nret == 1) {
			fm->rstd_call = c;
			fm->rstd_out = c->out[0];
			s->rstd = 1;
			s->rstd_eps = ir_attr_float(rn, "eps", 1e-5);
			break;
		}
	}
	fm->norm = nc;
	fm->gemm = gc;
	fm->route = route_call;
	fm->perm = pm;
	fm->w = gc->in[1];
	fm->bias = s->bias ? gc->in[2] : NULL;
	fm->selbias = s->route.has_selbias ? route_call->in[1] : NULL;
	fm->logits = gc->out[0];
	s->max_t = max_t;
	if (!ready_before(g, fm))
		return why(buf, n, "an operand (the router weight or bias, gamma or the selection bias) is "
			   "computed after the norm or the router GEMM");
	if (cg_front_check(s, &quiet))
		return why(buf, n, quiet.last);
	return 1;
}
