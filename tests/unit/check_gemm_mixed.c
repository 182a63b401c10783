/*
 * check_gemm_mixed.c — GEMMs with a quantised B (GemmSpec.bq,
 * codegen/k_gemm_mixed.c): the compile-time repack's layout read back
 * against its definition, the spec checks, PTX through ptxas, and GEMMs
 * on the emulator for every format against a reference in double that
 * dequantises the IR-layout weights as the dequantize op does (then rounds
 * to A's type, what the mma reads) — odd T, group edges inside and across
 * k-tiles, zero points, grouped experts with empty ones, f16.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "gemm_harness.h"

/* bf16 [T,K] x quantised [N,K]^T, f32 out, no epilogue */
static void
spec_q(GemmSpec *s, DType b_dt, int64_t N, int64_t K, int group, DType scale_dt, int zero)
{
	cg_gemm_default(s);
	s->N = N;
	s->K = K;
	s->b_dt = b_dt;
	s->c_dt = DT_F32;
	s->bq.group = group;
	s->bq.scale_dt = scale_dt;
	s->bq.zero = zero;
	gh_tiles(s, 16, 128, 64, 1, 4, 4);	/* the decode tile */
}

/* ---- the layout ---- */

/* Element (e, n, k) of the packed B, read back by the layout's definition. */
static unsigned
packed_at(const unsigned char *b, int bits, int64_t N, int64_t K, int64_t e, int64_t n, int64_t k)
{
	int64_t ka = 128 / bits, kb = k / ka, r = k % ka, s = r / 16, c = r % 16;
	int t = (int)(c % 8) / 2, el = (int)(c % 2) + 2 * (int)(c / 8), lane = (int)(n % 8) * 4 + t;
	const unsigned char *w = b + ((e * N / 8 + n / 8) * (K / ka) + kb) * 128 + lane * 4;
	uint32_t word = (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;

	return (word >> (16 * (el & 1) + bits * (2 * s + (el >> 1)))) & ((1u << bits) - 1);
}

static void
check_pack(DType dt, int64_t N, int64_t K, int E, int group)
{
	GemmSpec s;
	size_t n = (size_t)E * (size_t)(N * K), ng = n / (size_t)group;
	unsigned char *q = calloc(dtype_bytes(dt, n) + 1, 1);
	unsigned char *sc = calloc(ng * 2 + 1, 1), *z = calloc(ng + 1, 1);
	void *b, *bs, *bz;
	int bits = dtype_bits(dt);
	Diag d;

	spec_q(&s, dt, N, K, group, DT_BF16, 1);
	gh_seed(7);
	for (size_t i = 0; i < dtype_bytes(dt, n); i++)
		q[i] = (unsigned char)((gh_urand() + 1) * 128);
	for (size_t i = 0; i < ng; i++) {
		dtype_store(DT_BF16, sc, i, (double)i);
		dtype_store(DT_U8, z, i, (double)(i % 251));
	}
	b = calloc(cg_bq_bytes(&s, E, 0), 1);
	bs = calloc(cg_bq_bytes(&s, E, 1), 1);
	bz = calloc(cg_bq_bytes(&s, E, 2), 1);
	ck_assert_uint_eq(cg_bq_bytes(&s, E, 0), dtype_bytes(dt, n));
	diag_init(&d, NULL);
	ck_assert_int_eq(cg_bq_pack(&s, E, q, sc, z, DT_U8, 0, b, bs, bz, &d), 0);
	for (int64_t e = 0; e < E; e++)
		for (int64_t nn = 0; nn < N; nn++)
			for (int64_t k = 0; k < K; k++) {
				size_t i = (size_t)((e * N + nn) * K + k);
				unsigned want = bits == 4 ? (q[i / 2] >> (4 * (i & 1))) & 15u : q[i];
				ck_assert_uint_eq(packed_at(b, bits, N, K, e, nn, k), want);
			}
	/* scales and zero points [E][K/group][N] */
	for (int64_t e = 0; e < E; e++)
		for (int64_t nn = 0; nn < N; nn++)
			for (int64_t g = 0; g < K / group; g++) {
				size_t from = (size_t)((e * N + nn) * (K / group) + g);
				size_t to = (size_t)((e * (K / group) + g) * N + nn);
				ck_assert(dtype_load(DT_BF16, bs, to) == dtype_load(DT_BF16, sc, from));
				ck_assert(dtype_load(DT_BF16, bz, to) == (double)(from % 251));
			}
	free(q);
	free(sc);
	free(z);
	free(b);
	free(bs);
	free(bz);
}

START_TEST(test_pack_layout)
{
	check_pack(DT_I4, 16, 64, 1, 32);
	check_pack(DT_U4, 24, 96, 2, 16);
	check_pack(DT_F8E4M3, 16, 48, 3, 16);
	check_pack(DT_U8, 8, 32, 1, 32);
	check_pack(DT_F4E2M1, 16, 64, 2, 32);
}
END_TEST

START_TEST(test_pack_refusals)
{
	GemmSpec s;
	unsigned char buf[4096] = {0}, o[4096], os[512], oz[512];
	Diag d;

	diag_init(&d, NULL);
	spec_q(&s, DT_BF16, 16, 64, 32, DT_BF16, 0);	/* not a format */
	ck_assert_int_eq(cg_bq_pack(&s, 1, buf, buf, NULL, DT_U8, 0, o, os, oz, &d), -1);
	spec_q(&s, DT_I4, 16, 48, 32, DT_BF16, 0);		/* K not a multiple of the group */
	ck_assert_int_eq(cg_bq_pack(&s, 1, buf, buf, NULL, DT_U8, 0, o, os, oz, &d), -1);
	spec_q(&s, DT_U8, 16, 64, 32, DT_F16, 1);		/* an integer format's zero point 2.5 */
	dtype_store(DT_F32, buf + 1024, 0, 2.5);
	ck_assert_int_eq(cg_bq_pack(&s, 1, buf, buf, buf + 1024, DT_F32, 0, o, os, oz, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "not an integer"));
	spec_q(&s, DT_F8E4M3, 16, 64, 32, DT_BF16, 1);	/* 1.001: not exact in bf16 */
	dtype_store(DT_F32, buf + 1024, 0, 1.001);
	ck_assert_int_eq(cg_bq_pack(&s, 1, buf, buf, buf + 1024, DT_F32, 0, o, os, oz, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "not exact"));
}
END_TEST

/* ---- checks and parameters ---- */

static void
refused(const GemmSpec *s, const char *want)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;

	diag_init(&d, NULL);
	ck_assert_int_eq(cg_gemm_check(&t, s, &d), -1);
	ck_assert_msg(strstr(d.last, want) != NULL, "'%s' does not say '%s'", d.last, want);
}

START_TEST(test_checks)
{
	CgTarget t = {"sm_90a", NULL, 3}, emu = {"emu", NULL, 3};
	GemmSpec s;
	Diag d;

	diag_init(&d, NULL);
	spec_q(&s, DT_I4, 256, 512, 128, DT_BF16, 0);
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), 0);
	CgModule *mt = cg_module_new(&t, "t", &d), *me = cg_module_new(&emu, "e", &d);
	ck_assert_ptr_nonnull(mt);
	ck_assert_ptr_nonnull(me);
	cg_module_set_debug(me, DBG_EMU_WGMMA);	/* even standing for sm_90a */
	ck_assert_int_eq(cg_gemm_mainloop_for(mt, &s), CG_MAINLOOP_MMA);
	ck_assert_int_eq(cg_gemm_mainloop_for(me, &s), CG_MAINLOOP_MMA);
	cg_module_free(mt);
	cg_module_free(me);
	s.mainloop = CG_MAINLOOP_WGMMA;
	gh_tiles(&s, 128, 128, 64, 2, 2, 3);
	refused(&s, "mma.sync mainloop");
	spec_q(&s, DT_BF16, 256, 512, 128, DT_BF16, 0);
	refused(&s, "quantised B of bf16");
	spec_q(&s, DT_I4, 256, 512, 128, DT_I8, 0);
	refused(&s, "scales are i8");
	spec_q(&s, DT_I4, 256, 512, 128, DT_BF16, 0);
	s.a_dt = DT_F32;
	refused(&s, "A in bf16 or f16");
	spec_q(&s, DT_I4, 256, 512, 128, DT_BF16, 0);
	s.b_layout = CG_B_KN;
	refused(&s, "packed [N,K]");
	spec_q(&s, DT_I4, 256, 512, 40, DT_BF16, 0);
	refused(&s, "groups of 40");
	spec_q(&s, DT_I4, 256, 512, 96, DT_BF16, 0);	/* neither divides the other with bk 64 */
	refused(&s, "groups of 96");
	spec_q(&s, DT_I4, 256, 512, 16, DT_BF16, 0);
	gh_tiles(&s, 16, 128, 16, 1, 4, 4);
	refused(&s, "bk a multiple of 32");
	spec_q(&s, DT_I4, 256, 512, 128, DT_BF16, 0);
	s.bk = 0;
	refused(&s, "bk = 0");
	spec_q(&s, DT_F4E2M1, 256, 512, 32, DT_F8E8M0, 0);	/* byte scales: 16 per chunk */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), 0);
	gh_tiles(&s, 16, 8, 64, 1, 1, 4);
	refused(&s, "bn and N multiples of 16");
	/* simt refuses it (no format), by type */
	spec_q(&s, DT_I4, 256, 512, 128, DT_BF16, 0);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
}
END_TEST

START_TEST(test_params)
{
	CgTarget t = {"sm_80", NULL, 3};
	Diag d;
	CgModule *m;
	GemmSpec s;
	const CgKernel *k;

	diag_init(&d, NULL);
	m = cg_module_new(&t, "p", &d);
	spec_q(&s, DT_U4, 256, 512, 128, DT_F16, 1);
	s.a_dt = DT_F16;
	ck_assert_int_eq(cg_emit_gemm(m, "q", &s, &d), 0);
	k = cg_module_find(m, "q");
	ck_assert_int_eq(k->nparam, 6);
	ck_assert_str_eq(k->param[1].role, "B");
	ck_assert_str_eq(k->param[2].role, "B_scale");
	ck_assert_str_eq(k->param[3].role, "B_zero");
	ck_assert_str_eq(k->param[4].role, "C");
	ck_assert_str_eq(k->param[5].role, "T");
	ck_assert_ptr_nonnull(strstr(k->note, "bq: group=128 scale=f16 zero"));
	ck_assert_int_eq(k->smem, cg_gemm_smem(&s));
	cg_module_free(m);
}
END_TEST

/* ---- PTX ---- */

START_TEST(test_ptxas)
{
	GemmSpec s[5];

	spec_q(&s[4], DT_F4E2M1, 512, 1024, 32, DT_F8E8M0, 0);
	spec_q(&s[0], DT_I4, 512, 1024, 128, DT_BF16, 0);
	spec_q(&s[1], DT_U4, 512, 1024, 32, DT_F16, 1);
	s[1].a_dt = s[1].c_dt = DT_F16;
	gh_tiles(&s[1], 128, 128, 64, 2, 4, 3);
	spec_q(&s[2], DT_F8E4M3, 512, 1024, 128, DT_F32, 0);
	gh_tiles(&s[2], 128, 128, 64, 2, 4, 3);
	gh_spec_grouped_swiglu(&s[3], 8, 512, 1024, 2);
	s[3].b_dt = DT_I4;
	s[3].bq = (CgBQuant){128, DT_BF16, 1};
	gh_tiles(&s[3], 16, 128, 128, 1, 4, 4);
	s[3].sched = CG_SCHED_PERSISTENT;
	for (int i = 0; i < 3; i++) {
		CgModule *m = gh_emit_specs(gh_targets[i], GH_MMA, s, 5, "q");
		const char *ptx = gh_ptx(m);
		ck_assert_int_gt(gh_count(ptx, "mma.sync.aligned.m16n8k16"), 0);
		ck_assert_int_gt(gh_count(ptx, "cp.async.cg.shared.global"), 0);
		/* the fast path (i4 with bf16 scales, u4 with f16) and the f32 one (f8) */
		ck_assert_int_gt(gh_count(ptx, "fma.rn.bf16x2"), 0);
		ck_assert_int_gt(gh_count(ptx, "fma.rn.f16x2"), 0);
		gh_assemble(m, 5, "gemm_mixed", GH_NO_SPILLS);
		cg_module_free(m);
	}
}
END_TEST

/* ---- on the emulator ---- */

START_TEST(test_i4_decode)
{
	GemmCase c = {.what = "i4 g128 bf16 scales, decode tile", .T = 19};

	spec_q(&c.s, DT_I4, 256, 384, 128, DT_BF16, 0);
	gh_check(&c, 1e-5);
	c.what = "i4, 2 stages, plain loop, T = 1";
	c.T = 1;
	c.s.stages = 2;
	c.s.no_frag_pipe = 1;
	gh_check(&c, 1e-5);
	c.what = "i4, T = 0";
	c.T = 0;
	gh_check(&c, 1e-5);
}
END_TEST

START_TEST(test_u4_zero_groups_in_tile)
{
	/* groups of 32 in k-tiles of 64 (two scale rows per stage), u4 zero points, f16 */
	GemmCase c = {.what = "u4 g32 zero f16", .T = 70};

	spec_q(&c.s, DT_U4, 256, 256, 32, DT_F16, 1);
	c.s.a_dt = c.s.c_dt = DT_F16;
	gh_tiles(&c.s, 64, 128, 64, 2, 2, 3);
	gh_check(&c, 2e-3);
	c.what = "u4 g16, bk 128: eight groups per k-tile";
	c.s.bq.group = 16;
	gh_tiles(&c.s, 32, 64, 128, 1, 2, 2);
	gh_check(&c, 2e-3);
}
END_TEST

START_TEST(test_group_spans_tiles)
{
	/* groups of 128 over k-tiles of 32 (one scale row reused by 4 k-tiles), u8 zero points */
	GemmCase c = {.what = "u8 g128 bk32 zero", .T = 33};

	spec_q(&c.s, DT_U8, 128, 512, 128, DT_BF16, 1);
	gh_tiles(&c.s, 32, 128, 32, 1, 4, 5);
	gh_check(&c, 1e-5);
	c.what = "i8 per channel (group = K)";
	c.s.b_dt = DT_I8;
	c.s.bq.group = 512;
	c.s.bq.zero = 0;
	gh_check(&c, 1e-5);
	c.what = "u8 with f16 A, scales and zero points: the 8-bit fast path";
	c.s.a_dt = DT_F16;
	c.s.b_dt = DT_U8;
	c.s.bq = (CgBQuant){64, DT_F16, 1};
	gh_check(&c, 1e-5);
	c.what = "i8 f16, no zero point: the fast path, signed";
	c.s.b_dt = DT_I8;
	c.s.bq.zero = 0;
	gh_check(&c, 1e-5);
}
END_TEST

START_TEST(test_f8)
{
	GemmCase c = {.what = "f8e4m3 g128 f32 scales (DeepSeek's blocks along K)", .T = 45};

	spec_q(&c.s, DT_F8E4M3, 256, 384, 128, DT_F32, 0);
	gh_tiles(&c.s, 64, 128, 128, 2, 2, 3);
	gh_check(&c, 1e-5);
	c.what = "f8e5m2 g16 with f8 zero points";
	c.s.b_dt = DT_F8E5M2;
	c.s.bq = (CgBQuant){16, DT_BF16, 1};
	gh_tiles(&c.s, 16, 64, 32, 1, 2, 4);
	gh_check(&c, 1e-5);
}
END_TEST

START_TEST(test_mxfp4)
{
	/* gpt-oss: e2m1 values with an e8m0 scale (2^(s-127)) per 32 along K */
	GemmCase c = {.what = "f4e2m1 g32 f8e8m0, decode tile (the bf16 fast path)", .T = 19};

	spec_q(&c.s, DT_F4E2M1, 256, 384, 32, DT_F8E8M0, 0);
	gh_check(&c, 1e-5);
	c.what = "f4e2m1 g32, two groups per k-tile, 4 warps in M";
	c.T = 77;
	gh_tiles(&c.s, 64, 64, 64, 2, 2, 3);
	gh_check(&c, 1e-5);
	c.what = "f4e2m1 with f16 A (the f32 path)";
	c.s.a_dt = DT_F16;
	gh_check(&c, 1e-5);
	c.what = "f4e2m1 with bf16 scales per 64";
	c.s.a_dt = DT_BF16;
	c.s.bq = (CgBQuant){64, DT_BF16, 0};
	gh_check(&c, 1e-5);
	GemmCase gc = {.what = "grouped f4e2m1 swiglu (gpt-oss gate|up)", .T = 21,
		       .counts = {7, 0, 11, 0, 0, 16, 8, 0}};
	gh_spec_grouped_swiglu(&gc.s, 8, 256, 256, 2);
	gc.s.b_dt = DT_F4E2M1;
	gc.s.bq = (CgBQuant){32, DT_F8E8M0, 0};
	gh_tiles(&gc.s, 16, 128, 64, 1, 4, 4);
	gh_check(&gc, 1e-2);
}
END_TEST

START_TEST(test_grouped)
{
	/* the gate|up GEMM of an int4 MoE: rows gathered, SwiGLU, empty experts */
	GemmCase c = {.what = "grouped i4 swiglu, tiles", .T = 21, .counts = {7, 0, 11, 0, 0, 16, 8, 0}};

	gh_spec_grouped_swiglu(&c.s, 8, 256, 256, 2);
	c.s.b_dt = DT_I4;
	c.s.bq = (CgBQuant){64, DT_BF16, 1};
	c.bq_zero_dt = DT_I4;
	gh_tiles(&c.s, 16, 128, 64, 1, 4, 4);
	gh_check(&c, 1e-2);
	c.what = "grouped i4 swiglu, persistent with 5 CTAs";
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 5;
	gh_check(&c, 1e-2);
	/* the down GEMM: routing weight, scattered rows */
	GemmCase dn = {.what = "grouped f8 down, scale + scatter", .T = 9, .counts = {3, 3, 0, 12}};
	gh_spec_grouped_scale_scatter(&dn.s, 4, 128, 256);
	dn.s.m_per_t = 2;
	dn.s.b_dt = DT_F8E4M3;
	dn.s.bq = (CgBQuant){128, DT_F32, 0};
	gh_tiles(&dn.s, 32, 64, 64, 2, 2, 3);
	gh_check(&dn, 1e-2);
}
END_TEST

/* ---- whole programs: fuse-dequant, lower_gemm, the repack, the emulator ---- */

/* W4A16: i4 with a scale per 128 along K, then u4 with f16 scales and u4 zero points per 64 */
static const char prog_w4[] =
	"weight $wq : i4[256,128]\n"
	"weight $s : bf16[256,1] mean=0.02 scale=0.005\n"
	"weight $wu : u4[128,256]\n"
	"weight $su : f16[128,4] mean=0.01 scale=0.002\n"
	"weight $zu : u4[128,4] mean=8 scale=7\n"
	"graph @g(%x: bf16[T,128]) -> (y: bf16[T,128]) {\n"
	"	%w = dequantize $wq, $s, axis=1, block_size=128, to=bf16 : bf16[256,128]\n"
	"	%h = matmul %x, %w, to=f32, trans_b=1 : f32[T,256]\n"
	"	%a = silu %h : f32[T,256]\n"
	"	%ab = cast %a, to=bf16 : bf16[T,256]\n"
	"	%w2 = dequantize $wu, $su, $zu, axis=1, block_size=64, to=bf16 : bf16[128,256]\n"
	"	%y = matmul %ab, %w2, to=f32, trans_b=1 : f32[T,128]\n"
	"	%yb = cast %y, to=bf16 : bf16[T,128]\n"
	"	ret %yb\n"
	"}\n";

/* W8A16: f8e4m3 with a per-channel f32 scale (compressed-tensors, FBGEMM) */
static const char prog_f8_channel[] =
	"weight $wq : f8e4m3[256,128] scale=2.0\n"
	"weight $s : f32[256] mean=0.02 scale=0.005\n"
	"graph @g(%x: bf16[T,128]) -> (y: bf16[T,256]) {\n"
	"	%w = dequantize $wq, $s, axis=0, to=bf16 : bf16[256,128]\n"
	"	%y = matmul %x, %w, trans_b=1 : bf16[T,256]\n"
	"	ret %y\n"
	"}\n";

/* B [K,N]: not folded; dequantised at load and read as bf16 by the GEMM */
static const char prog_kn_unfused[] =
	"weight $wq : i4[128,256]\n"
	"weight $s : bf16[1,256] mean=0.02 scale=0.005\n"
	"graph @g(%x: bf16[T,128]) -> (y: f32[T,256]) {\n"
	"	%w = dequantize $wq, $s, axis=0, block_size=128, to=bf16 : bf16[128,256]\n"
	"	%y = matmul %x, %w, to=f32 : f32[T,256]\n"
	"	ret %y\n"
	"}\n";

/* An int4 MoE (GPTQ-style: i4 with zero points per 32, gate|up interleaved by
 * lower-moe and repacked so) with FP8 down experts (DeepSeek's weights, a
 * scale per 128 along K): both grouped GEMMs read packed weights.  Checked by
 * relative L2: the interpreter rounds the gate|up result to bf16 before
 * SwiGLU, the fused epilogue does not (the same outputs as without
 * fuse-dequant, bit for bit, on 2026-12-01: the difference is the bf16
 * block's, not the packed weights'). */
static const char prog_moe[] =
	"weight $router : bf16[8,64]\n"
	"weight $wguq : i4[8,256,64] scale=7\n"
	"weight $wgus : bf16[8,256,2] mean=0.02 scale=0.005\n"
	"weight $wguz : i4[8,256,2] scale=3\n"
	"weight $wdq : f8e4m3[8,64,128] scale=2\n"
	"weight $wds : f32[8,64,1] mean=0.03 scale=0.01\n"
	"graph @moe(%x: bf16[T,64]) -> (y: bf16[T,64]) {\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,8]\n"
	"	%wgu = dequantize $wguq, $wgus, $wguz, axis=2, block_size=32, to=bf16 : bf16[8,256,64]\n"
	"	%wd = dequantize $wdq, $wds, axis=2, block_size=128, to=bf16 : bf16[8,64,128]\n"
	"	%y = moe %x, %logits, _, %wgu, %wd, k=2, renorm=1, router=softmax : bf16[T,64]\n"
	"	ret %y\n"
	"}\n";

/*
 * DeepSeek-V3's FP8 block in the contract form: f8e4m3 experts with f32
 * scales per 128 along K, the SwiGLU activations quantised per 128 columns
 * in the gate|up epilogue (quantize_dynamic) and dequantised for the down
 * GEMM.  Today the GEMMs run W8A16 (the activations dequantised by a kernel
 * of their own); FP8 x FP8 wgmma is not done.
 */
static const char prog_moe_fp8[] =
	"weight $router : bf16[8,64]\n"
	"weight $wguq : f8e4m3[8,256,64] scale=2\n"
	"weight $wgus : f32[8,256,1] mean=0.02 scale=0.005\n"
	"weight $wdq : f8e4m3[8,64,128] scale=2\n"
	"weight $wds : f32[8,64,1] mean=0.03 scale=0.01\n"
	"graph @moe(%x: bf16[T,64]) -> (y: bf16[T,64]) {\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,8]\n"
	"	%w, %ids = route %logits, k=2, renorm=1, router=softmax : f32[T,2], i32[T,2]\n"
	"	%offs, %rows, %pos = permute %ids, experts=8 : i32[9], i32[2*T], i32[2*T]\n"
	"	%two = const value=[2] : i32[]\n"
	"	%src = div %rows, %two : i32[2*T]\n"
	"	%xs = gather %x, %src, axis=0 : bf16[2*T,64]\n"
	"	%wgu = dequantize $wguq, $wgus, axis=2, block_size=64, to=bf16 : bf16[8,256,64]\n"
	"	%h = grouped_matmul %xs, %wgu, %offs, to=f32 : f32[2*T,256]\n"
	"	%act = swiglu %h, act=silu, layout=interleave : f32[2*T,128]\n"
	"	%q, %qs = quantize_dynamic %act, group=128, to=f8e4m3 : f8e4m3[2*T,128], f32[2*T,1]\n"
	"	%a8 = dequantize %q, %qs, axis=1, block_size=128, to=bf16 : bf16[2*T,128]\n"
	"	%wd = dequantize $wdq, $wds, axis=2, block_size=128, to=bf16 : bf16[8,64,128]\n"
	"	%down = grouped_matmul %a8, %wd, %offs, to=f32 : f32[2*T,64]\n"
	"	%wf = reshape %w, shape=[2*T] : f32[2*T]\n"
	"	%wr = gather %wf, %rows, axis=0 : f32[2*T]\n"
	"	%wc = reshape %wr, shape=[2*T, 1] : f32[2*T,1]\n"
	"	%scaled = mul %down, %wc : f32[2*T,64]\n"
	"	%slots = scatter_rows %scaled, %rows, rows=[2*T] : f32[2*T,64]\n"
	"	%s3 = reshape %slots, shape=[T, 2, 64] : f32[T,2,64]\n"
	"	%sum = reduce_sum %s3, axes=[1], keepdims=0 : f32[T,64]\n"
	"	%y = cast %sum, to=bf16 : bf16[T,64]\n"
	"	ret %y\n"
	"}\n";

static const struct {
	const char *text;
	int T[2];
	const char *kernel, *note;
	double l2;		/* > 0: relative L2 per output instead of element-wise */
} programs[] = {
	{prog_w4, {19, 200}, "g_k0", "bq: group=128 scale=bf16", 0},
	{prog_w4, {3, 0}, "g_k1_decode", "bq: group=64 scale=f16 zero", 0},
	{prog_f8_channel, {21, 0}, "g_k0", "bf16.f8e4m3->bf16", 0},
	{prog_kn_unfused, {17, 0}, "g_k0", "bf16.bf16->f32 B[K,N]", 0},
	{prog_moe, {29, 90}, "moe_k3", "bf16.i4->bf16 B[N,K] N=256 K=64", 1e-2},
	{prog_moe_fp8, {31, 0}, "moe_k3", "bf16.f8e4m3->f8e4m3 B[N,K] N=256 K=64", 2e-2},
	{prog_moe, {5, 0}, "moe_k4_decode", "bf16.f8e4m3->f32 B[N,K] N=64 K=128", 1e-2},
};

START_TEST(test_program_against_interpreter)
{
	for (int i = 0; i < 2 && programs[_i].T[i] > 0; i++)
		gh_check_program_l2(programs[_i].text, programs[_i].T[i], programs[_i].kernel, programs[_i].note,
				    programs[_i].l2);
}
END_TEST

Suite *
gemm_mixed_suite(void)
{
	Suite *s = suite_create("gemm_mixed");
	TCase *t = tcase_create("core");

	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_pack_layout);
	tcase_add_test(t, test_pack_refusals);
	tcase_add_test(t, test_checks);
	tcase_add_test(t, test_params);
	tcase_add_test(t, test_ptxas);
	tcase_add_test(t, test_i4_decode);
	tcase_add_test(t, test_u4_zero_groups_in_tile);
	tcase_add_test(t, test_group_spans_tiles);
	tcase_add_test(t, test_f8);
	tcase_add_test(t, test_mxfp4);
	tcase_add_test(t, test_grouped);
	tcase_add_loop_test(t, test_program_against_interpreter, 0, (int)NELEM(programs));
	suite_add_tcase(s, t);
	return s;
}
