/*
 * gemm_harness.c — the GEMM tests' shared harness (see gemm_harness.h).
 * A case is emitted for the "emu" target, its inputs drawn in a fixed
 * order (A, B, gather and scatter permutations, epilogue leaves) from its
 * seed, its outputs poisoned with NaN, and the kernel run with every
 * buffer's bounds known to the emulator.  The reference reads the same
 * inputs in double, so only the kernel's arithmetic separates the two.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_harness.h"
#include "passes.h"

const char *const gh_targets[3] = {"sm_80", "sm_90", "sm_90a"};

/* ---- random data ---- */

static uint64_t rng_state;

void
gh_seed(uint64_t seed)
{
	rng_state = seed;
}

double
gh_urand(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

/* magnitude in [scale/8, scale), random sign */
static double
gh_nzrand(double scale)
{
	double u = gh_urand();

	return (u < 0 ? -1 : 1) * scale * (0.125 + 0.875 * fabs(u));
}

static void *
fill(DType dt, size_t n, double scale, GhFill how)
{
	void *p = calloc(n ? n : 1, dtype_bytes(dt, 1));

	for (size_t i = 0; i < n; i++)
		dtype_store(dt, p, i, how == GH_UNIFORM ? gh_urand() * scale : gh_nzrand(scale));
	return p;
}

void *
gh_rand(DType dt, size_t n, double scale)
{
	return fill(dt, n, scale, GH_UNIFORM);
}

static void
gh_shuffle(int *v, int n)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)((gh_urand() + 1) / 2 * (i + 1)) % (i + 1), t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
}

/* ---- specs ---- */

void
gh_tiles(GemmSpec *s, int bm, int bn, int bk, int wm, int wn, int st)
{
	s->bm = bm;
	s->bn = bn;
	s->bk = bk;
	s->warps_m = wm;
	s->warps_n = wn;
	s->stages = st;
}

void
gh_bias_gelu(GemmSpec *s, DType bias_dt)
{
	CgEpilogue *e = &s->ep;
	int a = cg_ep_acc(e), b = cg_ep_col(e, bias_dt, 0, "bias");

	cg_ep_op(e, OP_GELU, cg_ep_op(e, OP_ADD, a, b), -1);
}

static void
sizes(GemmSpec *s, int64_t N, int64_t K, int E)
{
	cg_gemm_default(s);
	s->N = N;
	s->K = K;
	s->groups = E;
}

void
gh_spec_dense_bias_gelu(GemmSpec *s, int64_t N, int64_t K)
{
	sizes(s, N, K, 0);
	gh_bias_gelu(s, DT_BF16);
}

void
gh_spec_grouped_swiglu(GemmSpec *s, int E, int64_t N, int64_t K, int topk)
{
	sizes(s, N, K, E);
	s->m_per_t = topk;
	s->gather = 1;
	s->gather_div = topk;
	cg_ep_swiglu(&s->ep, cg_ep_acc(&s->ep), NULL);
}

void
gh_spec_grouped_scale_scatter(GemmSpec *s, int E, int64_t N, int64_t K)
{
	int a, w;

	sizes(s, N, K, E);
	s->store = CG_STORE_SCATTER;
	a = cg_ep_acc(&s->ep);
	w = cg_ep_row(&s->ep, DT_F32, CGR_SCATTER, "route_w");
	cg_ep_op(&s->ep, OP_MUL, a, w);
}

void
gh_spec_expert_bias_swiglu(GemmSpec *s, int E, int64_t N, int64_t K)
{
	int a, b;

	sizes(s, N, K, E);
	a = cg_ep_acc(&s->ep);
	b = cg_ep_col(&s->ep, DT_BF16, N, "bias");	/* per-expert bias */
	cg_ep_swiglu(&s->ep, cg_ep_op(&s->ep, OP_ADD, a, b), &gh_oai);
}

void
gh_spec_kn_residual(GemmSpec *s, int64_t N, int64_t K, DType dt)
{
	int a, r;

	sizes(s, N, K, 0);
	s->a_dt = s->b_dt = s->c_dt = dt;
	s->b_layout = CG_B_KN;
	a = cg_ep_acc(&s->ep);
	r = cg_ep_mat(&s->ep, dt, 0, CGR_DIRECT, "residual");
	cg_ep_op(&s->ep, OP_ADD, a, r);
}

void
gh_spec_two_mats(GemmSpec *s, int64_t N, int64_t K, int swiglu)
{
	int a, m, r;

	sizes(s, N, K, 0);
	a = cg_ep_acc(&s->ep);
	m = cg_ep_mat(&s->ep, DT_F32, 0, CGR_DIRECT, "moe");
	a = cg_ep_op(&s->ep, OP_ADD, a, m);
	if (swiglu)
		a = cg_ep_swiglu(&s->ep, a, NULL);
	r = cg_ep_mat(&s->ep, DT_BF16, 0, CGR_DIRECT, "residual");
	cg_ep_op(&s->ep, OP_ADD, a, r);
}

/* ---- one case: inputs, the emulator run ---- */

static int *
permutation(int M)
{
	int *v = malloc(sizeof(int) * (size_t)(M ? M : 1));

	for (int i = 0; i < M; i++)
		v[i] = i;
	gh_shuffle(v, M);
	return v;
}

/* Elements of B the kernel may read: up to the last row's end, no padding after it. */
static size_t
b_elems(const GemmSpec *s, int E)
{
	int64_t rows = s->b_layout == CG_B_NK ? s->N : s->K;

	return (size_t)((int64_t)(E - 1) * s->b_group_stride + (rows - 1) * s->ldb +
			(s->b_layout == CG_B_NK ? s->K : s->N));
}

/* Elements of epilogue leaf i (0 for instructions that load nothing). */
static size_t
leaf_elems(const GemmRun *r, int i)
{
	const CgEpInst *in = &r->s.ep.in[i];
	int64_t space = r->sw >= 0 && i > r->sw ? r->width : r->s.N;	/* its column space */
	size_t rows = (size_t)(in->rows == CGR_GATHER ? r->msrc : r->M);

	switch (in->op) {
	case CGE_COL: return (size_t)(in->group_stride ? (r->E - 1) * in->group_stride + space : space);
	case CGE_ROW: return rows;
	case CGE_MAT: return rows * (size_t)(in->ld ? in->ld : space);
	default: return 0;
	}
}

/* The last MAT leaf with C's type and bytes (the one an in-place case reads from C), or -1. */
static int
in_place_leaf(const GemmRun *r)
{
	for (int i = r->s.ep.n - 1; i >= 0; i--)
		if (r->s.ep.in[i].op == CGE_MAT && r->s.ep.in[i].dt == r->s.c_dt &&
		    leaf_elems(r, i) * dtype_bytes(r->s.c_dt, 1) == r->cbytes)
			return i;
	return -1;
}

/*
 * Quantised B: q, scales and zero points in the IR's layout ([E][N][K],
 * [E][N][K/group] twice) from the seed, dequantised as the dequantize op
 * does (then rounded to A's type, which the mma reads, unless bq_exact) for the reference,
 * and packed by cg_bq_pack for the kernel.
 */
static int
inputs_bq(GemmRun *r, const GemmCase *c, double bs)
{
	const GemmSpec *s = &r->s;
	size_t nq = (size_t)r->E * (size_t)s->N * (size_t)s->K, ns = nq / (size_t)s->bq.group;
	DType zdt = c->bq_zero_dt ? c->bq_zero_dt : s->b_dt;
	int isf = dtype_is_float(s->b_dt);
	double qmax = isf ? 2 : s->b_dt == DT_I4 ? 8 : s->b_dt == DT_U4 ? 15 : s->b_dt == DT_I8 ? 128 : 255;
	void *q = calloc(dtype_bytes(s->b_dt, nq) + 1, 1), *sc = calloc(ns ? ns : 1, 8);
	void *z = s->bq.zero ? calloc(dtype_bytes(zdt, ns) + 1, 1) : NULL;
	Diag d;
	int rc;

	for (size_t i = 0; i < nq; i++) {
		double u = (gh_urand() + 1) / 2;
		if (isf)
			dtype_store(s->b_dt, q, i, (2 * u - 1) * qmax);
		else if (dtype_flags(s->b_dt) & DTF_SIGNED)
			dtype_store(s->b_dt, q, i, floor(u * 2 * qmax) - qmax);
		else
			dtype_store(s->b_dt, q, i, floor(u * (qmax + 1)));
	}
	for (size_t i = 0; i < ns; i++) {
		dtype_store(s->bq.scale_dt, sc, i, bs / qmax * (0.5 + (gh_urand() + 1) / 2));
		if (z && isf)
			dtype_store(zdt, z, i, gh_urand() * 0.25);
		else if (z)
			dtype_store(zdt, z, i, floor((gh_urand() + 1) / 2 * qmax) + (dtype_flags(zdt) & DTF_SIGNED ? -floor(qmax / 2) : 0));
	}
	r->Bdq = malloc(sizeof(double) * (nq ? nq : 1));
	for (size_t i = 0; i < nq; i++) {
		size_t g = i / (size_t)s->bq.group;
		double v = (dtype_load(s->b_dt, q, i) - (z ? dtype_load(zdt, z, g) : 0)) *
			   dtype_load(s->bq.scale_dt, sc, g);
		unsigned char t[8];
		dtype_store(s->a_dt, t, 0, v);
		r->Bdq[i] = c->bq_exact ? v : dtype_load(s->a_dt, t, 0);
	}
	r->B = calloc(cg_bq_bytes(s, r->E, 0) + 1, 1);
	r->Bs = calloc(cg_bq_bytes(s, r->E, 1) + 1, 1);
	r->Bz = s->bq.zero ? calloc(cg_bq_bytes(s, r->E, 2) + 1, 1) : NULL;
	diag_init(&d, NULL);
	rc = cg_bq_pack(s, r->E, q, sc, z, zdt, 0, r->B, r->Bs, r->Bz, &d);
	if (rc < 0)
		snprintf(r->msg, sizeof r->msg, "%s", d.last);
	free(q);
	free(sc);
	free(z);
	return rc;
}

/*
 * FP8 x FP8: A and B e4m3 over their whole range, A's scales per row and
 * B's per row (IR layouts) and group of k, about 1/448 (B's times bs), so
 * that the dequantised values are of order 1 (B's of bs).
 */
static void
inputs_f8(GemmRun *r, double bs)
{
	const GemmSpec *s = &r->s;
	size_t na = (size_t)r->msrc * (size_t)s->lda, nb = b_elems(s, r->E), kb = (size_t)(s->K / s->f8.group);
	size_t nsa = (size_t)r->msrc * kb, nsb = (size_t)r->E * (size_t)s->N * kb;

	r->A = calloc(na + 1, 1);
	r->B = calloc(nb + 1, 1);
	r->As = malloc(sizeof(float) * (nsa + 1));
	r->Bs = malloc(sizeof(float) * (nsb + 1));
	for (size_t i = 0; i < na; i++)
		dtype_store(DT_F8E4M3, r->A, i, 448 * gh_urand());
	for (size_t i = 0; i < nb; i++)
		dtype_store(DT_F8E4M3, r->B, i, 448 * gh_urand());
	for (size_t i = 0; i < nsa; i++)
		r->As[i] = (float)((0.5 + (gh_urand() + 1) / 4) / 448);
	for (size_t i = 0; i < nsb; i++)
		((float *)r->Bs)[i] = (float)(bs * (0.5 + (gh_urand() + 1) / 4) / 448);
	for (size_t i = 0; s->f8.b_block > 1 && i < nsb; i++) {	/* one value a block of stored rows */
		size_t n = i / kb % (size_t)s->N;
		((float *)r->Bs)[i] = ((float *)r->Bs)[i - n % (size_t)s->f8.b_block * kb];
	}
}

static void
inputs(GemmRun *r, const GemmCase *c)
{
	const GemmSpec *s = &r->s;
	size_t na = (size_t)r->msrc * (size_t)s->lda, nb = b_elems(s, r->E);
	double bs = (c->b_scale > 0 ? c->b_scale : 1) / sqrt((double)s->K);
	GhFill leaves = c->fill == GH_EXACT ? GH_NONZERO : c->fill;

	gh_seed(c->seed ? c->seed : 12345);
	if (s->f8.group > 0) {
		inputs_f8(r, bs);
	} else if (s->bq.group > 0) {
		r->A = fill(s->a_dt, na, 1.0, c->fill);
		inputs_bq(r, c, bs);
	} else if (c->fill != GH_EXACT) {
		r->A = fill(s->a_dt, na, 1.0, c->fill);
		r->B = fill(s->b_dt, nb, bs, c->fill);
	} else {	/* every product and every sum exact in f32 */
		r->A = calloc(na ? na : 1, dtype_bytes(s->a_dt, 1));
		r->B = calloc(nb ? nb : 1, dtype_bytes(s->b_dt, 1));
		for (size_t i = 0; i < na; i++)
			dtype_store(s->a_dt, r->A, i, 1 + floor((gh_urand() + 1) * 2048) / 4096);
		for (size_t i = 0; i < nb; i++) {
			double sign = gh_urand() < 0 ? -1 : 1;
			dtype_store(s->b_dt, r->B, i, sign * (1 + floor((gh_urand() + 1) * 1.5)));
		}
	}
	r->cbytes = (size_t)r->M * (size_t)s->ldc * dtype_bytes(s->c_dt, 1);
	r->C = malloc(r->cbytes ? r->cbytes : 1);
	memset(r->C, 0xff, r->cbytes);	/* NaN */
	if (s->quant.kind == CG_QUANT_GROUP && s->quant.want_scales) {
		size_t n = (size_t)r->M * (size_t)(r->width / s->quant.group);
		r->C_scale = malloc(sizeof(float) * (n ? n : 1));
		memset(r->C_scale, 0xff, sizeof(float) * n);
	}
	if (s->gather || s->leaf_gather)	/* leaf_gather: the epilogue's rows alone */
		r->gidx = permutation(r->M);
	if (s->store == CG_STORE_SCATTER)
		r->sidx = permutation(r->M);
	for (int i = 0; i < s->ep.n; i++)
		if (cg_ep_is_load(s->ep.in[i].op))	/* may be empty (no rows) */
			r->leaf[i] = fill(s->ep.in[i].dt, leaf_elems(r, i), 1.0, leaves);
	if (c->in_place) {	/* C starts as the last MAT leaf (the reference keeps the copy) */
		int i = in_place_leaf(r);
		if (i < 0)
			snprintf(r->msg, sizeof r->msg, "in place: no MAT leaf of C's type and size");
		else
			memcpy(r->C, r->leaf[i], r->cbytes);
		r->in_place = 1;
	}
	if (s->quant.kind == CG_QUANT_STATIC && s->quant.scale_role) {
		r->qscale = calloc(1, 8);
		dtype_store(s->quant.scale_dt, r->qscale, 0, c->scale_v);
	}
	if (s->quant.kind == CG_QUANT_STATIC && s->quant.zero_role) {
		r->qzero = calloc(1, 8);
		dtype_store(s->quant.zero_dt, r->qzero, 0, c->zero_v);
	}
}

/* The tensor maps of k's CGP_TMAP parameters (in parameter order), over
 * the pointers of the parameters they name, encoded for the emulator. */
static int
encode_maps(const GemmRun *r, const CgKernel *k, uint64_t *args, Diag *d)
{
	static _Alignas(64) unsigned char maps[4][128];
	int j = 0;

	for (int at = 0; at < k->nparam && j < k->ntmap && j < 4; at++) {
		const void *base = NULL;
		if (k->param[at].kind != CGP_TMAP)
			continue;
		for (int i = 0; i < k->nparam; i++)
			if (k->param[i].kind == CGP_PTR && !strcmp(k->param[i].role, k->tmap[j].of))
				base = (const void *)(uintptr_t)args[i];
		if (!base || cg_emu_tmap_encode(&k->tmap[j], base, r->T, maps[j], d) < 0)
			return -1;
		args[at] = (uint64_t)(uintptr_t)maps[j++];
	}
	return 0;
}

/* The kernel's arguments, in the order cg_emit_gemm documents. */
static int
arguments(const GemmRun *r, const CgKernel *k, uint64_t *args, CgEmuBuf *buf, int *nbuf)
{
	const GemmSpec *s = &r->s;
	size_t M = (size_t)r->M;
	int na = 0, nb = 0;

#define ARG(p, bytes) (buf[nb++] = (CgEmuBuf){(p), (bytes)}, args[na++] = (uint64_t)(uintptr_t)(p))
	ARG(r->A, (size_t)r->msrc * (size_t)s->lda * dtype_bytes(s->a_dt, 1));
	if (r->gidx)
		ARG(r->gidx, sizeof(int) * M);
	if (s->bq.group > 0) {
		ARG(r->B, cg_bq_bytes(s, r->E, 0));
		ARG(r->Bs, cg_bq_bytes(s, r->E, 1));
		if (r->Bz)
			ARG(r->Bz, cg_bq_bytes(s, r->E, 2));
	} else {
		ARG(r->B, b_elems(s, r->E) * dtype_bytes(s->b_dt, 1));
	}
	if (s->f8.group > 0) {
		size_t kb = (size_t)(s->K / s->f8.group);
		ARG(r->Bs, sizeof(float) * (size_t)r->E * (size_t)s->N * kb);
		ARG(r->As, sizeof(float) * (size_t)r->msrc * kb);
	}
	ARG(r->C, r->cbytes);
	if (r->C_scale)
		ARG(r->C_scale, sizeof(float) * M * (size_t)(r->width / s->quant.group));
	if (r->sidx)
		ARG(r->sidx, sizeof(int) * M);
	if (r->offs)
		ARG(r->offs, sizeof(int) * (size_t)(r->E + 1));
	for (int i = 0; i < s->ep.n; i++) {
		if (r->in_place && i == in_place_leaf(r))
			args[na++] = (uint64_t)(uintptr_t)r->C;	/* C's buffer, listed once */
		else if (r->leaf[i])
			ARG(r->leaf[i], leaf_elems(r, i) * dtype_bytes(s->ep.in[i].dt, 1));
	}
	if (r->qscale)
		ARG(r->qscale, dtype_bytes(s->quant.scale_dt, 1));
	if (r->qzero)
		ARG(r->qzero, dtype_bytes(s->quant.zero_dt, 1));
	na += k->ntmap;		/* filled by encode_maps */
	if (r->ws)
		ARG(r->ws, r->wsbytes);
	args[na++] = (uint64_t)r->T;
#undef ARG
	*nbuf = nb;
	return na;
}

int
gh_run(GemmRun *r, const GemmCase *c)
{
	CgTarget t = {"emu", NULL, 3};
	Diag d;
	CgModule *m;
	const CgKernel *k;
	uint64_t args[16 + CG_EP_MAX];
	CgEmuBuf buf[16 + CG_EP_MAX];
	int na, nb, rc = -1;

	memset(r, 0, sizeof *r);
	diag_init(&d, NULL);
	r->s = c->s;
	cg_gemm_resolve(&r->s);
	r->T = c->T;
	r->E = r->s.groups > 0 ? r->s.groups : 1;
	r->M = r->s.m_per_t * c->T;
	r->msrc = r->s.gather ? (r->M + r->s.gather_div - 1) / r->s.gather_div : r->M;
	r->sw = -1;
	for (int i = 0; i < r->s.ep.n; i++)
		if (r->s.ep.in[i].op == CGE_SWIGLU)
			r->sw = i;
	r->width = r->sw >= 0 ? r->s.N / 2 : r->s.N;
	r->tf32 = c->builder == GH_MMA && cg_gemm_mma_type(&r->s) == DT_TF32;

	m = cg_module_new(&t, "case", &d);
	if (!m || (c->builder == GH_SIMT ? cg_emit_gemm_simt : cg_emit_gemm)(m, "g", &c->s, &d) < 0) {
		snprintf(r->msg, sizeof r->msg, "emit: %s", d.last);
		goto out;
	}
	k = cg_module_find(m, "g");
	inputs(r, c);
	if (r->msg[0])
		goto out;
	if (r->s.groups > 0) {
		r->offs = calloc((size_t)r->E + 1, sizeof(int));
		for (int e = 0; e < r->E; e++)
			r->offs[e + 1] = r->offs[e] + c->counts[e];
		if (r->offs[r->E] != r->M) {
			snprintf(r->msg, sizeof r->msg, "counts sum to %d, not M = %d", r->offs[r->E], r->M);
			goto out;
		}
	}
	if (cg_gemm_split_bytes(&r->s) > 0) {	/* split-K, stream-K */
		r->wsbytes = (size_t)cg_gemm_split_bytes(&r->s);
		r->ws = malloc(r->wsbytes);
		memset(r->ws, 0xff, r->wsbytes);
		memset(r->ws, 0, (size_t)cg_gemm_split_flag_bytes(&r->s));
	}
	na = arguments(r, k, args, buf, &nb);
	if (na != k->nparam) {
		snprintf(r->msg, sizeof r->msg, "%d arguments for %d parameters", na, k->nparam);
		goto out;
	}
	if (encode_maps(r, k, args, &d) < 0) {
		snprintf(r->msg, sizeof r->msg, "tensor maps: %s", d.last);
		goto out;
	}
	{
		CgEmuLaunch l = {{0, 0, 1}, {k->block[0], 1, 1}, k->smem, args, na, buf, nb};
		l.grid[0] = (int)cg_expr_eval(k->grid[0], c->T);
		l.grid[1] = (int)cg_expr_eval(k->grid[1], c->T);
		l.grid[2] = (int)cg_expr_eval(k->grid[2], c->T);
		if (l.grid[0] > 0 && cg_emu_run(m, "g", &l, &d) < 0) {
			snprintf(r->msg, sizeof r->msg, "%s", d.last);
			goto out;
		}
	}
	rc = 0;
out:
	cg_module_free(m);
	return rc;
}

void
gh_free(GemmRun *r)
{
	free(r->A);
	free(r->B);
	free(r->C);
	free(r->C_scale);
	free(r->qscale);
	free(r->qzero);
	free(r->Bs);
	free(r->As);
	free(r->Bz);
	free(r->Bdq);
	free(r->ws);
	free(r->gidx);
	free(r->sidx);
	free(r->offs);
	for (int i = 0; i < CG_EP_MAX; i++)
		free(r->leaf[i]);
	memset(r, 0, sizeof *r);
}

/* ---- the reference ---- */

GhRow
gh_row(const GemmRun *r, int row)
{
	GhRow w = {row, 0, row, row, row};

	if (r->offs)
		while (w.e < r->E - 1 && row >= r->offs[w.e + 1])
			w.e++;
	if (r->gidx) {
		w.graw = r->gidx[row];
		w.srow = r->s.gather ? w.graw / r->s.gather_div : row;
	}
	if (r->sidx)
		w.drow = r->sidx[row];
	return w;
}

static int
leaf_row(const CgEpInst *in, const GhRow *w)
{
	switch (in->rows) {
	case CGR_GATHER: return w->srow;
	case CGR_GATHER_RAW: return w->graw;
	case CGR_SCATTER: return w->drow;
	default: return w->r;
	}
}

const IrGluAttrs gh_oai = {.act = IR_GLU_OAI, .interleave = 1, .alpha = 1.702, .limit = 7.0};

/* The reference of swiglu (the one epilogue operation that is not an IR op of one element). */
double
gh_swiglu(const CgEpInst *in, double gate, double up)
{
	return ir_glu_scalar(&in->glu, gate, up);
}

/* Instruction i of the epilogue at column n of a space `space` wide; v holds the earlier ones. */
static double
ep_value(const GemmRun *r, const GhRow *w, int i, const double *acc, int64_t n, int64_t space,
	 const double *v)
{
	const CgEpInst *in = &r->s.ep.in[i];
	const void *p = r->leaf[i];

	switch (in->op) {
	case CGE_ACC: return acc[n];
	case CGE_IMM: return in->imm;
	case CGE_COL: return dtype_load(in->dt, p, (size_t)(w->e * in->group_stride + n));
	case CGE_ROW: return dtype_load(in->dt, p, (size_t)leaf_row(in, w));
	case CGE_MAT: return dtype_load(in->dt, p, (size_t)(leaf_row(in, w) * (in->ld ? in->ld : space) + n));
	default: return ir_ew_scalar(in->iop, &in->ew, v[in->a], in->b >= 0 ? v[in->b] : 0);
	}
}

void
gh_ref_row(const GemmRun *r, const GhRow *w, double *out)
{
	const GemmSpec *s = &r->s;
	double *acc = malloc(sizeof(double) * (size_t)(s->N ? s->N : 1));
	int sw = r->sw;

	for (int64_t n = 0; n < s->N && s->f8.group > 0; n++) {
		/* FP8 x FP8: per block of k, the sum of the products times both scales */
		int64_t G = s->f8.group, kb = s->K / G;
		int64_t bn = s->f8.b_interleave ? n % 2 * (s->N / 2) + n / 2 : n, brow = w->e * s->N + bn;
		double a = 0;
		for (int64_t b = 0; b < kb; b++) {
			double t = 0;
			for (int64_t q = b * G; q < (b + 1) * G; q++)
				t += dtype_load(DT_F8E4M3, r->A, (size_t)(w->srow * s->lda + q)) *
				     dtype_load(DT_F8E4M3, r->B, (size_t)(w->e * s->b_group_stride + bn * s->ldb + q));
			a += t * r->As[w->srow * kb + b] * ((const float *)r->Bs)[brow * kb + b];
		}
		acc[n] = a;
	}
	for (int64_t n = 0; n < s->N && s->f8.group == 0; n++) {
		double a = 0;
		for (int64_t q = 0; q < s->K; q++) {
			int64_t bi = w->e * s->b_group_stride + (s->b_layout == CG_B_NK ? n * s->ldb + q : q * s->ldb + n);
			int64_t qa = s->a_rep > 1 ? q % (s->K / s->a_rep) : q;	/* A read a_rep times along K */
			double x = dtype_load(s->a_dt, r->A, (size_t)(w->srow * s->lda + qa));
			double y = r->Bdq ? r->Bdq[bi] : dtype_load(s->b_dt, r->B, (size_t)bi);
			if (r->tf32)
				x = f32_to_tf32((float)x), y = f32_to_tf32((float)y);
			a += x * y;
		}
		acc[n] = a;
	}
	for (int64_t co = 0; co < r->width; co++) {
		double pair[2][CG_EP_MAX], v[CG_EP_MAX];
		/* up to SWIGLU on the N columns (both of its pair), after it on the width */
		for (int p = 0; p < (sw >= 0 ? 2 : 1); p++)
			for (int i = 0; i < (sw >= 0 ? sw : s->ep.n); i++)
				pair[p][i] = ep_value(r, w, i, acc, sw >= 0 ? 2 * co + p : co, s->N, pair[p]);
		if (sw < 0) {
			out[co] = s->ep.n ? pair[0][s->ep.n - 1] : acc[co];
			continue;
		}
		v[sw] = gh_swiglu(&s->ep.in[sw], pair[0][s->ep.in[sw].a], pair[1][s->ep.in[sw].a]);
		for (int i = sw + 1; i < s->ep.n; i++)
			v[i] = ep_value(r, w, i, acc, co, r->width, v);
		out[co] = v[s->ep.n - 1];
	}
	free(acc);
}

/* ---- the comparison ---- */

int
gh_compare(GemmRun *r, GemmErr *e)
{
	const GemmSpec *s = &r->s;
	double *want = malloc(sizeof(double) * (size_t)(r->width ? r->width : 1));
	double err2 = 0, ref2 = 0;
	int rc = -1;

	memset(e, 0, sizeof *e);
	for (int row = 0; row < r->M; row++) {
		GhRow w = gh_row(r, row);
		gh_ref_row(r, &w, want);
		for (int64_t co = 0; co < r->width; co++) {
			double got = dtype_load(s->c_dt, r->C, (size_t)w.drow * (size_t)s->ldc + (size_t)co);
			unsigned char wb[8] = {0}, gb[8] = {0};
			if (isnan(got) && !isnan(want[co])) {
				snprintf(r->msg, sizeof r->msg, "C[%d,%lld] not written (row %d, expert %d)",
					 w.drow, (long long)co, row, w.e);
				goto out;
			}
			dtype_store(s->c_dt, wb, 0, want[co]);
			dtype_store(s->c_dt, gb, 0, got);
			e->mismatches += memcmp(wb, gb, sizeof wb) != 0;
			e->elems++;
			err2 += (got - want[co]) * (got - want[co]);
			ref2 += want[co] * want[co];
		}
	}
	/* the padding between rows (ldc > width) is untouched */
	for (int64_t row = 0; row < r->M; row++)
		for (int64_t co = r->width; co < s->ldc; co++)
			if (!isnan(dtype_load(s->c_dt, r->C, (size_t)(row * s->ldc + co)))) {
				snprintf(r->msg, sizeof r->msg, "C[%lld,%lld] past the width %lld written",
					 (long long)row, (long long)co, (long long)r->width);
				goto out;
			}
	e->err = ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2);
	rc = 0;
out:
	free(want);
	return rc;
}

void
gh_check(const GemmCase *c, double tol)
{
	GemmRun r;
	GemmErr e;

	const char *w = c->what ? c->what : "", *sep = c->what ? ": " : "";

	ck_assert_msg(gh_run(&r, c) == 0 && gh_compare(&r, &e) == 0, "%s%s%s", w, sep, r.msg);
	ck_assert_msg(e.err < tol, "%s%srelative L2 error %g >= %g", w, sep, e.err, tol);
	if (c->fill == GH_EXACT)
		ck_assert_msg(e.mismatches == 0, "%s%s%lld of %lld elements differ from the exact result",
			      w, sep, (long long)e.mismatches, (long long)e.elems);
	gh_free(&r);
}

int
gh_same_bits(const GemmCase *a, const GemmCase *b)
{
	GemmRun r1, r2;
	int same;

	ck_assert_msg(gh_run(&r1, a) == 0, "%s: %s", a->what, r1.msg);
	ck_assert_msg(gh_run(&r2, b) == 0, "%s: %s", b->what, r2.msg);
	same = r1.cbytes == r2.cbytes && memcmp(r1.C, r2.C, r1.cbytes) == 0;
	gh_free(&r1);
	gh_free(&r2);
	return same;
}

/* ---- PTX and ptxas ---- */

int
gh_count(const char *s, const char *what)
{
	int n = 0;

	for (const char *p = s; (p = strstr(p, what)) != NULL; p++)
		n++;
	return n;
}

CgModule *
gh_emit_specs(const char *sm, GhBuilder b, const GemmSpec *s, int n, const char *prefix)
{
	CgTarget t = {sm, NULL, 3};
	Diag d;
	CgModule *m;
	char name[32];

	diag_init(&d, stderr);
	m = cg_module_new(&t, prefix, &d);
	ck_assert_ptr_nonnull(m);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "%s%d", prefix, i);
		ck_assert_msg((b == GH_SIMT ? cg_emit_gemm_simt : cg_emit_gemm)(m, name, &s[i], &d) == 0,
			      "%s: %s", name, d.last);
	}
	return m;
}

const char *
gh_ptx(CgModule *m)
{
	Diag d;
	size_t len;
	const char *ptx;

	diag_init(&d, stderr);
	ptx = cg_module_ptx(m, &len, &d);
	ck_assert_msg(ptx != NULL, "%s", d.last);
	return ptx;
}

int
gh_assemble(CgModule *m, int n, const char *who, int flags)
{
	const char *sm = cg_module_target(m)->sm;
	Diag d;
	CgPtxasResult r;

	if (!cg_ptxas_path()) {
		fprintf(stderr, "%s: no ptxas; PTX for %s not assembled (skipped)\n", who, sm);
		return 0;
	}
	diag_init(&d, stderr);
	ck_assert_msg(cg_module_assemble(m, (flags & GH_CUBIN) != 0, &r, &d) == 0, "%s", d.last);
	ck_assert_int_eq(r.n, n);
	if (flags & GH_CUBIN)
		ck_assert(r.cubin_len > 0);
	/* ptxas says so when it has to serialise wgmma (accumulators touched in flight) */
	if (flags & GH_NO_SERIAL)
		ck_assert_msg(!r.log || !strstr(r.log, "serializ"), "%.2000s", r.log);
	for (int i = 0; i < n; i++) {
		const CgKernel *k = cg_module_kernel(m, i);
		if (getenv("MOEC_CG_VERBOSE"))
			fprintf(stderr, "%s %s: %d regs, %d/%d spill, smem %d: %s\n", sm, k->name,
				k->regs, k->spill_stores, k->spill_loads, k->smem, k->note);
		ck_assert_msg(k->regs > 0 && k->regs <= 255, "%s: %d registers", k->name, k->regs);
		ck_assert_msg(k->spill_stores >= 0 && k->spill_loads >= 0, "%s: no spill counts", k->name);
		if (flags & GH_NO_SPILLS)
			ck_assert_msg(k->spill_stores == 0 && k->spill_loads == 0,
				      "%s: %d/%d bytes spilled (%s)", k->name, k->spill_stores,
				      k->spill_loads, k->note);
	}
	cg_ptxas_free(&r);
	return 1;
}

/* ---- whole programs against the interpreter ---- */

static Module *
parse(const char *text)
{
	Diag d;
	Module *m;

	diag_init(&d, stderr);
	m = ir_parse("program.ir", text, strlen(text), &d);
	ck_assert_msg(m != NULL, "parse: %s", d.last);
	return m;
}

/* Outputs of the compiled program within the quantised types' rounding: a
 * q byte may differ from the interpreter's only by one step of its grid,
 * and only where the two f32 computations round apart (rarely). */
static void
expect_quant_close(const char *what, const Tensor *got, const Tensor *want)
{
	int64_t n = tensor_numel(want), off = 0;

	ck_assert_int_eq(tensor_numel(got), n);
	for (int64_t i = 0; i < n; i++) {
		double g = dtype_load(got->dt, got->data, (size_t)i);
		double w = dtype_load(want->dt, want->data, (size_t)i);
		if (g == w || (isnan(g) && isnan(w)))
			continue;
		if (want->dt == DT_F32 || want->dt == DT_BF16) {	/* scales; a bf16 result */
			double tol = want->dt == DT_F32 ? 1e-5 * fabs(w) : 1e-2 * fabs(w) + 1e-3;
			ck_assert_msg(fabs(g - w) <= tol, "%s[%lld] = %.9g, want %.9g", what,
				      (long long)i, g, w);
			continue;
		}
		off++;
		ck_assert_msg(fabs(g - w) <= (want->dt == DT_I8 ? 1 : fabs(w) / 8 + 1.0 / 512),
			      "%s[%lld] = %g, want %g", what, (long long)i, g, w);
	}
	ck_assert_msg(off * 200 <= n, "%s: %lld of %lld elements one step off", what, (long long)off,
		      (long long)n);
}

/*
 * The default pipeline, cg_compile for "emu", the plan on the emulator at
 * T tokens, against ir_eval of the unfused graph.  note: a substring the
 * note of kernel `kernel` must hold (the builder that took it).
 */
/* Relative L2 error of got against want, over every element. */
static double
rel_l2(const Tensor *got, const Tensor *want)
{
	double e2 = 0, r2 = 0;

	for (int64_t i = 0; i < tensor_numel(want); i++) {
		double g = dtype_load(got->dt, got->data, (size_t)i), w = dtype_load(want->dt, want->data, (size_t)i);
		e2 += (g - w) * (g - w);
		r2 += w * w;
	}
	return r2 > 0 ? sqrt(e2 / r2) : sqrt(e2);
}

void
gh_check_program(const char *text, int T, const char *kernel, const char *note)
{
	gh_check_program_l2(text, T, kernel, note, 0);
}

void
gh_check_program_l2(const char *text, int T, const char *kernel, const char *note, double l2)
{
	gh_check_program_debug(text, T, kernel, note, l2, 0);
}

void
gh_check_program_debug(const char *text, int T, const char *kernel, const char *note, double l2,
		       DbgFlags debug)
{
	gh_check_program_max(text, T, 256, kernel, note, l2, debug);
}

void
gh_check_program_max(const char *text, int T, int max_tokens, const char *kernel, const char *note, double l2,
		     DbgFlags debug)
{
	gh_check_program_tuned(text, T, max_tokens, kernel, note, l2, debug, NULL);
}

/* The text through the default pipeline and cg_compile for arch (a module;
 * *m is freed by the caller after the program). */
static CgProgram *
compile_for(const char *text, const char *arch, int max_tokens, DbgFlags debug, Module **m)
{
	PassOpts po;
	PassCtx pc = {0};
	CgCompileOpts co;
	CgProgram *p;
	Diag d;

	diag_init(&d, stderr);
	*m = parse(text);
	pass_default_opts(&po);
	po.debug = debug;
	po.fp8_mma = cg_arch_fp8_mma(arch, debug);
	po.max_tokens = max_tokens;
	pc.d = &d;
	ck_assert_msg(pass_run(*m, &po, &pc) == 0, "passes: %s", d.last);
	cg_compile_default(&co);
	co.arch[0] = arch;
	co.narch = 1;
	co.max_tokens = max_tokens;
	co.debug = debug;
	p = cg_compile(*m, &co, &d);
	ck_assert_msg(p != NULL, "compile: %s", d.last);
	return p;
}

char *
gh_program_ptx(const char *text, const char *arch, int max_tokens, DbgFlags debug)
{
	Module *m;
	CgProgram *p = compile_for(text, arch, max_tokens, debug, &m);
	size_t len;
	const char *ptx = cg_program_ptx(p, 0, &len);
	char *c;

	ck_assert_ptr_nonnull(ptx);
	c = strdup(ptx);
	cg_program_free(p);
	ir_free_module(m);
	return c;
}

/*
 * The step that runs right before the first launch of a kernel named
 * `kernel...` at T tokens, in the plan compiled for arch: its kernel's name
 * (malloc'd), "memset" / "step" for another kind, NULL if none runs before it
 * (or the kernel does not run at T).
 */
char *
gh_step_before(const char *text, const char *arch, int max_tokens, DbgFlags debug, const char *kernel, int64_t T)
{
	Module *m;
	CgProgram *p = compile_for(text, arch, max_tokens, debug, &m);
	const Manifest *man = cg_program_manifest(p);
	const MStep *prev = NULL;
	char *r = NULL;

	for (int i = 0; i < man->nstep; i++) {
		const MStep *st = &man->step[i];
		if (!bundle_step_runs(st, T))
			continue;
		if (st->kind == STEP_LAUNCH && strncmp(st->kernel, kernel, strlen(kernel)) == 0) {
			if (prev)
				r = strdup(prev->kind == STEP_LAUNCH ? prev->kernel :
					   prev->kind == STEP_MEMSET ? "memset" : "step");
			break;
		}
		prev = st;
	}
	cg_program_free(p);
	ir_free_module(m);
	return r;
}

/* Split-K into S slices for launches of up to T tokens: the workspace
 * slots of every tile (program.c's split_slots). */
void
gh_split(GemmSpec *s, int S, int T)
{
	GemmSpec r = *s;

	cg_gemm_resolve(&r);
	s->split_k = S;
	s->split_slots = (int)(((int64_t)r.m_per_t * T + (int64_t)r.groups * (r.bm - 1) + r.bm - 1) /
			       r.bm * (r.N / r.bn));
}

/* Type t's dims at T tokens (a symbolic dim is coef * T). */
static void
program_dims(Module *ref, const Type *t, int T, int64_t *dim)
{
	for (int r = 0; r < t->rank; r++)
		dim[r] = ir_dim_is_static(t->dim[r]) ? t->dim[r] : ir_dim_expr(ref, t->dim[r])->coef * T;
}

/* ref's main graph's inputs at T tokens, uniform in [-2, 2) from seed. */
static void
program_inputs(Module *ref, int T, uint64_t seed, Tensor *in)
{
	Graph *g = ir_main_graph(ref);

	gh_seed(seed);
	memset(in, 0, sizeof(Tensor) * (size_t)g->nparam);
	for (int i = 0; i < g->nparam; i++) {
		const Type *t = &g->param[i]->type;
		int64_t dim[MAXRANK];
		program_dims(ref, t, T, dim);
		ck_assert_int_eq(tensor_alloc(&in[i], t->dt, t->rank, dim), 0);
		for (int64_t e = 0; e < tensor_numel(&in[i]); e++)
			dtype_store(t->dt, in[i].data, (size_t)e, gh_urand() * 2);
	}
}

int
gh_program_same_bits(const char *text, int T, int max_tokens, DbgFlags a, DbgFlags b)
{
	Module *ref = parse(text), *m[2];
	Graph *g = ir_main_graph(ref);
	Tensor in[8], out[2][8];
	Diag d;
	int same = 1;

	diag_init(&d, stderr);
	program_inputs(ref, T, 778, in);
	for (int v = 0; v < 2; v++) {
		CgProgram *p = compile_for(text, "emu", max_tokens, v ? b : a, &m[v]);
		for (int i = 0; i < g->nret; i++) {
			const Type *t = &g->ret[i]->type;
			int64_t dim[MAXRANK];
			program_dims(ref, t, T, dim);
			ck_assert_int_eq(tensor_alloc(&out[v][i], t->dt, t->rank, dim), 0);
			memset(out[v][i].data, 0xff, tensor_nbytes(&out[v][i]));
		}
		ck_assert_msg(cg_program_emulate(p, in, out[v], T, &d) == 0, "emulate: %s", d.last);
		cg_program_free(p);
		ir_free_module(m[v]);
	}
	for (int i = 0; i < g->nret; i++) {
		same &= memcmp(out[0][i].data, out[1][i].data, tensor_nbytes(&out[0][i])) == 0;
		tensor_free(&out[0][i]);
		tensor_free(&out[1][i]);
	}
	for (int i = 0; i < g->nparam; i++)
		tensor_free(&in[i]);
	ir_free_module(ref);
	return same;
}

void
gh_check_program_tuned(const char *text, int T, int max_tokens, const char *kernel, const char *note, double l2,
		       DbgFlags debug, const char *tuning)
{
	Module *m = parse(text), *ref = parse(text);
	Graph *g = ir_main_graph(ref);
	PassOpts po;
	PassCtx pc = {0};
	CgCompileOpts co;
	CgProgram *p;
	Diag d;
	Tensor in[8], want[8], got[8];
	const CgKernel *k;

	diag_init(&d, stderr);
	pass_default_opts(&po);
	po.debug = debug;
	po.fp8_mma = cg_arch_fp8_mma("emu", debug);
	po.max_tokens = max_tokens;	/* as moec compile passes it (split-f32) */
	pc.d = &d;
	pc.report = NULL;
	ck_assert_msg(pass_run(m, &po, &pc) == 0, "passes: %s", d.last);
	cg_compile_default(&co);
	co.arch[0] = "emu";
	co.narch = 1;
	co.max_tokens = max_tokens;
	co.debug = debug;
	if (tuning) {
		co.tuning = cg_tuning_read(tuning, &d);
		ck_assert_msg(co.tuning != NULL, "tuning table: %s", d.last);
	}
	p = cg_compile(m, &co, &d);
	ck_assert_msg(p != NULL, "compile: %s", d.last);
	k = cg_module_find(cg_program_module(p, "emu"), kernel);
	ck_assert_msg(k != NULL, "no kernel %s", kernel);
	ck_assert_msg(strstr(k->note, note) != NULL, "%s: '%s' lacks '%s'", kernel, k->note, note);

	program_inputs(ref, T, 777, in);
	memset(want, 0, sizeof want);
	ck_assert_msg(ir_eval(g, in, g->nparam, want, NULL, &d) == 0, "ir_eval: %s", d.last);
	for (int i = 0; i < g->nret; i++) {
		ck_assert_int_eq(tensor_alloc(&got[i], want[i].dt, want[i].rank, want[i].dim), 0);
		memset(got[i].data, 0xff, tensor_nbytes(&got[i]));
	}
	ck_assert_msg(cg_program_emulate(p, in, got, T, &d) == 0, "emulate: %s", d.last);
	for (int i = 0; i < g->nret; i++) {
		if (l2 > 0) {
			double e = rel_l2(&got[i], &want[i]);
			ck_assert_msg(e < l2, "%s: relative L2 error %g >= %g", g->retname[i], e, l2);
		} else {
			expect_quant_close(g->retname[i], &got[i], &want[i]);
		}
		tensor_free(&got[i]);
		tensor_free(&want[i]);
	}
	for (int i = 0; i < g->nparam; i++)
		tensor_free(&in[i]);
	cg_program_free(p);
	cg_tuning_free((CgTuning *)co.tuning);
	ir_free_module(m);
	ir_free_module(ref);
}
