/*
 * check_ws.c — the warp-specialised sm_90a GEMM mainloop (GemmSpec.mainloop
 * = CG_MAINLOOP_WS: TMA into a ring of mbarrier-guarded stages, a producer
 * warpgroup, consumer warpgroups): its checks (targets without TMA/wgmma,
 * f32 operands, group quantisation: diagnostics, no abort),
 * parameters and tensor maps, PTX for sm_90a assembled by ptxas (TMA,
 * mbarrier, setmaxnreg, elect.sync present; no spills), and kernels on the
 * CPU emulator, whose mbarriers and tensor copies follow the PTX ISA, against
 * a host reference in double with NaN-poisoned outputs: dense and grouped,
 * ragged M, one and two consumer warpgroups, 2 to 8 stages, bk 64 and 128,
 * B [K,N], empty experts, persistent over more tiles than CTAs, T = 0;
 * gathered A rows (the MoE up-projection) by the producer warpgroup's
 * cp.async into the stages, completing on the mbarriers.  The
 * outputs must equal the cp.async wgmma mainloop's bit for bit (both
 * accumulate k16 step by k16 step).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "gemm_harness.h"

static void
tiles(GemmSpec *s, int bm, int bn, int bk, int wm, int wn, int st)
{
	gh_tiles(s, bm, bn, bk, wm, wn, st);
	s->mainloop = CG_MAINLOOP_WS;
}

/* Ping-pong: each of two consumer warpgroups owns a bm x bn tile, persistent over ctas CTAs. */
static void
pingpong(GemmSpec *s, int bm, int bn, int bk, int st, int ctas)
{
	tiles(s, bm, bn, bk, 2, 2, st);
	s->ws_mode = CG_WS_PINGPONG;
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = ctas;
}

/* The case on the ws mainloop against the reference and, when the tile
 * suits it, the wgmma mainloop's output (must be identical). */
static void
check_case(const GemmCase *c, double tol)
{
	const char *what = c->what ? c->what : "case";
	CgTarget t = {"emu", NULL, 3};
	GemmCase w = *c;
	GemmRun r, q;
	GemmErr e, f;
	Diag d;

	diag_init(&d, NULL);
	w.s.mainloop = CG_MAINLOOP_WS;
	ck_assert_msg(gh_run(&r, &w) == 0 && gh_compare(&r, &e) == 0, "%s: ws: %s", what, r.msg);
	ck_assert_msg(e.err < tol, "%s: ws: relative L2 error %g >= %g", what, e.err, tol);
	w.s.mainloop = CG_MAINLOOP_WGMMA;
	w.s.ws_mode = CG_WS_COOPERATIVE;	/* ping-pong: one warpgroup's tile, as wgmma's with 4 warps */
	if (w.s.stages > 5)
		w.s.stages = 3;
	if (cg_gemm_check(&t, &w.s, &d) == 0) {
		ck_assert_msg(gh_run(&q, &w) == 0 && gh_compare(&q, &f) == 0, "%s: wgmma: %s", what, q.msg);
		ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0,
			      "%s: ws and wgmma outputs differ (errors %g, %g)", what, e.err, f.err);
		gh_free(&q);
	}
	gh_free(&r);
}

/* ---- checks, parameters, PTX ---- */

START_TEST(test_ws_needs_sm90a_and_refuses_what_tma_cannot)
{
	const char *sms[] = {"sm_80", "sm_90"};
	CgTarget a = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;

	diag_init(&d, NULL);
	gh_spec_dense_bias_gelu(&s, 256, 128);
	tiles(&s, 128, 128, 64, 2, 2, 4);
	for (size_t i = 0; i < NELEM(sms); i++) {
		CgTarget t = {sms[i], NULL, 3};
		CgModule *m = cg_module_new(&t, "w", &d);
		ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
		ck_assert_ptr_nonnull(strstr(d.last, "warp-specialised"));
		ck_assert_int_eq(cg_emit_gemm(m, "g", &s, &d), -1);
		ck_assert_int_eq(cg_module_nkernel(m), 0);
		cg_module_free(m);
	}
	ck_assert_msg(cg_gemm_check(&a, &s, &d) == 0, "%s", d.last);
	gh_spec_grouped_swiglu(&s, 8, 256, 256, 2);		/* gathered rows: cp.async */
	tiles(&s, 128, 128, 64, 2, 2, 4);
	ck_assert_msg(cg_gemm_check(&a, &s, &d) == 0, "%s", d.last);
	tiles(&s, 256, 128, 128, 4, 2, 2);			/* 32 A chunks per producer thread */
	ck_assert_int_eq(cg_gemm_check(&a, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "chunks per producer"));
	gh_spec_dense_bias_gelu(&s, 256, 128);
	tiles(&s, 128, 128, 64, 2, 2, 4);
	s.a_dt = DT_F32;
	ck_assert_int_eq(cg_gemm_check(&a, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "TMA copies"));
	s.a_dt = DT_BF16;
	s.stages = 9;
	ck_assert_int_eq(cg_gemm_check(&a, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "2..8"));
	tiles(&s, 128, 128, 64, 2, 1, 4);			/* 2 consumer warps */
	ck_assert_int_eq(cg_gemm_check(&a, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "consumer warps"));
	tiles(&s, 128, 256, 64, 2, 2, 4);			/* 128x256 on one warpgroup */
	ck_assert_int_eq(cg_gemm_check(&a, &s, &d), -1);
}
END_TEST

START_TEST(test_ws_params_and_tensor_maps)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;
	CgModule *m;
	const CgKernel *k;

	diag_init(&d, NULL);
	gh_spec_grouped_scale_scatter(&s, 8, 512, 256);
	tiles(&s, 128, 256, 64, 2, 4, 4);
	s.sched = CG_SCHED_PERSISTENT;
	s.ctas = 132;
	m = cg_module_new(&t, "p", &d);
	ck_assert_msg(cg_emit_gemm(m, "g", &s, &d) == 0, "%s", d.last);
	k = cg_module_find(m, "g");
	ck_assert_int_eq(k->block[0], 384);
	ck_assert_int_eq(k->maxnreg, 168);	/* pinned: setmaxnreg's pool is 384 x 168 */
	ck_assert_int_eq(k->grid[0].b, 132);
	ck_assert_int_eq(k->ntmap, 2);
	ck_assert_int_eq(k->param[k->nparam - 3].kind, CGP_TMAP);
	ck_assert_str_eq(k->param[k->nparam - 3].role, "A_map");
	ck_assert_str_eq(k->param[k->nparam - 2].role, "B_map");
	ck_assert_str_eq(k->param[k->nparam - 1].role, "T");
	ck_assert_str_eq(k->tmap[0].of, "A");
	ck_assert_int_eq(k->tmap[0].rank, 2);
	ck_assert_int_eq(k->tmap[0].dims[1].a, 1);		/* M = T rows */
	ck_assert_int_eq(k->tmap[0].box[0], 64);
	ck_assert_int_eq(k->tmap[0].box[1], 128);
	ck_assert_int_eq(k->tmap[1].rank, 3);			/* grouped B: [E][N][K] */
	ck_assert_int_eq(k->tmap[1].dims[2].b, 8);
	ck_assert_int_eq(k->tmap[1].strides[1], 512 * 256 * 2);
	ck_assert_int_eq(k->tmap[1].box[1], 256);
	ck_assert_int_eq(k->tmap[1].swizzle, 128);
	ck_assert_int_eq(cg_tmap_check(&k->tmap[1], 4, &d), 0);
	ck_assert_ptr_nonnull(strstr(k->note, "ws tma"));
	cg_module_free(m);
	/* gathered A: B's map only */
	gh_spec_grouped_swiglu(&s, 8, 512, 256, 2);
	tiles(&s, 128, 128, 64, 2, 2, 4);
	m = cg_module_new(&t, "q", &d);
	ck_assert_msg(cg_emit_gemm(m, "g", &s, &d) == 0, "%s", d.last);
	k = cg_module_find(m, "g");
	ck_assert_int_eq(k->ntmap, 1);
	ck_assert_int_eq(k->maxnreg, 0);	/* one consumer warpgroup: no setmaxnreg */
	ck_assert_str_eq(k->param[1].role, "gather_idx");
	ck_assert_str_eq(k->param[k->nparam - 2].role, "B_map");
	ck_assert_int_ne(k->param[k->nparam - 3].kind, CGP_TMAP);
	ck_assert_str_eq(k->tmap[0].of, "B");
	ck_assert_ptr_nonnull(strstr(k->note, "cp.async-a"));
	cg_module_free(m);
}
END_TEST

START_TEST(test_ws_ptx_assembles_for_sm90a)
{
	GemmSpec s[4];
	int ns = 0;
	CgModule *m;
	const char *ptx;

	gh_spec_dense_bias_gelu(&s[ns], 14336, 4096);		/* dense prefill, 2 consumers */
	tiles(&s[ns++], 128, 256, 64, 2, 4, 4);
	gh_spec_grouped_scale_scatter(&s[ns], 8, 4096, 14336);	/* Mixtral down, persistent */
	tiles(&s[ns++], 128, 256, 64, 2, 4, 4);
	s[ns - 1].sched = CG_SCHED_PERSISTENT;
	s[ns - 1].ctas = 132;
	gh_spec_kn_residual(&s[ns], 512, 256, DT_F16);		/* f16, B [K,N], one consumer */
	tiles(&s[ns++], 128, 128, 64, 2, 2, 6);
	m = gh_emit_specs("sm_90a", GH_MMA, s, ns, "w");
	ptx = gh_ptx(m);
	ck_assert_int_eq(gh_count(ptx, ".entry"), ns);
	ck_assert(gh_count(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes") > 0);
	ck_assert(gh_count(ptx, "cp.async.bulk.tensor.3d") > 0);
	ck_assert(gh_count(ptx, ".param .align 64 .b8") >= 2 * ns);
	ck_assert(gh_count(ptx, "mbarrier.try_wait.parity") >= 2 * ns);
	ck_assert(gh_count(ptx, "mbarrier.arrive.expect_tx") >= ns);
	ck_assert(gh_count(ptx, "setmaxnreg.inc.sync.aligned.u32 232") >= 2);
	ck_assert(gh_count(ptx, "setmaxnreg.dec.sync.aligned.u32 40") >= 2);
	ck_assert(gh_count(ptx, ".maxnreg 168") >= 2);
	ck_assert(gh_count(ptx, "elect.sync") >= ns);
	ck_assert(gh_count(ptx, "wgmma.mma_async") > 0);
	ck_assert_int_eq(gh_count(ptx, "cp.async.cg"), 0);
	gh_assemble(m, ns, "check_ws", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
}
END_TEST

/* Gathered A (Mixtral's up-projection, two consumers; one consumer with
 * bk 128): cp.async chunks, their arrival on the stage's mbarrier, the
 * consumers' proxy fence, B by TMA; 56 producer registers (persistent), 40 (tiles). */
START_TEST(test_ws_gather_ptx_assembles_for_sm90a)
{
	GemmSpec s[2];
	CgModule *m;
	const char *ptx;

	gh_spec_grouped_swiglu(&s[0], 8, 28672, 4096, 2);
	tiles(&s[0], 128, 256, 64, 2, 4, 4);
	s[0].sched = CG_SCHED_PERSISTENT;
	s[0].ctas = 132;
	gh_spec_grouped_swiglu(&s[1], 8, 1024, 512, 2);
	tiles(&s[1], 128, 128, 128, 2, 2, 3);
	m = gh_emit_specs("sm_90a", GH_MMA, s, 2, "wg");
	ptx = gh_ptx(m);
	ck_assert_int_eq(gh_count(ptx, ".entry"), 2);
	ck_assert(gh_count(ptx, "cp.async.cg.shared.global") > 0);
	ck_assert(gh_count(ptx, "cp.async.mbarrier.arrive.noinc.shared::cta.b64") >= 2);
	ck_assert(gh_count(ptx, "fence.proxy.async.shared::cta") >= 2);
	ck_assert(gh_count(ptx, "cp.async.bulk.tensor.3d") >= 2);
	ck_assert_int_eq(gh_count(ptx, "cp.async.bulk.tensor.2d"), 0);	/* A is not a box */
	/* 48 / 232 hung (the pool); persistent gathered A splits 56 / 224 (40 spilled), 56 + 2 x 224 = 3 x 168 */
	ck_assert_int_eq(gh_count(ptx, "setmaxnreg.dec.sync.aligned.u32 56"), 1);
	ck_assert_int_eq(gh_count(ptx, "setmaxnreg.inc.sync.aligned.u32 224"), 1);
	ck_assert(gh_count(ptx, ".maxnreg 168") >= 1);
	gh_assemble(m, 2, "check_ws gather", GH_NO_SERIAL);
	/* Since session 25 (32-bit descriptor adds, the k-loop twice for the
	 * row-block skip) ptxas 13.0 spills 12 bytes in the 128x256 kernel:
	 * bounded here, and the gathered WS mainloop is opt-in (--debug=ws-gather) */
	for (int i = 0; i < 2; i++) {
		const CgKernel *k = cg_module_kernel(m, i);
		ck_assert_msg(k->spill_stores <= 16 && k->spill_loads <= 24, "%s: %d/%d bytes spilled", k->name,
			      k->spill_stores, k->spill_loads);
	}
	cg_module_free(m);
}
END_TEST

/* Ping-pong at Mixtral's sizes (dense up-projection, the down projection
 * with scatter, the gathered gate|up): 384 threads, the cooperative
 * kernel's register split, bar.sync / bar.arrive on the turn barriers. */
START_TEST(test_ws_pingpong_ptx_assembles_for_sm90a)
{
	CgTarget a = {"sm_90a", NULL, 3};
	GemmSpec s[3];
	CgModule *m;
	const char *ptx;
	Diag d;

	gh_spec_dense_bias_gelu(&s[0], 14336, 4096);
	pingpong(&s[0], 128, 128, 64, 6, 132);
	gh_spec_grouped_scale_scatter(&s[1], 8, 4096, 14336);
	pingpong(&s[1], 128, 128, 64, 6, 132);
	gh_spec_grouped_swiglu(&s[2], 8, 28672, 4096, 2);
	pingpong(&s[2], 128, 128, 64, 6, 132);
	m = gh_emit_specs("sm_90a", GH_MMA, s, 3, "pp");
	ck_assert_int_eq(cg_module_find(m, "pp0")->block[0], 384);
	ck_assert_int_eq(cg_module_find(m, "pp0")->maxnreg, 168);
	ck_assert_ptr_nonnull(strstr(cg_module_find(m, "pp0")->note, "w2x2x2+4 s6 ws tma pingpong"));
	ptx = gh_ptx(m);
	ck_assert_int_eq(gh_count(ptx, "setmaxnreg.inc.sync.aligned.u32 232"), 2);
	ck_assert_int_eq(gh_count(ptx, "setmaxnreg.dec.sync.aligned.u32 40"), 2);
	ck_assert_int_eq(gh_count(ptx, "setmaxnreg.inc.sync.aligned.u32 224"), 1);	/* gathered, persistent */
	ck_assert_int_eq(gh_count(ptx, "setmaxnreg.dec.sync.aligned.u32 56"), 1);
	ck_assert_int_eq(gh_count(ptx, "bar.sync %r"), 3);
	ck_assert_int_eq(gh_count(ptx, "bar.arrive %r"), 3);
	ck_assert(gh_count(ptx, "wgmma.mma_async") > 0);
	gh_assemble(m, 3, "check_ws pingpong", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
	/* refused: two warpgroups per tile, the tiles schedule, FP8 */
	diag_init(&d, NULL);
	tiles(&s[0], 128, 256, 64, 2, 4, 4);
	s[0].ws_mode = CG_WS_PINGPONG;
	ck_assert_int_eq(cg_gemm_check(&a, &s[0], &d), -1);
	ck_assert_msg(strstr(d.last, "ping-pong: 8 warps per tile"), "%s", d.last);
	pingpong(&s[0], 128, 128, 64, 6, 132);
	s[0].sched = CG_SCHED_TILES;
	ck_assert_int_eq(cg_gemm_check(&a, &s[0], &d), -1);
	ck_assert_msg(strstr(d.last, "ping-pong needs the persistent schedule"), "%s", d.last);
	s[0].ws_mode = CG_WS_PINGPONG;
	s[0].mainloop = CG_MAINLOOP_WGMMA;
	ck_assert_int_eq(cg_gemm_check(&a, &s[0], &d), -1);
	ck_assert_msg(strstr(d.last, "ping-pong"), "%s", d.last);
}
END_TEST

/* Clusters of 2 (GemmSpec.cluster), their PTX and ptxas (the emulator runs
 * them: the "clusters" case below): the cluster check and rank,
 * barrier.cluster after the init and before the exit, A's half box
 * multicast, the release of each stage in the peer CTA too; the refusals. */
START_TEST(test_ws_cluster_ptx_assembles_for_sm90a)
{
	CgTarget a = {"sm_90a", NULL, 3}, e = {"emu", NULL, 3};
	GemmSpec s[3];
	CgModule *m;
	const CgKernel *k;
	const char *ptx;
	Diag d;

	gh_spec_dense_bias_gelu(&s[0], 14336, 4096);		/* cooperative 128x256 */
	tiles(&s[0], 128, 256, 64, 2, 4, 4);
	gh_spec_grouped_scale_scatter(&s[1], 8, 4096, 14336);	/* ping-pong, grouped */
	pingpong(&s[1], 128, 128, 64, 6, 132);
	gh_spec_kn_residual(&s[2], 512, 256, DT_F16);		/* one consumer, B [K,N] */
	tiles(&s[2], 128, 128, 64, 2, 2, 6);
	for (int i = 0; i < 3; i++) {
		s[i].sched = CG_SCHED_PERSISTENT;
		s[i].ctas = 132;
		s[i].cluster = 2;
	}
	m = gh_emit_specs("sm_90a", GH_MMA, s, 3, "c");
	k = cg_module_find(m, "c1");
	ck_assert_int_eq(k->cluster, 2);
	ck_assert_int_eq(k->tmap[0].box[1], 64);		/* half of A's 128 rows */
	ck_assert_ptr_nonnull(strstr(k->note, "pingpong cluster2 multicast-a"));
	ptx = gh_ptx(m);
	ck_assert_int_eq(gh_count(ptx, "mov.u32 n, %cluster_nctarank;"), 3);
	ck_assert_int_eq(gh_count(ptx, "%cluster_ctarank"), 3);
	ck_assert_int_eq(gh_count(ptx, "barrier.cluster.arrive;"), 6);
	ck_assert_int_eq(gh_count(ptx, "barrier.cluster.wait;"), 6);
	ck_assert(gh_count(ptx, ".multicast::cluster [") >= 3);
	ck_assert(gh_count(ptx, "mapa.shared::cluster.u32") >= 3);
	ck_assert(gh_count(ptx, "mbarrier.arrive.shared::cluster.b64 _,") >= 3);
	ck_assert_int_eq(gh_count(ptx, "mbarrier.arrive.release.cluster"), 0);	/* MEMBAR.ALL.GPU a k-tile */
	gh_assemble(m, 3, "check_ws cluster", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
	diag_init(&d, NULL);
	ck_assert_msg(cg_gemm_check(&e, &s[0], &d) == 0, "%s", d.last);	/* emulated */
	s[0].ctas = 131;
	ck_assert_int_eq(cg_gemm_check(&a, &s[0], &d), -1);
	ck_assert_msg(strstr(d.last, "even number of CTAs (131)"), "%s", d.last);
	s[0].ctas = 132;
	s[0].N = 14336 - 256;				/* 55 column tiles */
	ck_assert_int_eq(cg_gemm_check(&a, &s[0], &d), -1);
	ck_assert_msg(strstr(d.last, "55 of them"), "%s", d.last);
	gh_spec_grouped_swiglu(&s[0], 8, 1024, 512, 2);
	tiles(&s[0], 128, 128, 64, 2, 2, 4);
	s[0].sched = CG_SCHED_PERSISTENT;
	s[0].ctas = 132;
	s[0].cluster = 2;
	ck_assert_int_eq(cg_gemm_check(&a, &s[0], &d), -1);
	ck_assert_msg(strstr(d.last, "not with gathered"), "%s", d.last);
	s[0].cluster = 3;
	ck_assert_int_eq(cg_gemm_check(&a, &s[0], &d), -1);
	ck_assert_msg(strstr(d.last, "clusters of 3 CTAs"), "%s", d.last);

	/* sharing B (cluster_b): row-tile pairs of one column tile, dense, B [N,K];
	 * A's box whole, B's halved and multicast; an odd column-tile count is fine */
	gh_spec_dense_bias_gelu(&s[0], 14336 - 256, 4096);	/* 55 column tiles */
	tiles(&s[0], 128, 256, 64, 2, 4, 4);
	s[0].wg_wide = 1;
	s[1] = s[0];
	pingpong(&s[1], 128, 128, 64, 6, 132);
	for (int i = 0; i < 2; i++) {
		s[i].sched = CG_SCHED_PERSISTENT;
		s[i].ctas = 132;
		s[i].cluster = 2;
		s[i].cluster_b = 1;
	}
	m = gh_emit_specs("sm_90a", GH_MMA, s, 2, "b");
	k = cg_module_find(m, "b0");
	ck_assert_int_eq(k->cluster, 2);
	ck_assert_int_eq(k->tmap[0].box[1], 128);	/* A: the tile's rows */
	ck_assert_int_eq(k->tmap[1].box[1], 128);	/* B: half of its 256 */
	ck_assert_ptr_nonnull(strstr(k->note, "cluster2 multicast-b wg64x256"));
	ck_assert_int_eq(cg_module_find(m, "b1")->tmap[1].box[1], 64);
	ptx = gh_ptx(m);
	ck_assert_int_eq(gh_count(ptx, ".multicast::cluster ["), 2);	/* B's box, bk 64: one a k-tile */
	ck_assert(gh_count(ptx, "mapa.shared::cluster.u32") >= 2);
	gh_assemble(m, 2, "check_ws cluster_b", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
	gh_spec_grouped_scale_scatter(&s[0], 8, 768, 256);	/* grouped: 3 column tiles */
	tiles(&s[0], 128, 256, 64, 2, 4, 4);
	s[0].sched = CG_SCHED_PERSISTENT;
	s[0].ctas = 132;
	s[0].cluster = 2;
	s[0].cluster_b = 1;
	ck_assert_int_eq(cg_gemm_check(&a, &s[0], &d), -1);
	ck_assert_msg(strstr(d.last, "even number of column tiles (3)"), "%s", d.last);
	s[0].N = 512;
	ck_assert_msg(cg_gemm_check(&a, &s[0], &d) == 0, "%s", d.last);
	s[0].cluster = 0;				/* grouped: the pairs alone */
	ck_assert_msg(cg_gemm_check(&a, &s[0], &d) == 0, "%s", d.last);
	gh_spec_dense_bias_gelu(&s[0], 512, 256);
	tiles(&s[0], 128, 256, 64, 2, 4, 4);
	s[0].cluster_b = 1;
	ck_assert_int_eq(cg_gemm_check(&a, &s[0], &d), -1);
	ck_assert_msg(strstr(d.last, "cluster_b without clusters of 2"), "%s", d.last);
}
END_TEST

/*
 * Grouped clusters sharing B (GemmSpec.cluster_b, --debug=grouped-c2): the
 * MoE gate|up (gathered A by cp.async, B's half boxes multicast) and down
 * (A by TMA, scattered, ping-pong) as DeepSeek-V3 runs them at T = 4096, on
 * sm_90a: each pair either shares B (rank r's half multicast) or, an
 * expert's odd last row tile, loads both halves itself (k->bshare: both
 * kinds of TMA load are there); the releases reach the peer; ptxas spills
 * nothing (the gathered producer 56 registers, the consumers 224).
 */
START_TEST(test_ws_grouped_cluster_b_ptx_assembles_for_sm90a)
{
	GemmSpec s[2];
	CgModule *m;
	const CgKernel *k;
	const char *ptx;

	gh_spec_grouped_swiglu(&s[0], 256, 4096, 7168, 8);	/* gate|up: gathered, 128x256 cooperative */
	tiles(&s[0], 128, 256, 64, 2, 4, 4);
	s[0].live_rows = 1;
	gh_spec_grouped_scale_scatter(&s[1], 256, 7168, 2048);	/* down: TMA A, ping-pong 128x128 */
	pingpong(&s[1], 128, 128, 64, 6, 132);
	for (int i = 0; i < 2; i++) {
		s[i].sched = CG_SCHED_PERSISTENT;
		s[i].ctas = 132;
		s[i].cluster = 2;
		s[i].cluster_b = 1;
	}
	m = gh_emit_specs("sm_90a", GH_MMA, s, 2, "g");
	k = cg_module_find(m, "g0");
	ck_assert_int_eq(k->cluster, 2);
	ck_assert_int_eq(k->ntmap, 1);			/* B only: A gathered */
	ck_assert_int_eq(k->tmap[0].box[1], 128);	/* half of B's 256 rows */
	ck_assert_ptr_nonnull(strstr(k->note, "cp.async-a cluster2 multicast-b"));
	k = cg_module_find(m, "g1");
	ck_assert_int_eq(k->tmap[0].box[1], 64);	/* A: half the tile's rows (pairs of column tiles share A) */
	ck_assert_int_eq(k->tmap[1].box[1], 64);	/* B: half of 128 */
	ck_assert_ptr_nonnull(strstr(k->note, "pingpong cluster2 multicast-b"));
	ptx = gh_ptx(m);
	ck_assert_int_eq(gh_count(ptx, "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
				       ".multicast::cluster ["), 2);	/* one B half a k-tile, each kernel */
	ck_assert_int_eq(gh_count(ptx, "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
				       "["), 4);			/* both halves here: odd last row tiles */
	ck_assert_int_eq(gh_count(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
				       ".multicast::cluster ["), 1);	/* the down's A half, shared by column tiles */
	ck_assert_int_eq(gh_count(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
				       "["), 2);			/* its own tile: two half boxes */
	ck_assert(gh_count(ptx, "mapa.shared::cluster.u32") >= 2);
	ck_assert_int_eq(gh_count(ptx, "mbarrier.arrive.release.cluster"), 0);
	ck_assert_int_eq(gh_count(ptx, "setmaxnreg.dec.sync.aligned.u32 56;"), 1);
	ck_assert_int_eq(gh_count(ptx, "setmaxnreg.inc.sync.aligned.u32 224;"), 1);
	gh_assemble(m, 2, "check_ws grouped cluster_b", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
}
END_TEST

/*
 * The pairs of grouped clusters sharing B, without the cluster (which the
 * emulator cannot run: cluster_b with cluster 0 on a grouped GEMM, each CTA
 * loading both halves of B's tile itself): the work items 2i, 2i + 1 are an
 * expert's row tiles 2j, 2j + 1 of one column tile, or an odd last row
 * tile's column tiles 2j, 2j + 1 (gemm_tile_coords' grouped_pairs); every
 * tile once, against the reference and bit for bit the wgmma mainloop.
 * Experts of 0..300 rows (1, 2 and 3 row tiles of 128), 2 and 4 column
 * tiles; scattered (TMA A: half-tile boxes, a pair of column tiles
 * sharing A's tile; with live rows too) and gathered A, cooperative and
 * ping-pong, persistent over fewer CTAs than pairs, and T = 0.
 */
/*
 * The grouped pairs' cases, each through run (the pairs alone, or in
 * clusters of 2): experts of 0..300 rows (1496 in all), scattered rows
 * 128x128 over 2 column tiles persistent over 6 CTAs, ping-pong over 4
 * column tiles and 4 CTAs, gathered A (top-2) with SwiGLU and live rows at
 * 128x256 over 2 CTAs; `odd` adds live rows on ping-pong over 3 CTAs (an odd
 * count: the pairs alone only).  c is left at the gathered case.
 */
static void
grouped_pair_cases(GemmCase *c, void (*run)(GemmCase *, double), int odd)
{
	static const int rows[12] = {1, 0, 64, 128, 129, 200, 256, 257, 300, 0, 21, 140};	/* 1496 */

	memcpy(c->counts, rows, sizeof rows);
	c->what = "grouped pairs sharing B: scattered rows, 128x128, 2 column tiles, 6 CTAs";
	gh_spec_grouped_scale_scatter(&c->s, 12, 256, 192);
	tiles(&c->s, 128, 128, 64, 2, 2, 4);
	c->s.sched = CG_SCHED_PERSISTENT;
	c->s.ctas = 6;
	c->s.cluster_b = 1;
	c->T = 1496;
	run(c, 1e-2);
	c->what = "grouped pairs sharing B: scattered rows, ping-pong 128x128, 4 column tiles, 4 CTAs";
	gh_spec_grouped_scale_scatter(&c->s, 12, 512, 128);
	pingpong(&c->s, 128, 128, 64, 5, 4);
	c->s.cluster_b = 1;
	run(c, 1e-2);
	if (odd) {
		c->what = "grouped pairs: scattered rows, live rows (A_rows_map), ping-pong, 3 CTAs";
		c->s.live_rows = 1;
		c->s.ctas = 3;
		run(c, 1e-2);
		c->s.live_rows = 0;
	}
	c->what = "grouped pairs sharing B: gathered A (top-2), SwiGLU, live rows, 128x256, 2 CTAs";
	gh_spec_grouped_swiglu(&c->s, 12, 512, 192, 2);
	tiles(&c->s, 128, 256, 64, 2, 4, 3);
	c->s.sched = CG_SCHED_PERSISTENT;
	c->s.ctas = 2;
	c->s.cluster_b = 1;
	c->s.live_rows = 1;
	c->T = 748;
	run(c, 1e-2);
}

static void
pair_case(GemmCase *c, double tol)
{
	check_case(c, tol);
}

START_TEST(test_ws_emu_grouped_pairs)
{
	GemmCase c = {0};

	grouped_pair_cases(&c, pair_case, 1);
	c.what = "grouped pairs: T = 0";
	memset(c.counts, 0, sizeof c.counts);
	c.T = 0;
	check_case(&c, 1e-2);
}
END_TEST


/* ---- the kernels on the emulator ---- */

/*
 * C through shared memory by TMA stores (GemmSpec.tma_store, --debug=
 * ws-tma-store): each consumer warpgroup's 64-row blocks into its swizzled
 * buffer (or two, alternating), stored by the emulator's cp.async.bulk.tensor ... bulk_group (rows
 * past M clipped by the map, the buffer reused only after
 * wait_group.read); bit for bit against the register epilogue of the same
 * spec, and against the reference: ragged M (the last block partly and
 * wholly past M), one, two and three consumer warpgroups, tiles and
 * persistent over more tiles than CTAs (the wait for a tile's last block in
 * the next tile), ping-pong, 64-column warpgroup tiles, f16 with B [K,N] and
 * the residual read from C in place.
 */
static void
tma_store_case(GemmCase *c, int nbuf)
{
	GemmCase r = *c;
	GemmRun a, b;
	GemmErr e;

	c->s.tma_store = nbuf;
	r.s.tma_store = 0;
	ck_assert_msg(gh_run(&a, c) == 0 && gh_compare(&a, &e) == 0, "%s: tma store (%d buffers): %s", c->what,
		      nbuf, a.msg);
	ck_assert_msg(e.err < 1e-2, "%s: tma store: relative L2 error %g", c->what, e.err);
	ck_assert_msg(gh_run(&b, &r) == 0, "%s: register stores: %s", c->what, b.msg);
	ck_assert_msg(a.cbytes == b.cbytes && memcmp(a.C, b.C, a.cbytes) == 0,
		      "%s: TMA and register stores differ", c->what);
	gh_free(&a);
	gh_free(&b);
}

START_TEST(test_ws_emu_tma_store)
{
	GemmCase c = {.what = "two consumers over 256 rows, M = 300"};

	gh_spec_dense_bias_gelu(&c.s, 256, 320);
	tiles(&c.s, 256, 128, 64, 4, 2, 4);
	c.T = 300;
	tma_store_case(&c, 1);
	c.what = "persistent: 3 CTAs over 4x2 tiles, one consumer, M = 450";
	tiles(&c.s, 128, 128, 64, 2, 2, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 3;
	c.T = 450;
	tma_store_case(&c, 2);
	c.what = "64x64 tiles (64-column warpgroup tiles), M = 70";
	tiles(&c.s, 64, 64, 64, 2, 2, 3);
	c.T = 70;
	tma_store_case(&c, 1);
	c.what = "ping-pong, 3 CTAs, M = 330";
	pingpong(&c.s, 128, 128, 64, 4, 3);
	c.T = 330;
	tma_store_case(&c, 2);
	c.what = "three consumers of 64 rows, persistent, M = 200";
	tiles(&c.s, 192, 128, 64, 3, 4, 4);
	c.s.ws_mode = CG_WS_COOPERATIVE;
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 2;
	c.T = 200;
	tma_store_case(&c, 1);
	c = (GemmCase){.what = "f16, B [K,N], the residual in C read in place, M = 140"};
	gh_spec_kn_residual(&c.s, 256, 192, DT_F16);
	tiles(&c.s, 128, 256, 64, 2, 4, 3);
	c.in_place = 1;
	c.T = 140;
	tma_store_case(&c, 2);
}
END_TEST

/* What a TMA store cannot write refused: grouped, swiglu, f32 C (diagnostics, no abort). */
START_TEST(test_ws_tma_store_refuses_other_outputs)
{
	CgTarget t = {"emu", NULL, 3};
	GemmSpec s;
	Diag d;

	diag_init(&d, NULL);
	gh_spec_grouped_scale_scatter(&s, 8, 256, 256);
	tiles(&s, 128, 128, 64, 2, 2, 4);
	s.tma_store = 1;
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "plain bf16/f16 tile"));
	gh_spec_dense_bias_gelu(&s, 256, 256);
	tiles(&s, 128, 128, 64, 2, 2, 4);
	s.tma_store = 1;
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), 0);
	s.c_dt = DT_F32;
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "plain bf16/f16 tile"));
}
END_TEST

/* sm_90a: the stores, their bulk groups and the waits for their reads; no spills (two consumers with one
 * and two buffers, ping-pong). */
START_TEST(test_ws_tma_store_ptx)
{
	GemmSpec s[3];
	CgModule *m;
	const char *ptx;

	gh_spec_dense_bias_gelu(&s[0], 14336, 4096);	/* dense_up's 256x128 plans */
	tiles(&s[0], 256, 128, 64, 4, 2, 4);
	s[0].tma_store = 1;
	s[1] = s[0];
	pingpong(&s[1], 128, 128, 64, 6, 132);
	s[2] = s[0];	/* two buffers a warpgroup, 3 stages (persistent, ptxas spills 140 bytes: not yet) */
	tiles(&s[2], 256, 128, 64, 4, 2, 3);
	s[2].tma_store = 2;
	m = gh_emit_specs("sm_90a", GH_MMA, s, 3, "t");
	ck_assert_ptr_nonnull(strstr(cg_module_find(m, "t0")->note, "tma-store"));
	ck_assert_int_eq(cg_module_find(m, "t0")->ntmap, 3);
	ck_assert_str_eq(cg_module_find(m, "t0")->tmap[2].of, "C");
	ptx = gh_ptx(m);
	ck_assert_int_ge(gh_count(ptx, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"), 2);
	ck_assert_int_ge(gh_count(ptx, "cp.async.bulk.commit_group"), 2);
	ck_assert_int_ge(gh_count(ptx, "cp.async.bulk.wait_group.read 0"), 4);
	ck_assert_int_ge(gh_count(ptx, "fence.proxy.async.shared::cta"), 2);
	gh_assemble(m, 3, "check_ws tma store", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
}
END_TEST

static const struct {
	const char *what;
	int N, K, tile[6], T;
} dense_cases[] = {
	{"one consumer warpgroup, 3 k-tiles, 4 stages, ragged M", 256, 192, {128, 128, 64, 2, 2, 4}, 77},
	{"two consumers over 256 rows, 4 stages, 10 k-tiles", 256, 640, {256, 128, 64, 4, 2, 4}, 300},
	{"8 stages, 10 k-tiles", 128, 640, {128, 64, 64, 2, 2, 8}, 150},
	{"two consumers over 256 columns, 2 stages", 512, 256, {128, 256, 64, 2, 4, 2}, 130},
	{"bk 128: two A and B boxes a stage, 3 stages", 256, 384, {128, 128, 128, 2, 4, 3}, 200},
	{"fewer k-tiles than stages, M < one tile", 128, 64, {128, 128, 64, 2, 2, 6}, 5},
	{"192 columns: two consumers of 96 (gpt-oss), 5 stages", 576, 192, {128, 192, 64, 2, 4, 5}, 150},
};

START_TEST(test_ws_emu_dense)
{
	GemmCase c = {.what = dense_cases[_i].what};
	const int *tl = dense_cases[_i].tile;

	gh_spec_dense_bias_gelu(&c.s, dense_cases[_i].N, dense_cases[_i].K);
	tiles(&c.s, tl[0], tl[1], tl[2], tl[3], tl[4], tl[5]);
	c.T = dense_cases[_i].T;
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_ws_emu_dense_persistent_more_tiles_than_ctas)
{
	GemmCase c = {.what = "persistent dense: 3 CTAs over 4x2 tiles"};

	gh_spec_dense_bias_gelu(&c.s, 256, 320);
	tiles(&c.s, 128, 128, 64, 2, 2, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 3;
	c.T = 450;
	check_case(&c, 1e-2);
}
END_TEST

/*
 * 256-column warpgroup tiles (GemmSpec.wg_wide: 128x256 as two 64x256
 * warpgroups, one wgmma m64n256k16 a k-step each; ping-pong 64x256 a
 * warpgroup): against the reference and bit for bit against the same
 * problem on 128x128 warpgroup tiles (each element's sum runs over the same
 * k-steps in the same order).  M = 150: the second row tile's second
 * warpgroup has no row (it issues no wgmma).  Then the PTX: m64n256k16, no
 * m64n128k16, ptxas without spills.
 */
static void
wide_against_narrow(GemmCase *c, const GemmSpec *narrow, double tol)
{
	GemmCase n = *c;
	GemmRun r, q;
	GemmErr e, f;

	n.s = *narrow;
	ck_assert_msg(gh_run(&r, c) == 0 && gh_compare(&r, &e) == 0, "%s: wide: %s", c->what, r.msg);
	ck_assert_msg(e.err < tol, "%s: wide: relative L2 error %g >= %g", c->what, e.err, tol);
	ck_assert_msg(gh_run(&q, &n) == 0 && gh_compare(&q, &f) == 0, "%s: narrow: %s", c->what, q.msg);
	ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0,
		      "%s: 64x256 and 128x128 warpgroup tiles differ (errors %g, %g)", c->what, e.err, f.err);
	gh_free(&r);
	gh_free(&q);
}

START_TEST(test_ws_emu_wide_warpgroup_tiles)
{
	CgTarget t = {"emu", NULL, 3};
	GemmCase c = {.what = "dense 128x256 wide, persistent, 3 CTAs, M = 150"};
	GemmSpec narrow, s[3];
	CgModule *m;
	const char *ptx;
	Diag d;

	diag_init(&d, NULL);
	gh_spec_dense_bias_gelu(&c.s, 512, 192);
	tiles(&c.s, 128, 256, 64, 2, 4, 2);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 3;
	c.T = 150;
	narrow = c.s;
	c.s.wg_wide = 1;
	wide_against_narrow(&c, &narrow, 1e-2);
	c.what = "dense 128x256 wide, tiles, 4 stages";
	c.s.sched = narrow.sched = CG_SCHED_TILES;
	c.s.stages = 4;
	wide_against_narrow(&c, &narrow, 1e-2);
	c.what = "dense wide on the cp.async wgmma mainloop";
	c.s.mainloop = CG_MAINLOOP_WGMMA;
	c.s.stages = 3;
	wide_against_narrow(&c, &narrow, 1e-2);
	c.what = "ping-pong 64x256 a warpgroup, 3 CTAs";
	c.s = narrow;
	pingpong(&c.s, 64, 256, 64, 4, 3);
	c.s.warps_m = 1;
	c.s.warps_n = 4;
	c.s.wg_wide = 1;
	wide_against_narrow(&c, &narrow, 1e-2);
	c.what = "f16, B [K,N] (four 64-column blocks a wgmma), residual, bk 128";
	gh_spec_kn_residual(&c.s, 512, 256, DT_F16);
	tiles(&c.s, 128, 256, 128, 2, 4, 2);
	narrow = c.s;
	c.s.wg_wide = 1;
	c.T = 70;
	wide_against_narrow(&c, &narrow, 1e-2);
	c.what = "grouped: routing weights, scattered rows, empty experts";
	gh_spec_grouped_scale_scatter(&c.s, 8, 512, 128);
	tiles(&c.s, 128, 256, 64, 2, 4, 3);
	narrow = c.s;
	c.s.wg_wide = 1;
	c.T = 200;
	{
		int counts[8] = {0, 150, 1, 0, 0, 30, 19, 0};
		memcpy(c.counts, counts, sizeof counts);
	}
	wide_against_narrow(&c, &narrow, 1e-2);
	/* --debug=grouped-wide's tiles: gpt-oss-20b's 128x192 as two 64x192 warpgroups */
	c.what = "grouped 128x192 wide: gathered A (top-4), bias + clamped SwiGLU, pairs sharing B, 3 CTAs";
	gh_spec_expert_bias_swiglu(&c.s, 8, 384, 192);
	c.s.m_per_t = 4;
	c.s.gather = 1;
	c.s.gather_div = 4;
	tiles(&c.s, 128, 192, 64, 2, 4, 3);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 3;
	c.s.cluster_b = 1;
	c.s.live_rows = 1;
	narrow = c.s;
	c.s.wg_wide = 1;
	{
		int counts[8] = {140, 0, 257, 1, 64, 128, 0, 210};
		memcpy(c.counts, counts, sizeof counts);
	}
	c.T = 200;
	wide_against_narrow(&c, &narrow, 1e-2);
	c.what = "grouped 128x192 wide: scattered rows, routing weights, tiles";
	gh_spec_grouped_scale_scatter(&c.s, 8, 384, 128);
	tiles(&c.s, 128, 192, 64, 2, 4, 4);
	narrow = c.s;
	c.s.wg_wide = 1;
	c.T = 800;
	wide_against_narrow(&c, &narrow, 1e-2);

	/* the layout, the refusals, the PTX */
	gh_spec_dense_bias_gelu(&s[0], 14336, 4096);
	tiles(&s[0], 128, 256, 64, 2, 4, 4);
	s[0].sched = CG_SCHED_PERSISTENT;
	s[0].ctas = 132;
	s[0].wg_wide = 1;
	s[1] = s[0];
	pingpong(&s[1], 64, 256, 64, 5, 132);
	s[1].warps_m = 1;
	s[1].warps_n = 4;
	s[1].wg_wide = 1;
	s[2] = s[0];
	s[2].mainloop = CG_MAINLOOP_MMA;	/* warp tiles: the flag is ignored there */
	ck_assert_int_eq(cg_gemm_check(&t, &s[2], &d), 0);
	s[2].mainloop = CG_MAINLOOP_WS;
	s[2].a_dt = s[2].b_dt = DT_F32;
	s[2].mma_dt = DT_TF32;
	ck_assert_int_eq(cg_gemm_check(&t, &s[2], &d), -1);
	m = gh_emit_specs("sm_90a", GH_MMA, s, 2, "w");
	ck_assert_ptr_nonnull(strstr(cg_module_find(m, "w0")->note, "wg64x256"));
	ck_assert_ptr_nonnull(strstr(cg_module_find(m, "w1")->note, "pingpong wg64x256"));
	ptx = gh_ptx(m);
	ck_assert_int_ge(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"), 2 * 4);
	ck_assert_int_eq(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n128k16"), 0);
	gh_assemble(m, 2, "check_ws wide", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
	s[2] = s[0];
	s[2].wg_wide = 0;	/* without the flag: 128 columns a warpgroup, as before */
	m = gh_emit_specs("sm_90a", GH_MMA, s + 2, 1, "n");
	ck_assert_ptr_null(strstr(cg_module_find(m, "n0")->note, "wg64x"));
	ck_assert_int_eq(gh_count(gh_ptx(m), "m64n256k16"), 0);
	cg_module_free(m);
}
END_TEST

START_TEST(test_ws_emu_kn_f16_residual)
{
	GemmCase c = {.what = "f16, B [K,N] (N-major boxes), residual"};

	gh_spec_kn_residual(&c.s, 256, 192, DT_F16);
	tiles(&c.s, 128, 128, 64, 2, 2, 5);
	c.T = 90;
	check_case(&c, 1e-2);
	c.what = "f16, B [K,N], two consumers, bk 128, a padded ldb";
	tiles(&c.s, 128, 256, 128, 2, 4, 2);
	c.s.ldb = 264;
	c.s.K = 256;
	c.T = 140;
	check_case(&c, 1e-2);
}
END_TEST

/*
 * Matrix leaves are loaded ahead of their pairs' stores, 8 pairs at a time
 * here (gemm_mat_leaves: a leaf may be C itself, so nothing else moves a
 * load above a store): DeepSeek-V3's shared down projection (bf16 acc + f32
 * + bf16 residual), the residual read from C (in place) and not, ping-pong,
 * a leaf before and one after swiglu; against the reference and bit for bit
 * against the wgmma mainloop.  The PTX: the batch's 8 pairs of each leaf
 * loaded before the first store, a pair a load (16; before, one pair's 4
 * scalar loads).
 */
START_TEST(test_ws_emu_mat_leaves_ahead)
{
	CgTarget a = {"sm_90a", NULL, 3};
	GemmCase c = {.what = "two matrix leaves, cooperative 128x256, ragged M"};
	const char *ptx, *st;
	int n = 0;

	gh_spec_two_mats(&c.s, 512, 128, 0);
	tiles(&c.s, 128, 256, 64, 2, 4, 4);
	c.T = 150;
	check_case(&c, 1e-2);
	c.what = "two matrix leaves, the residual in place";
	c.in_place = 1;
	check_case(&c, 1e-2);
	c.what = "ping-pong, the residual in place, 3 CTAs";
	pingpong(&c.s, 128, 128, 64, 4, 3);
	check_case(&c, 1e-2);
	c.what = "a leaf before swiglu and the residual after it, in place";
	gh_spec_two_mats(&c.s, 512, 128, 1);
	tiles(&c.s, 128, 256, 64, 2, 4, 4);
	check_case(&c, 1e-2);

	gh_spec_two_mats(&c.s, 512, 128, 0);
	tiles(&c.s, 128, 256, 64, 2, 4, 4);
	CgModule *m = gh_emit_specs(a.sm, GH_MMA, &c.s, 1, "g");
	ptx = gh_ptx(m);
	st = strstr(ptx, "st.global");
	ck_assert_ptr_nonnull(st);
	for (const char *q = ptx; (q = strstr(q, "ld.global.")) && q < st; q++)
		n++;
	ck_assert_int_eq(n, 16);
	ck_assert_ptr_nonnull(strstr(ptx, "ld.global.v2.f32"));	/* (a bf16 pair: ld.global.u32) */
	cg_module_free(m);
}
END_TEST

START_TEST(test_ws_emu_grouped_scale_scatter)
{
	GemmCase c = {.what = "grouped: routing weights, scattered rows, empty experts"};
	int counts[8] = {0, 150, 1, 0, 0, 70, 19, 0};

	gh_spec_grouped_scale_scatter(&c.s, 8, 256, 192);
	tiles(&c.s, 128, 128, 64, 2, 2, 4);
	c.T = 240;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2);
	c.what = "grouped, persistent: 4 CTAs over 12 (expert, tile) items, two consumers";
	tiles(&c.s, 128, 128, 64, 2, 4, 6);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 4;
	check_case(&c, 1e-2);
	c.what = "grouped, persistent, 128x192 (gpt-oss's down projection): 2 n-tiles of 192";
	gh_spec_grouped_scale_scatter(&c.s, 8, 384, 192);
	tiles(&c.s, 128, 192, 64, 2, 4, 5);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 4;
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_ws_emu_grouped_expert_bias_swiglu)
{
	GemmCase c = {.what = "gpt-oss: per-expert bias, clamped SwiGLU, persistent"};
	int counts[4] = {9, 0, 80, 131};

	gh_spec_expert_bias_swiglu(&c.s, 4, 256, 128);
	tiles(&c.s, 128, 128, 64, 2, 2, 3);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 2;
	c.T = 220;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_ws_emu_grouped_gather_swiglu)
{
	GemmCase c = {.what = "gathered A (top-2 up-projection), SwiGLU, empty experts"};
	int counts[8] = {0, 150, 1, 0, 0, 70, 19, 0};

	gh_spec_grouped_swiglu(&c.s, 8, 256, 192, 2);
	tiles(&c.s, 128, 128, 64, 2, 2, 4);
	c.T = 120;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2);
	c.what = "gathered A, persistent: 3 CTAs, two consumers, 6 stages";
	tiles(&c.s, 128, 128, 64, 2, 4, 6);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 3;
	check_case(&c, 1e-2);
	c.what = "gathered A, bk 128: 16 chunks per producer thread, 2 stages";
	tiles(&c.s, 128, 128, 128, 2, 2, 2);
	c.s.K = 256;
	c.s.sched = CG_SCHED_TILES;
	check_case(&c, 1e-2);
}
END_TEST

/*
 * The consumers skip a 64-row block without a row of the tile
 * (gemm_wgmma_by_rows), as the wgmma mainloop does: the down projection's
 * scattered rows, 128x256 on two consumers of 128x128, persistent over 4
 * CTAs, K = 192 (3 k-tiles of 4 k-steps), 2 column tiles; row tiles of 31,
 * 128 + 2, 2, 64 and 29 rows, one full: 6 x 2 x 2 x 24 = 576 wgmma with
 * every block, (1 x 24 + 5 x 12) x 2 x 2 = 336 without; the same outputs.
 */
START_TEST(test_ws_emu_skips_row_blocks_without_rows)
{
	GemmCase c = {.what = "ws: row blocks without rows"};
	int counts[8] = {31, 0, 130, 2, 0, 0, 64, 29};	/* 256 */
	GemmRun r, q;
	GemmErr e;
	long n0, full, skip;

	gh_spec_grouped_scale_scatter(&c.s, 8, 512, 192);
	tiles(&c.s, 128, 256, 64, 2, 4, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 4;
	c.T = 256;
	memcpy(c.counts, counts, sizeof counts);
	c.s.full_blocks = 1;
	n0 = cg_emu_wgmma_count();
	ck_assert_msg(gh_run(&r, &c) == 0 && gh_compare(&r, &e) == 0, "full blocks: %s", r.msg);
	full = cg_emu_wgmma_count() - n0;
	c.s.full_blocks = 0;
	n0 = cg_emu_wgmma_count();
	ck_assert_msg(gh_run(&q, &c) == 0 && gh_compare(&q, &e) == 0, "skipped blocks: %s", q.msg);
	skip = cg_emu_wgmma_count() - n0;
	ck_assert_msg(e.err < 1e-2, "relative L2 error %g", e.err);
	ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0, "outputs differ");
	ck_assert_int_eq(full, 576);
	ck_assert_int_eq(skip, 336);
	gh_free(&r);
	gh_free(&q);
}
END_TEST

/*
 * Three consumer warpgroups stacked over 192 rows (192x128, w3x4: each 64 rows
 * of all 128 columns; 512 threads, setmaxnreg 56 / 152), one tile per expert
 * of up to 192 rows: experts of 1, 63, 64, 65, 128, 130, 191, 192 and 0 rows
 * (and 193 and 257, two tiles), down-projection style (A by TMA, routing
 * weights, scattered rows), tiles and persistent, and gathered A with SwiGLU
 * (the up-projection; the producer warpgroup's 12 cp.async chunks a
 * thread); each against the reference and bit for bit against the cp.async
 * wgmma mainloop over the same three warpgroups.
 */
static const int rows192[12] = {1, 63, 64, 65, 128, 0, 130, 191, 192, 0, 193, 257};

static void
case192(GemmCase *c, int gather, int stages)
{
	memset(c->counts, 0, sizeof c->counts);
	memcpy(c->counts, rows192, sizeof rows192);
	if (gather) {
		gh_spec_grouped_swiglu(&c->s, 12, 256, 192, 2);
		c->T = 1284 / 2;	/* top-2: 1284 rows */
	} else {
		gh_spec_grouped_scale_scatter(&c->s, 12, 256, 192);
		c->T = 1284;
	}
	tiles(&c->s, 192, 128, 64, 3, 4, stages);
}

START_TEST(test_ws_emu_192_rows_three_consumers)
{
	GemmCase c = {.what = "192x128, three consumers: scattered rows, 1..257 rows an expert, tiles"};

	case192(&c, 0, 5);
	check_case(&c, 1e-2);
	c.what = "192x128, three consumers: scattered rows, persistent over 5 CTAs, 3 stages";
	case192(&c, 0, 3);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 5;
	check_case(&c, 1e-2);
	c.what = "192x128, three consumers: gathered A, SwiGLU";
	case192(&c, 1, 4);
	check_case(&c, 1e-2);
	c.what = "192x128, three consumers: gathered A, persistent over 3 CTAs, 2 stages";
	case192(&c, 1, 2);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 3;
	check_case(&c, 1e-2);
	c.what = "192x128 on mma.sync (12 warps of 64x32; sm_80's and the emulator's plan): gathered A";
	c.s.mainloop = CG_MAINLOOP_MMA;
	c.s.sched = CG_SCHED_TILES;
	c.s.stages = 3;
	gh_check(&c, 1e-2);
	c.what = "192x128 on mma.sync: scattered rows";
	case192(&c, 0, 3);
	c.s.mainloop = CG_MAINLOOP_MMA;
	gh_check(&c, 1e-2);
	c.what = "192x128, three consumers: dense, ragged M, bk 128";
	gh_spec_dense_bias_gelu(&c.s, 256, 256);
	tiles(&c.s, 192, 128, 128, 3, 4, 2);
	memset(c.counts, 0, sizeof c.counts);
	c.T = 450;
	check_case(&c, 1e-2);
}
END_TEST

/*
 * The row-block skip with three stacked warpgroups: a warpgroup whose 64
 * rows hold no row of the tile issues no wgmma.  K = 192 (3 k-tiles of 4
 * k-steps), 2 column tiles: 12 wgmma a warpgroup a tile's column tile.
 * Experts (rows): 1, 63, 64, 65, 128, 130, 191, 192, 192 + 1, 192 + 65 (and
 * two empty ones): warpgroups with rows 1, 1, 1, 2, 2, 3, 3, 3, 3 + 1, 3 + 2
 * = 25 of the 36 of 12 row tiles: 25 x 24 = 600 wgmma with the skip,
 * 36 x 24 = 864 without; the same outputs.
 */
START_TEST(test_ws_emu_192_skips_warpgroups_without_rows)
{
	GemmCase c = {.what = "192x128: warpgroups without rows"};
	GemmRun r, q;
	GemmErr e;
	long n0, full, skip;

	case192(&c, 0, 4);
	c.s.full_blocks = 1;
	n0 = cg_emu_wgmma_count();
	ck_assert_msg(gh_run(&r, &c) == 0 && gh_compare(&r, &e) == 0, "full blocks: %s", r.msg);
	full = cg_emu_wgmma_count() - n0;
	c.s.full_blocks = 0;
	n0 = cg_emu_wgmma_count();
	ck_assert_msg(gh_run(&q, &c) == 0 && gh_compare(&q, &e) == 0, "skipped blocks: %s", q.msg);
	skip = cg_emu_wgmma_count() - n0;
	ck_assert_msg(e.err < 1e-2, "relative L2 error %g", e.err);
	ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0, "outputs differ");
	ck_assert_int_eq(full, 864);
	ck_assert_int_eq(skip, 600);
	gh_free(&r);
	gh_free(&q);
}
END_TEST

/* DeepSeek-V3's expert GEMMs at 192x128 on sm_90a: the down projection
 * (A by TMA, scattered) and the gathered gate|up, three consumers: 512
 * threads pinned at 128 registers, setmaxnreg 56 / 152, no spills. */
START_TEST(test_ws_192_ptx_assembles_for_sm90a)
{
	GemmSpec s[2];
	CgModule *m;
	const CgKernel *k;
	const char *ptx;

	gh_spec_grouped_scale_scatter(&s[0], 256, 7168, 2048);
	tiles(&s[0], 192, 128, 64, 3, 4, 5);
	gh_spec_grouped_swiglu(&s[1], 256, 4096, 7168, 8);
	tiles(&s[1], 192, 128, 64, 3, 4, 5);
	m = gh_emit_specs("sm_90a", GH_MMA, s, 2, "t");
	k = cg_module_find(m, "t0");
	ck_assert_int_eq(k->block[0], 512);
	ck_assert_int_eq(k->maxnreg, 128);
	ck_assert_int_eq(k->tmap[0].box[1], 64);	/* A in 64-row boxes, those with rows loaded */
	ck_assert_ptr_nonnull(strstr(k->note, "192x128x64 w3x4+4 s5 ws tma"));
	ptx = gh_ptx(m);
	ck_assert_int_eq(gh_count(ptx, "setmaxnreg.inc.sync.aligned.u32 152"), 2);
	ck_assert_int_eq(gh_count(ptx, "setmaxnreg.dec.sync.aligned.u32 56"), 2);
	ck_assert_int_eq(gh_count(ptx, ".maxnreg 128"), 2);
	ck_assert(gh_count(ptx, "cp.async.bulk.tensor.2d") >= 3);	/* the down's three boxes of A */
	ck_assert(gh_count(ptx, "cp.async.cg.shared.global [") >= 12);	/* gathered A, zero-filled past the rows */
	ck_assert(gh_count(ptx, "], 16, %r") >= 12);
	ck_assert(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n128k16") >= 2);
	gh_assemble(m, 2, "check_ws 192", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
}
END_TEST

START_TEST(test_ws_emu_grouped_no_rows)
{
	GemmCase c = {.what = "grouped, T = 0"};

	gh_spec_grouped_scale_scatter(&c.s, 4, 128, 128);
	tiles(&c.s, 128, 128, 64, 2, 2, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 2;
	c.T = 0;
	check_case(&c, 1e-2);
}
END_TEST

/* ---- ping-pong consumers (CG_WS_PINGPONG): whole tiles per warpgroup, turns by named barriers ---- */

/* Tiles per CTA odd and even, none, one; M tails, odd column tiles; k-tiles
 * fewer and more than stages.  An arrival too many or missing is an error
 * on the emulator (deadlock, or a named barrier left partly arrived). */
static const struct {
	const char *what;
	int N, K, tile[4], ctas, T;
} pp_cases[] = {
	{"3 CTAs over 4x2 tiles (3, 3, 2 each), ragged M, 5 k-tiles, 6 stages", 256, 320, {128, 128, 64, 6}, 3, 450},
	{"2 CTAs over 3x3 tiles (5 and 4: odd), 3 column tiles, 10 k-tiles, 4 stages", 384, 640, {128, 128, 64, 4}, 2, 300},
	{"more CTAs than tiles (1 each, 3 none), M < one tile", 256, 192, {128, 128, 64, 6}, 5, 37},
	{"one CTA over 2x4 tiles, fewer k-tiles than stages", 512, 64, {128, 128, 64, 6}, 1, 250},
	{"64x128 tiles, 2 stages", 256, 256, {64, 128, 64, 2}, 2, 200},
	{"128x64 tiles, bk 128, 3 stages", 256, 384, {128, 64, 128, 3}, 3, 260},
};

START_TEST(test_ws_emu_pingpong_dense)
{
	GemmCase c = {.what = pp_cases[_i].what};
	const int *tl = pp_cases[_i].tile;

	gh_spec_dense_bias_gelu(&c.s, pp_cases[_i].N, pp_cases[_i].K);
	pingpong(&c.s, tl[0], tl[1], tl[2], tl[3], pp_cases[_i].ctas);
	c.T = pp_cases[_i].T;
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_ws_emu_pingpong_kn_f16_residual)
{
	GemmCase c = {.what = "ping-pong: f16, B [K,N], residual"};

	gh_spec_kn_residual(&c.s, 384, 192, DT_F16);
	pingpong(&c.s, 128, 128, 64, 5, 2);
	c.T = 190;
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_ws_emu_pingpong_grouped)
{
	GemmCase c = {.what = "ping-pong, grouped: routing weights, scattered rows, empty experts, 4 CTAs"};
	int counts[8] = {0, 150, 1, 0, 0, 70, 19, 0};
	int bias[4] = {9, 0, 80, 131};

	gh_spec_grouped_scale_scatter(&c.s, 8, 256, 192);
	pingpong(&c.s, 128, 128, 64, 6, 4);
	c.T = 240;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2);
	c.what = "ping-pong, grouped scatter: one CTA over every item";
	c.s.ctas = 1;
	check_case(&c, 1e-2);
	c.what = "ping-pong, gathered A (top-2 up-projection), SwiGLU, 3 CTAs";
	gh_spec_grouped_swiglu(&c.s, 8, 256, 192, 2);
	pingpong(&c.s, 128, 128, 64, 4, 3);
	c.T = 120;
	check_case(&c, 1e-2);
	c.what = "ping-pong, gpt-oss: per-expert bias, clamped SwiGLU, 2 CTAs";
	memset(c.counts, 0, sizeof c.counts);
	memcpy(c.counts, bias, sizeof bias);
	gh_spec_expert_bias_swiglu(&c.s, 4, 256, 128);
	pingpong(&c.s, 128, 128, 64, 3, 2);
	c.T = 220;
	check_case(&c, 1e-2);
	c.what = "ping-pong, grouped, T = 0";
	memset(c.counts, 0, sizeof c.counts);
	gh_spec_grouped_scale_scatter(&c.s, 4, 128, 128);
	pingpong(&c.s, 128, 128, 64, 4, 2);
	c.T = 0;
	check_case(&c, 1e-2);
}
END_TEST

/* A top-2 MoE block whose GEMMs get 128x256 tiles over two consumer
 * warpgroups (the prefill plan), which --debug=ws-pingpong turns into two
 * ping-pong warpgroups of 128x128 (cg_gemm_ws_for): the whole program on
 * the emulator against the interpreter. */
static const char prog_moe[] =
	"weight $router : bf16[8,1024]\n"
	"weight $wgu : bf16[8,1024,1024]\n"
	"weight $wd : bf16[8,1024,512]\n"
	"graph @moe(%x: bf16[T,1024]) -> (y: bf16[T,1024]) {\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,8]\n"
	"	%y0 = moe %x, %logits, _, $wgu, $wd, k=2, renorm=1, router=softmax : bf16[T,1024]\n"
	"	%y = add %x, %y0 : bf16[T,1024]\n"
	"	ret %y\n"
	"}\n";

START_TEST(test_ws_pingpong_program_against_interpreter)
{
	DbgFlags dbg = DBG_EMU_WGMMA | DBG_EMU_WS | DBG_WS_PINGPONG;

	gh_check_program_max(prog_moe, 150, 4096, "moe_k4", "w2x2x2+4 s6 ws tma pingpong persistent", 2e-2, dbg);
	gh_check_program_max(prog_moe, 150, 4096, "moe_k3", "w2x2x2+4 s6 ws tma cp.async-a pingpong persistent",
			       2e-2, dbg | DBG_WS_GATHER);
}
END_TEST

/* --debug=grouped-c2 on the emulator: a 16-expert top-4 block planned for
 * up to 1100 tokens, run at 1030 (about 258 rows an expert: pairs of row
 * tiles, and odd last row tiles in pairs of column tiles): the gate|up
 * (gathered A, on the WS mainloop without --debug=ws-gather) and the down
 * GEMM in clusters of 2 sharing B (the emulator runs them), persistent, against the
 * interpreter; at 200 tokens (bucket 65..256: 64 rows an expert) the plan
 * without them. */
static const char prog_c2[] =
	"weight $router : bf16[16,256]\n"
	"weight $wgu : bf16[16,512,256]\n"
	"weight $wd : bf16[16,256,256]\n"
	"graph @moe(%x: bf16[T,256]) -> (y: bf16[T,256]) {\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,16]\n"
	"	%y0 = moe %x, %logits, _, $wgu, $wd, k=4, renorm=1, router=softmax : bf16[T,256]\n"
	"	%y = add %x, %y0 : bf16[T,256]\n"
	"	ret %y\n"
	"}\n";

START_TEST(test_ws_grouped_c2_program_against_interpreter)
{
	DbgFlags dbg = DBG_EMU_WGMMA | DBG_EMU_WS | DBG_GROUPED_C2;

	gh_check_program_max(prog_c2, 1030, 1100, "moe_k3", "ws tma cp.async-a cluster2 multicast-b", 2e-2, dbg);
	gh_check_program_max(prog_c2, 1030, 1100, "moe_k4", "ws tma cluster2 multicast-b", 2e-2, dbg);
	gh_check_program_max(prog_c2, 200, 1100, "moe_k3_t65_256", "wgmma", 2e-2, dbg);
}
END_TEST

/* --debug=gather-pingpong (bit 43): prog_moe's gate|up (gathered A, K 1024:
 * 16 k-tiles, 128x256 cooperative for a plan of 4096 tokens) on ping-pong
 * consumers, as test_ws_pingpong_program_against_interpreter's
 * --debug=ws-pingpong gives it, against the interpreter; without the flag
 * cooperative (its down is ping-pong either way: 8 k-tiles). */
START_TEST(test_ws_gather_pingpong_program_against_interpreter)
{
	DbgFlags dbg = DBG_EMU_WGMMA | DBG_EMU_WS | DBG_WS_GATHER;

	gh_check_program_max(prog_moe, 150, 4096, "moe_k3", "w2x2x2+4 s6 ws tma cp.async-a pingpong persistent", 2e-2,
			     dbg | DBG_GATHER_PINGPONG);
	gh_check_program_max(prog_moe, 150, 4096, "moe_k3", "128x256x64 w2x4+4 s4 ws tma cp.async-a tiles", 2e-2,
			     dbg);
}
END_TEST

/* The same with a tuning table's .wide (bench/mixtral_k3wide.tuning's form,
 * the A/B's gppw arm): ping-pong on 64x256 warpgroup tiles, gathered A. */
START_TEST(test_ws_gather_pingpong_wide_program_against_interpreter)
{
	const char *path = "check_ws_gather_pingpong_wide.tuning";
	FILE *fp = fopen(path, "w");

	ck_assert_ptr_nonnull(fp);
	fputs("moec-tuning 2\nemu g8.m2.n1024.k1024.bf16.bf16.nk.t65-4096 128x256x64.w2x4.s4.k1.wide\n", fp);
	fclose(fp);
	gh_check_program_tuned(prog_moe, 150, 4096, "moe_k3", "64x256x64 w1x4x2+4 s5 ws tma cp.async-a pingpong wg64x256",
			       2e-2, DBG_EMU_WGMMA | DBG_EMU_WS | DBG_WS_GATHER | DBG_GATHER_PINGPONG, path);
	remove(path);
}
END_TEST

/* --debug=grouped-wide: a block like prog_c2 whose gate|up takes 128x192
 * tiles (N = 768, which 256 does not divide, as gpt-oss-20b's 5760) on two
 * 64x192 warpgroup tiles, gathered A in pairs sharing B (its down: 128x128,
 * which the flag leaves as it is), against the interpreter */
static const char prog_wide[] =
	"weight $router : bf16[16,384]\n"
	"weight $wgu : bf16[16,768,384]\n"
	"weight $wd : bf16[16,384,384]\n"
	"graph @moe(%x: bf16[T,384]) -> (y: bf16[T,384]) {\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,16]\n"
	"	%y0 = moe %x, %logits, _, $wgu, $wd, k=4, renorm=1, router=softmax : bf16[T,384]\n"
	"	%y = add %x, %y0 : bf16[T,384]\n"
	"	ret %y\n"
	"}\n";

START_TEST(test_ws_grouped_wide_program_against_interpreter)
{
	DbgFlags dbg = DBG_EMU_WGMMA | DBG_EMU_WS | DBG_GROUPED_C2 | DBG_GROUPED_WIDE;

	gh_check_program_max(prog_wide, 1030, 1100, "moe_k3", "cp.async-a cluster2 multicast-b wg64x192", 2e-2, dbg);
}
END_TEST

/* --debug=grouped (bit 48): a gpt-oss-20b block in small (bias, the oai
 * SwiGLU with its limit, interleaved gate|up, bf16 slots) whose heuristic
 * tiles are 128x192: the down's N = 960 is 5 column tiles of 192, an odd
 * count (no pairs: the tiles schedule), the gate|up's 1920 is 10.  With the
 * flag both take 128x240 (4 and 8 column tiles) on 64x240 warpgroup tiles
 * in pairs sharing B, persistent; 4 experts, top-2, 600 tokens: about 300
 * rows an expert, so a pair of row tiles and an odd last one each; against
 * the interpreter, and without the flag the down on the tiles schedule. */
static const char prog_cols[] =
	"weight $router : bf16[4,960]\n"
	"weight $wgu : bf16[4,1920,960]\n"
	"weight $wd : bf16[4,960,960]\n"
	"weight $bgu : bf16[4,1920]\n"
	"weight $bd : bf16[4,960]\n"
	"graph @moe(%x: bf16[T,960]) -> (y: bf16[T,960]) {\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,4]\n"
	"	%y0 = moe %x, %logits, _, $wgu, $wd, $bgu, $bd, act=oai, alpha=1.702, gu_layout=interleave, k=2, "
	"limit=1.0, renorm=0, router=topk_softmax, slots=x : bf16[T,960]\n"
	"	%y = add %x, %y0 : bf16[T,960]\n"
	"	ret %y\n"
	"}\n";

START_TEST(test_ws_grouped_cols_program_against_interpreter)
{
	DbgFlags dbg = DBG_EMU_WGMMA | DBG_EMU_WS | DBG_GROUPED_C2 | DBG_GROUPED_WIDE;

	gh_check_program_max(prog_cols, 600, 600, "moe_k4", "128x240x64 w2x4+4 s4 ws tma cluster2 multicast-b wg64x240",
			     2e-2, dbg | DBG_GROUPED);
	gh_check_program_max(prog_cols, 600, 600, "moe_k3",
			     "128x240x64 w2x4+4 s4 ws tma cp.async-a cluster2 multicast-b wg64x240", 2e-2, dbg | DBG_GROUPED);
	gh_check_program_max(prog_cols, 600, 600, "moe_k4", "128x192x64 w2x4+4 s5 ws tma wg64x192 tiles", 2e-2, dbg);
}
END_TEST

/*
 * Ping-pong per T bucket (cg_gemm_pingpong_pays, at the bucket's most rows):
 * the MoE down projections up to 32 k-tiles; dense GEMMs where twice the tiles fill
 * the last wave better than the cooperative tiles by more than the 6% that
 * ping-pong measured slower at equal fill (H200, bench/results/2026-12-02-
 * s25-final-gemm.log).  Never gathered A, FP8, or a tile that is not two
 * cooperative warpgroups of 128x128.
 */
START_TEST(test_ws_pingpong_pays_by_waves)
{
	static const struct {
		const char *what;
		int64_t N, K, thi;
		int E, m, gather, bm, bn, wm, wn, f8, want;
	} c[] = {
		/* dense up-projection N 14336: 3.4 / 4 waves cooperative, 6.8 / 7 ping-pong (184 against 207 us) */
		{"dense M=1024", 14336, 4096, 1024, 0, 1, 0, 128, 256, 2, 4, 0, 1},
		{"dense M=1024, 256x128", 14336, 4096, 1024, 0, 1, 0, 256, 128, 4, 2, 0, 1},
		/* 13.6 / 14 against 27.2 / 28: equal fill (763 against 723 us) */
		{"dense M=4096", 14336, 4096, 4096, 0, 1, 0, 128, 256, 2, 4, 0, 0},
		{"dense M=4096, 256x128", 14336, 4096, 4096, 0, 1, 0, 256, 128, 4, 2, 0, 0},
		/* 112 of 132 SMs either way */
		{"dense M=256", 14336, 4096, 256, 0, 1, 0, 256, 128, 4, 2, 0, 0},
		/* DeepSeek-V3's shared expert at T = 256: 32 CTAs cooperative, 64 ping-pong */
		{"DeepSeek-V3 shared up T=256", 4096, 7168, 256, 0, 1, 0, 256, 128, 4, 2, 0, 1},
		{"DeepSeek-V3 shared down T=4096", 7168, 2048, 4096, 0, 1, 0, 256, 128, 4, 2, 0, 0},
		/* MoE down projections up to 32 k-tiles (DeepSeek-V3 2966 -> 2691 us); not Mixtral's
		 * 224 (1527 -> 1594 in the block) */
		{"Mixtral down (224 k-tiles)", 4096, 14336, 4096, 8, 2, 0, 128, 256, 2, 4, 0, 0},
		{"DeepSeek-V3 down", 7168, 2048, 4096, 256, 8, 0, 128, 256, 2, 4, 0, 1},
		{"Mixtral gate|up (gathered)", 28672, 4096, 4096, 8, 2, 1, 128, 256, 2, 4, 0, 0},
		{"FP8 down", 7168, 2048, 4096, 256, 8, 0, 128, 256, 2, 4, 1, 0},
		{"one warpgroup's tile", 14336, 4096, 1024, 0, 1, 0, 128, 128, 2, 2, 0, 0},
		{"gpt-oss 128x192", 2880, 2880, 4096, 32, 4, 0, 128, 192, 2, 4, 0, 0},
	};
	CgTarget t = {"sm_90a", NULL, 3};

	for (size_t i = 0; i < NELEM(c); i++) {
		GemmSpec s;
		cg_gemm_default(&s);
		s.N = c[i].N, s.K = c[i].K, s.groups = c[i].E, s.m_per_t = c[i].m, s.gather = c[i].gather;
		s.bm = c[i].bm, s.bn = c[i].bn, s.bk = 64, s.warps_m = c[i].wm, s.warps_n = c[i].wn;
		s.f8.group = c[i].f8 ? 128 : 0;
		ck_assert_msg(cg_gemm_pingpong_pays(&t, &s, c[i].thi) == c[i].want, "%s: want %d", c[i].what,
			      c[i].want);
	}
}
END_TEST

/*
 * cg_gemm_gather_pingpong (--debug=gather-pingpong): gathered grouped GEMMs
 * on cooperative 128x256 plans of at most 64 k-tiles; never A not gathered
 * (the downs: cg_gemm_pingpong_pays), dense, FP8, split-K, 128x192.
 */
START_TEST(test_ws_gather_pingpong_where)
{
	static const struct {
		const char *what;
		int64_t N, K;
		int E, gather, bm, bn, wm, wn, f8, split, want;
	} c[] = {
		{"Mixtral gate|up (64 k-tiles)", 28672, 4096, 8, 1, 128, 256, 2, 4, 0, 1, 1},
		{"Qwen3-30B-A3B gate|up (32)", 1536, 2048, 128, 1, 128, 256, 2, 4, 0, 1, 1},
		{"65 k-tiles", 28672, 4160, 8, 1, 128, 256, 2, 4, 0, 1, 0},
		{"DeepSeek-V3 gate|up (112)", 4096, 7168, 256, 1, 128, 256, 2, 4, 0, 1, 0},
		{"Qwen3-30B-A3B down (not gathered)", 2048, 768, 128, 0, 128, 256, 2, 4, 0, 1, 0},
		{"dense, gathered", 28672, 4096, 0, 1, 128, 256, 2, 4, 0, 1, 0},
		{"FP8 gate|up", 4096, 4096, 256, 1, 128, 256, 2, 4, 1, 1, 0},
		{"split-K", 28672, 4096, 8, 1, 128, 256, 2, 4, 0, 2, 0},
		{"gpt-oss 128x192", 5760, 2880, 32, 1, 128, 192, 2, 4, 0, 1, 0},
		{"one warpgroup's 128x128", 28672, 4096, 8, 1, 128, 128, 2, 2, 0, 1, 0},
	};
	CgTarget t = {"sm_90a", NULL, 3};

	for (size_t i = 0; i < NELEM(c); i++) {
		GemmSpec s;
		cg_gemm_default(&s);
		s.N = c[i].N, s.K = c[i].K, s.groups = c[i].E, s.m_per_t = 2, s.gather = c[i].gather;
		s.bm = c[i].bm, s.bn = c[i].bn, s.bk = 64, s.warps_m = c[i].wm, s.warps_n = c[i].wn;
		s.f8.group = c[i].f8 ? 128 : 0;
		s.split_k = c[i].split;
		ck_assert_msg(cg_gemm_gather_pingpong(&t, &s) == c[i].want, "%s: want %d", c[i].what, c[i].want);
		/* the downs' rule never takes a gathered GEMM */
		ck_assert_msg(!c[i].gather || !cg_gemm_pingpong_pays(&t, &s, 4096), "%s", c[i].what);
	}
}
END_TEST

/* A dense FFN planned for 4096 tokens on the emulator standing for sm_90a:
 * the up-projection (N 2048: 256x128 tiles) ping-pong for T in 65..1024 and
 * cooperative above, one launch each; at T = 100 against the interpreter. */
static const char prog_dense[] =
	"weight $w1 : bf16[2048,512] seed=1\n"
	"weight $b1 : bf16[2048] scale=0.1 seed=2\n"
	"weight $w2 : bf16[512,2048] seed=3\n"
	"graph @dd(%x: bf16[T,512]) -> (y: bf16[T,512]) {\n"
	"	%h0 = matmul %x, $w1, $b1, trans_b=1 : bf16[T,2048]\n"
	"	%h = gelu %h0, approx=tanh : bf16[T,2048]\n"
	"	%y0 = matmul %h, $w2, trans_b=1 : bf16[T,512]\n"
	"	%y = add %x, %y0 : bf16[T,512]\n"
	"	ret %y\n"
	"}\n";

START_TEST(test_ws_pingpong_per_bucket_program)
{
	DbgFlags dbg = DBG_EMU_WGMMA | DBG_EMU_WS;

	gh_check_program_max(prog_dense, 100, 4096, "dd_k0_t65_1024", "w2x2x2+4 s6 ws tma pingpong persistent",
			     2e-2, dbg);
	gh_check_program_max(prog_dense, 3, 4096, "dd_k0", "w4x2+4 s4 ws tma tiles", 2e-2, dbg);
}
END_TEST

/*
 * --debug=mid-persistent: DeepSeek-shaped (16 experts, top-8), a plan for at
 * most 100 tokens expects 50 rows an expert, under the 64-row tile, so both
 * expert GEMMs of the 65..100 launch run persistent (heavy experts first)
 * instead of a grid of a potential row tile an expert; against the
 * interpreter at T = 100 and 70 (experts of one and two row tiles), on the
 * emulator's mma.sync mainloop, the cp.async wgmma one and the
 * warp-specialised one.  Without the flag: the tiles schedule.
 */
static const char prog_ds[] =
	"weight $router : bf16[16,128]\n"
	"weight $wgu : bf16[16,256,128]\n"
	"weight $wd : bf16[16,128,128]\n"
	"graph @moe(%x: bf16[T,128]) -> (y: bf16[T,128]) {\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,16]\n"
	"	%y0 = moe %x, %logits, _, $wgu, $wd, k=8, renorm=1, router=softmax : bf16[T,128]\n"
	"	%y = add %x, %y0 : bf16[T,128]\n"
	"	ret %y\n"
	"}\n";

START_TEST(test_mid_persistent_program_against_interpreter)
{
	unsigned t = DBG_MID_PERSISTENT, wg = t | DBG_EMU_WGMMA, ws = wg | DBG_EMU_WS;

	gh_check_program_max(prog_ds, 100, 100, "moe_k3", "64x64x64 w2x2 s4 tiles", 2e-2, 0);	/* not by default */
	gh_check_program_max(prog_ds, 100, 100, "moe_k3", "64x64x64 w2x2 s4 persistent", 2e-2, t);
	gh_check_program_max(prog_ds, 70, 100, "moe_k4", "64x64x64 w2x2 s4 persistent", 2e-2, t);
	gh_check_program_max(prog_ds, 100, 100, "moe_k3", "64x64x64 w2x2 s4 wgmma persistent", 2e-2, wg);
	gh_check_program_max(prog_ds, 70, 100, "moe_k4", "ws tma persistent", 2e-2, ws);
	gh_check_program_max(prog_ds, 100, 100, "moe_k3", "ws tma cp.async-a persistent", 2e-2, ws | DBG_WS_GATHER);
}
END_TEST

/* ---- --debug=grouped-lean: live rows at every tile height, serpentine rounds ---- */

/*
 * Experts with full, short (1, 10 rows) and empty second 128-row tiles, a
 * 64-row one, and a third tile (257): GemmSpec.live_rows loads no row past
 * a tile's expert (cp.async zero-fill, TMA boxes of 16 rows with rows
 * only), at 64, 128 and 256 rows a tile.  The outputs must equal those of
 * the same kernel loading every row, bit for bit, and (check_case) the
 * cp.async wgmma mainloop's with live rows.
 */
static const int rows_lean[10] = {129, 1, 128, 138, 0, 64, 65, 257, 10, 200};	/* 992 rows */

static void
lean_case(GemmCase *c, int gather, int bm, int bn, int wm, int wn, int stages)
{
	memset(c->counts, 0, sizeof c->counts);
	memcpy(c->counts, rows_lean, sizeof rows_lean);
	if (gather) {
		gh_spec_grouped_swiglu(&c->s, 10, 256, 192, 2);
		c->T = 992 / 2;
	} else {
		gh_spec_grouped_scale_scatter(&c->s, 10, 256, 192);
		c->T = 992;
	}
	tiles(&c->s, bm, bn, 64, wm, wn, stages);
}

/* The case with live rows and the experts in index order (no_rank), and
 * without either (heavy-first): the same bits, each right. */
static void
check_live_rows(GemmCase *c)
{
	GemmRun r, q;
	GemmErr e;

	c->s.live_rows = c->s.no_rank = 1;	/* --debug=grouped-lean's */
	check_case(c, 1e-2);
	ck_assert_msg(gh_run(&r, c) == 0 && gh_compare(&r, &e) == 0, "%s: live rows: %s", c->what, r.msg);
	c->s.live_rows = c->s.no_rank = 0;
	ck_assert_msg(gh_run(&q, c) == 0 && gh_compare(&q, &e) == 0, "%s: every row: %s", c->what, q.msg);
	ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0, "%s: live rows change the output",
		      c->what);
	gh_free(&r);
	gh_free(&q);
}

START_TEST(test_ws_emu_live_rows_every_height)
{
	static const struct {
		const char *what;
		int gather, bm, bn, wm, wn, st;
	} c[] = {
		{"128x128, one consumer: scattered rows", 0, 128, 128, 2, 2, 4},
		{"128x128, one consumer: gathered A, SwiGLU", 1, 128, 128, 2, 2, 3},
		{"128x256, two consumers: scattered rows", 0, 128, 256, 2, 4, 2},
		{"128x256, two consumers: gathered A", 1, 128, 256, 2, 4, 2},
		{"256x128, two consumers stacked: scattered rows (four boxes of A)", 0, 256, 128, 4, 2, 2},
		{"64x128, one consumer: scattered rows", 0, 64, 128, 1, 4, 4},
		{"64x128, one consumer: gathered A", 1, 64, 128, 1, 4, 4},
	};

	for (size_t i = 0; i < NELEM(c); i++) {
		GemmCase g = {.what = c[i].what};
		lean_case(&g, c[i].gather, c[i].bm, c[i].bn, c[i].wm, c[i].wn, c[i].st);
		check_live_rows(&g);
	}
}
END_TEST

/* DeepSeek-V3's expert GEMMs at 128 rows with live rows on sm_90a: A's
 * maps (the down): A_map's box the tile's 128 rows (a tile of more than 64
 * rows), A_rows_map's 16 (up to four boxes with rows); the gathered chunks
 * zero-filled past the rows (gate|up), no spills. */
START_TEST(test_ws_live_rows_ptx_assembles_for_sm90a)
{
	GemmSpec s[2];
	CgModule *m;
	const char *ptx;

	gh_spec_grouped_scale_scatter(&s[0], 256, 7168, 2048);
	pingpong(&s[0], 128, 128, 64, 6, 132);
	s[0].live_rows = s[0].snake = 1;
	gh_spec_grouped_swiglu(&s[1], 256, 4096, 7168, 8);
	tiles(&s[1], 128, 256, 64, 2, 4, 4);
	s[1].mainloop = CG_MAINLOOP_WGMMA;
	s[1].live_rows = 1;
	m = gh_emit_specs("sm_90a", GH_MMA, s, 2, "t");
	ck_assert_int_eq(cg_module_find(m, "t0")->ntmap, 3);
	ck_assert_int_eq(cg_module_find(m, "t0")->tmap[0].box[1], 128);
	ck_assert_int_eq(cg_module_find(m, "t0")->tmap[1].box[1], 16);
	ck_assert_int_eq(cg_module_find(m, "t0")->tmap[2].box[1], 128);	/* B */
	ck_assert_ptr_nonnull(strstr(cg_module_find(m, "t0")->note, "persistent snake live-rows scatter"));
	ck_assert_ptr_nonnull(strstr(cg_module_find(m, "t1")->note, "tiles live-rows gather"));
	ptx = gh_ptx(m);
	ck_assert_int_eq(gh_count(ptx, "cp.async.bulk.tensor.2d"), 5);	/* the down's A: 128 rows, or 4 x 16 */
	ck_assert(gh_count(ptx, "], 16, %r") >= 8);			/* gate|up: zero-filled chunks */
	gh_assemble(m, 2, "check_ws live rows", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
}
END_TEST

/*
 * Serpentine rounds (GemmSpec.snake): round j's items to the CTAs in
 * reverse on odd rounds.  Every item once: the outputs right (NaN-poisoned
 * first) and as many wgmma as with the plain stride; cooperative, ping-pong
 * (whose turns follow the rounds: a missing or extra arrival is an error on
 * the emulator) and the cp.async wgmma mainloop (check_case), 1 to 7 CTAs,
 * even and odd, the last round partial or whole, more CTAs than items.
 */
START_TEST(test_ws_emu_snake_rounds)
{
	static const int ctas[] = {1, 2, 3, 4, 7, 40};

	for (size_t i = 0; i < NELEM(ctas); i++) {
		for (int pp = 0; pp < 2; pp++) {
			GemmCase c = {.what = pp ? "serpentine rounds, ping-pong" : "serpentine rounds, cooperative"};
			long n0, plain, snake;
			GemmRun r;
			GemmErr e;

			lean_case(&c, 0, 128, 128, 2, 2, 4);
			if (pp)
				pingpong(&c.s, 128, 128, 64, 4, ctas[i]);
			c.s.sched = CG_SCHED_PERSISTENT;
			c.s.ctas = ctas[i];
			c.s.live_rows = 1;
			n0 = cg_emu_wgmma_count();
			ck_assert_msg(gh_run(&r, &c) == 0 && gh_compare(&r, &e) == 0, "%s: %s", c.what, r.msg);
			plain = cg_emu_wgmma_count() - n0;
			gh_free(&r);
			c.s.snake = 1;
			n0 = cg_emu_wgmma_count();
			ck_assert_msg(gh_run(&r, &c) == 0 && gh_compare(&r, &e) == 0, "%s: %s", c.what, r.msg);
			snake = cg_emu_wgmma_count() - n0;
			gh_free(&r);
			ck_assert_msg(snake == plain, "%s, %d CTAs: %ld wgmma, %ld without", c.what, ctas[i], snake,
				      plain);
			check_case(&c, 1e-2);
		}
	}
	{
		GemmCase c = {.what = "serpentine rounds on mma.sync, gathered A, 3 CTAs"};
		lean_case(&c, 1, 128, 128, 2, 2, 3);
		c.s.mainloop = CG_MAINLOOP_MMA;
		c.s.sched = CG_SCHED_PERSISTENT;
		c.s.ctas = 3;
		c.s.snake = c.s.live_rows = 1;
		gh_check(&c, 1e-2);
	}
}
END_TEST

/*
 * Bands of row tiles (GemmSpec.bands, --debug=tile-bands): 5 row tiles in
 * bands of 2 (the last of 1) over 3 column tiles, tiled, persistent over 3
 * CTAs (cooperative and ping-pong) and over more CTAs than tiles: every tile
 * once (NaN-poisoned outputs right, as many wgmma as without bands) and bit
 * for bit the cp.async wgmma mainloop's (check_case).
 */
START_TEST(test_ws_emu_dense_bands)
{
	static const int ctas[] = {0, 3, 40};

	for (size_t i = 0; i < NELEM(ctas); i++)
		for (int pp = 0; pp < 2; pp++) {
			GemmCase c = {.what = pp ? "bands of 2 row tiles, ping-pong" : "bands of 2 row tiles"};
			long n0, plain, bands;
			GemmRun r;
			GemmErr e;

			if (pp && !ctas[i])
				continue;
			gh_spec_dense_bias_gelu(&c.s, 384, 192);
			if (pp) {
				pingpong(&c.s, 128, 128, 64, 4, ctas[i]);
			} else {
				tiles(&c.s, 128, 128, 64, 2, 2, 4);
				c.s.sched = ctas[i] ? CG_SCHED_PERSISTENT : CG_SCHED_TILES;
				c.s.ctas = ctas[i];
			}
			c.T = 600;
			n0 = cg_emu_wgmma_count();
			ck_assert_msg(gh_run(&r, &c) == 0 && gh_compare(&r, &e) == 0, "%s: %s", c.what, r.msg);
			plain = cg_emu_wgmma_count() - n0;
			gh_free(&r);
			c.s.bands = 2;
			n0 = cg_emu_wgmma_count();
			ck_assert_msg(gh_run(&r, &c) == 0 && gh_compare(&r, &e) == 0, "%s: %s", c.what, r.msg);
			bands = cg_emu_wgmma_count() - n0;
			gh_free(&r);
			ck_assert_msg(bands == plain, "%s, %d CTAs: %ld wgmma, %ld without", c.what, ctas[i], bands,
				      plain);
			check_case(&c, 1e-2);
		}
}
END_TEST

START_TEST(test_ws_snake_refuses_clusters)
{
	CgTarget t = {"sm_90a", NULL, 3};
	GemmSpec s;
	Diag d;

	diag_init(&d, NULL);
	gh_spec_dense_bias_gelu(&s, 512, 256);
	tiles(&s, 128, 128, 64, 2, 2, 4);
	s.sched = CG_SCHED_PERSISTENT;
	s.ctas = 4;
	s.cluster = 2;
	ck_assert_msg(cg_gemm_check(&t, &s, &d) == 0, "%s", d.last);
	s.snake = 1;
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "serpentine rounds with clusters"));
}
END_TEST

/* The DeepSeek-shaped block (prog_ds above) with --debug=grouped-lean at
 * T = 200 and 256 (100 +- 9 and 128 +- 10 rows an expert: 128-row tiles,
 * short second ones at 256): both expert GEMMs with live rows, and with
 * --debug=persistent-prefill persistent in serpentine rounds, on the wgmma
 * (gate|up) and warp-specialised (down; with --debug=ws-gather gate|up too)
 * mainloops, against the interpreter; without the flag, live rows for the
 * gathered gate|up alone (the default since session 27's H200 A/B). */

START_TEST(test_ws_lean_program_against_interpreter)
{
	unsigned l = DBG_GROUPED_LEAN | DBG_EMU_WGMMA, ws = l | DBG_EMU_WS;

	gh_check_program_max(prog_ds, 200, 256, "moe_k3", "128x128x64 w2x2 s4 wgmma tiles live-rows gather", 2e-2,
			     DBG_EMU_WGMMA);	/* the default for gathered A */
	gh_check_program_max(prog_ds, 200, 256, "moe_k4", "ws tma tiles scatter", 2e-2, DBG_EMU_WGMMA | DBG_EMU_WS);
	gh_check_program_max(prog_ds, 200, 256, "moe_k3", "tiles live-rows gather", 2e-2, l);
	gh_check_program_max(prog_ds, 256, 256, "moe_k3", "persistent snake live-rows gather", 2e-2,
			     l | DBG_PERSISTENT_PREFILL);
	gh_check_program_max(prog_ds, 200, 256, "moe_k4", "ws tma tiles live-rows no-rank scatter", 2e-2, ws);
	gh_check_program_max(prog_ds, 256, 256, "moe_k4", "ws tma persistent snake live-rows scatter", 2e-2,
			     ws | DBG_PERSISTENT_PREFILL);
	gh_check_program_max(prog_ds, 256, 256, "moe_k3", "ws tma cp.async-a persistent snake live-rows gather", 2e-2,
			     ws | DBG_WS_GATHER | DBG_PERSISTENT_PREFILL);
}
END_TEST

/* ---- quad stores (GemmSpec.quad_store, --debug=quad-store) ---- */

/*
 * The case with quad stores: against the reference and bit for bit the
 * wgmma mainloop (check_case: no rows ahead there, so stores as before),
 * and bit for bit the same spec storing a fragment at a time (quad_store
 * 0).  gh_compare also fails an element not written or padding written.
 */
static void
quad_case(GemmCase *c)
{
	GemmCase r = *c;

	c->s.quad_store = 1;
	r.s.quad_store = 0;
	check_case(c, 1e-2);
	ck_assert_msg(gh_same_bits(c, &r), "%s: quad stores and stores a fragment at a time differ", c->what);
}

/* The gate|up after SwiGLU (8 fragments a lane's 16 bytes) and the down into
 * scattered rows (4), experts of 0..300 rows (a warp with some rows of the
 * tile, warps with none), 2, 3 and 1 warpgroups of columns, fragments past
 * the last whole group (128x192: 12 a warp), 192-row tiles, ping-pong, the
 * pairs sharing B with live rows, T = 0. */
START_TEST(test_ws_emu_quad_store)
{
	static const int rows[12] = {1, 0, 64, 128, 129, 200, 256, 257, 300, 0, 21, 140};	/* 1496 */
	int counts[8] = {0, 150, 1, 0, 0, 70, 19, 0};
	GemmCase c = {.what = "quad-store: gathered top-2, SwiGLU, empty experts, 128x128, one consumer"};

	gh_spec_grouped_swiglu(&c.s, 8, 256, 192, 2);
	tiles(&c.s, 128, 128, 64, 2, 2, 4);
	c.T = 120;
	memcpy(c.counts, counts, sizeof counts);
	quad_case(&c);
	c.what = "quad-store: SwiGLU, 128x192 on two consumers (12 fragments: one group and 4 alone), persistent";
	gh_spec_grouped_swiglu(&c.s, 8, 384, 192, 2);
	tiles(&c.s, 128, 192, 64, 2, 4, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 3;
	quad_case(&c);
	c.what = "quad-store: the down, routing weights, scattered rows, 128x128, one consumer";
	gh_spec_grouped_scale_scatter(&c.s, 8, 256, 192);
	tiles(&c.s, 128, 128, 64, 2, 2, 4);
	c.T = 240;
	quad_case(&c);
	c.what = "quad-store: the down, 128x192 on two consumers (12 fragments: three groups), persistent";
	gh_spec_grouped_scale_scatter(&c.s, 8, 384, 192);
	tiles(&c.s, 128, 192, 64, 2, 4, 5);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 4;
	quad_case(&c);
	c.what = "quad-store: the down on ping-pong 128x128, 3 CTAs";
	gh_spec_grouped_scale_scatter(&c.s, 8, 256, 192);
	pingpong(&c.s, 128, 128, 64, 4, 3);
	quad_case(&c);
	c.what = "quad-store: 192x128 on three consumers, gathered, 1..257 rows an expert";
	case192(&c, 1, 4);
	quad_case(&c);
	c.what = "quad-store: 192x128, the down";
	case192(&c, 0, 3);
	quad_case(&c);
	c.what = "quad-store: gathered SwiGLU in pairs sharing B, live rows, 128x256 on two consumers, 0..300 rows";
	memset(c.counts, 0, sizeof c.counts);
	memcpy(c.counts, rows, sizeof rows);
	gh_spec_grouped_swiglu(&c.s, 12, 512, 192, 2);
	tiles(&c.s, 128, 256, 64, 2, 4, 3);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 2;
	c.s.cluster_b = 1;
	c.s.live_rows = 1;
	c.T = 748;
	quad_case(&c);
	c.what = "quad-store: T = 0";
	memset(c.counts, 0, sizeof c.counts);
	c.T = 0;
	quad_case(&c);
}
END_TEST

/* sm_90a: each lane's 16-byte stores and the quad's shuffles; a fragment at a time without the flag,
 * and after swiglu with a column leaf. */
START_TEST(test_ws_quad_store_ptx)
{
	GemmSpec s[4];
	CgModule *m;
	const char *ptx;

	gh_spec_grouped_swiglu(&s[0], 8, 512, 192, 2);
	tiles(&s[0], 128, 256, 64, 2, 4, 4);
	s[0].sched = CG_SCHED_PERSISTENT;
	s[0].ctas = 4;
	gh_spec_grouped_scale_scatter(&s[2], 8, 512, 192);
	tiles(&s[2], 128, 256, 64, 2, 4, 4);
	s[2].sched = CG_SCHED_PERSISTENT;
	s[2].ctas = 4;
	s[1] = s[0];
	s[3] = s[2];
	s[0].quad_store = s[2].quad_store = 1;
	m = gh_emit_specs("sm_90a", GH_MMA, s, 4, "q");
	ptx = gh_ptx(m);
	/* per kernel: 2 row blocks x 2 rows x (2 groups of 8 | 4 of 4) x (16 bytes, 4 shuffles) */
	ck_assert_int_eq(gh_count(ptx, "st.global.v4.u32"), 8 + 16);
	ck_assert_int_eq(gh_count(ptx, "shfl.sync.bfly.b32"), 32 + 64);
	ck_assert_int_eq(gh_count(ptx, "st.global.b16"), 64);	/* q1: a fragment at a time after SwiGLU */
	ck_assert_int_eq(gh_count(ptx, "st.global.u32"), 64);	/* q3: a pair at a time */
	cg_module_free(m);
	/* gpt-oss's gate|up (a column leaf, the bias, before swiglu) stays a fragment at a time */
	gh_spec_expert_bias_swiglu(&s[0], 4, 512, 128);
	tiles(&s[0], 128, 256, 64, 2, 4, 4);
	s[0].quad_store = 1;
	m = gh_emit_specs("sm_90a", GH_MMA, s, 1, "b");
	ptx = gh_ptx(m);
	ck_assert_int_eq(gh_count(ptx, "st.global.v4.u32"), 0);
	ck_assert_int_eq(gh_count(ptx, "st.global.b16"), 64);
	cg_module_free(m);
}
END_TEST

/* The flag through a program (prog_c2: clusters sharing B) against the interpreter. */
START_TEST(test_ws_quad_store_program_against_interpreter)
{
	DbgFlags dbg = DBG_EMU_WGMMA | DBG_EMU_WS | DBG_GROUPED_C2 | DBG_QUAD_STORE;

	gh_check_program_max(prog_c2, 1030, 1100, "moe_k3", "ws tma cp.async-a cluster2 multicast-b", 2e-2, dbg);
	gh_check_program_max(prog_c2, 1030, 1100, "moe_k4", "ws tma cluster2 multicast-b", 2e-2, dbg);
}
END_TEST

/* ---- gathered A by one-row TMA boxes (GemmSpec.gather_tma, --debug=tma-gather) ---- */

/*
 * The case with gathered A by one-row TMA boxes: against the reference and
 * bit for bit the cp.async wgmma mainloop (check_case), and bit for bit the
 * same spec with the producer warpgroup's cp.async (gather_tma 0): the same
 * stage layout, the same wgmma order.
 */
static void
tma_gather_case(GemmCase *c)
{
	GemmCase r = *c;

	c->s.gather_tma = 1;
	r.s.gather_tma = 0;
	check_case(c, 1e-2);
	ck_assert_msg(gh_same_bits(c, &r), "%s: one-row TMA boxes and cp.async differ", c->what);
}

/* Experts of 0..300 rows (tails of every kind: 1 row, 63, 65, 129, ..., empty
 * experts), top-2 and top-4 (gather_div), one, two and three consumer
 * warpgroups (a lane's 4 and 6 rows), bk 64 and 128 (a row's two boxes a
 * k-tile), tiles and persistent over fewer CTAs, ping-pong, the grouped
 * pairs sharing B (live rows), T = 0. */
START_TEST(test_ws_emu_tma_gather)
{
	static const int rows[12] = {1, 0, 64, 128, 129, 200, 256, 257, 300, 0, 21, 140};	/* 1496 */
	int counts[8] = {0, 150, 1, 0, 0, 70, 19, 0};
	GemmCase c = {.what = "tma-gather: top-2, SwiGLU, empty experts, 128x128, one consumer"};

	gh_spec_grouped_swiglu(&c.s, 8, 256, 192, 2);
	tiles(&c.s, 128, 128, 64, 2, 2, 4);
	c.T = 120;
	memcpy(c.counts, counts, sizeof counts);
	tma_gather_case(&c);
	c.what = "tma-gather: persistent over 3 CTAs, two consumers, 6 stages";
	tiles(&c.s, 128, 128, 64, 2, 4, 6);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 3;
	tma_gather_case(&c);
	c.what = "tma-gather: bk 128 (two boxes a row a k-tile), 2 stages";
	tiles(&c.s, 128, 128, 128, 2, 2, 2);
	c.s.K = 256;
	c.s.sched = CG_SCHED_TILES;
	tma_gather_case(&c);
	c.what = "tma-gather: ping-pong 128x128, 3 CTAs";
	gh_spec_grouped_swiglu(&c.s, 8, 256, 192, 2);
	pingpong(&c.s, 128, 128, 64, 4, 3);
	tma_gather_case(&c);
	c.what = "tma-gather: 192x128 on three consumers (6 rows a lane), 1..257 rows an expert, top-2";
	case192(&c, 1, 4);
	tma_gather_case(&c);
	c.what = "tma-gather: 192x128, top-4, persistent over 3 CTAs, 2 stages";
	case192(&c, 1, 2);
	gh_spec_grouped_swiglu(&c.s, 12, 256, 192, 4);
	tiles(&c.s, 192, 128, 64, 3, 4, 2);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 3;
	c.T = 1284 / 4;
	tma_gather_case(&c);
	c.what = "tma-gather: grouped pairs sharing B, live rows, 128x256 on two consumers, 0..300 rows, 2 CTAs";
	memset(c.counts, 0, sizeof c.counts);
	memcpy(c.counts, rows, sizeof rows);
	gh_spec_grouped_swiglu(&c.s, 12, 512, 192, 2);
	tiles(&c.s, 128, 256, 64, 2, 4, 3);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 2;
	c.s.cluster_b = 1;
	c.s.live_rows = 1;
	c.T = 748;
	tma_gather_case(&c);
	c.what = "tma-gather: T = 0";
	memset(c.counts, 0, sizeof c.counts);
	c.T = 0;
	tma_gather_case(&c);
}
END_TEST

/*
 * The permuted copy's gate|up (passes/fuse_gemm.c's PERM_COPY_DEFAULT): A's
 * rows already in expert order (A by TMA), the folded norm's per-row scale
 * read through the index alone (GemmSpec.leaf_gather, CGR_GATHER_RAW), SwiGLU;
 * against the reference and bit for bit the cp.async wgmma mainloop; empty
 * experts, two consumers persistent, the pairs sharing B.
 */
static void
leaf_spec(GemmSpec *s, int E, int64_t N)
{
	int a, w;

	gh_spec_grouped_swiglu(s, E, N, 192, 2);
	memset(&s->ep, 0, sizeof s->ep);
	a = cg_ep_acc(&s->ep);
	w = cg_ep_row(&s->ep, DT_F32, CGR_GATHER_RAW, "rstd");
	cg_ep_swiglu(&s->ep, cg_ep_op(&s->ep, OP_MUL, a, w), NULL);
	s->gather = 0;
	s->leaf_gather = 1;
}

START_TEST(test_ws_emu_leaf_gather)
{
	static const int rows[12] = {1, 0, 64, 128, 129, 200, 256, 257, 300, 0, 21, 140};	/* 1496 */
	int counts[8] = {0, 150, 1, 0, 0, 70, 19, 0};
	GemmCase c = {.what = "leaf gather: A in expert order, a row scale through the index, SwiGLU"};

	leaf_spec(&c.s, 8, 256);
	tiles(&c.s, 128, 128, 64, 2, 2, 4);
	c.T = 120;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2);
	c.what = "leaf gather: persistent over 3 CTAs, two consumers";
	tiles(&c.s, 128, 256, 64, 2, 4, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 3;
	check_case(&c, 1e-2);
	c.what = "leaf gather: grouped pairs sharing B, 0..300 rows, 2 CTAs";
	memset(c.counts, 0, sizeof c.counts);
	memcpy(c.counts, rows, sizeof rows);
	leaf_spec(&c.s, 12, 512);
	tiles(&c.s, 128, 256, 64, 2, 4, 3);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 2;
	c.s.cluster_b = 1;
	c.T = 748;
	check_case(&c, 1e-2);
}
END_TEST

/* What the one-row boxes are not for: A not gathered, FP8. */
START_TEST(test_ws_tma_gather_refuses)
{
	CgTarget a = {"sm_90a", NULL, 3};
	GemmSpec s;
	Diag d;

	diag_init(&d, NULL);
	gh_spec_grouped_scale_scatter(&s, 8, 256, 256);
	tiles(&s, 128, 128, 64, 2, 2, 4);
	s.gather_tma = 1;
	ck_assert_int_eq(cg_gemm_check(&a, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "one-row TMA boxes"));
	gh_spec_grouped_swiglu(&s, 8, 256, 256, 2);
	tiles(&s, 128, 128, 64, 2, 2, 4);
	s.gather_tma = 1;
	ck_assert_msg(cg_gemm_check(&a, &s, &d) == 0, "%s", d.last);
}
END_TEST

/*
 * Mixtral's gate|up as main runs it at T = 4096 (128x256, persistent, pairs
 * sharing B in clusters of 2), A by one-row boxes, on sm_90a: A's map over
 * x (box 64 x 1, rows cdiv(2 T, 2)), no cp.async and no proxy fence, a
 * producer of 40 registers (the consumers 232), no spills; and on two
 * consumers without clusters.
 */
START_TEST(test_ws_tma_gather_ptx_assembles_for_sm90a)
{
	GemmSpec s[2];
	CgModule *m;
	const CgKernel *k;
	const char *ptx;

	gh_spec_grouped_swiglu(&s[0], 8, 28672, 4096, 2);
	tiles(&s[0], 128, 256, 64, 2, 4, 4);
	s[0].sched = CG_SCHED_PERSISTENT;
	s[0].ctas = 132;
	s[0].cluster = 2;
	s[0].cluster_b = 1;
	s[0].live_rows = 1;
	gh_spec_grouped_swiglu(&s[1], 256, 4096, 7168, 8);
	tiles(&s[1], 128, 256, 64, 2, 4, 4);
	for (int i = 0; i < 2; i++)
		s[i].gather_tma = 1;
	m = gh_emit_specs("sm_90a", GH_MMA, s, 2, "tg");
	k = cg_module_find(m, "tg0");
	ck_assert_int_eq(k->ntmap, 2);
	ck_assert_str_eq(k->tmap[0].of, "A");
	ck_assert_int_eq(k->tmap[0].box[0], 64);
	ck_assert_int_eq(k->tmap[0].box[1], 1);
	ck_assert_int_eq(cg_expr_eval(k->tmap[0].dims[1], 4096), 4096);	/* x's rows: 2 T / gather_div */
	ck_assert_ptr_nonnull(strstr(k->note, "ws tma tma-rows-a cluster2 multicast-b"));
	ptx = gh_ptx(m);
	ck_assert_int_eq(gh_count(ptx, "cp.async.cg.shared.global"), 0);
	ck_assert_int_eq(gh_count(ptx, "cp.async.mbarrier.arrive"), 0);
	ck_assert_int_eq(gh_count(ptx, "fence.proxy.async"), 0);
	ck_assert(gh_count(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [") >= 2);
	ck_assert_int_eq(gh_count(ptx, "setmaxnreg.dec.sync.aligned.u32 40;"), 2);
	ck_assert_int_eq(gh_count(ptx, "setmaxnreg.inc.sync.aligned.u32 232;"), 2);
	gh_assemble(m, 2, "check_ws tma-gather", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
}
END_TEST

/* --debug=tma-gather in programs (8 experts top-2, 16 top-4, 16 top-8) on the emulator, against the
 * interpreter: where the WS mainloop takes gathered A (--debug=ws-gather; the clusters sharing B of
 * --debug=grouped-c2), its producer loads A by one-row boxes; elsewhere the flag changes nothing. */
START_TEST(test_ws_tma_gather_program_against_interpreter)
{
	DbgFlags dbg = DBG_EMU_WGMMA | DBG_EMU_WS | DBG_TMA_GATHER;

	gh_check_program_max(prog_moe, 150, 4096, "moe_k3", "128x256x64 w2x4+4 s4 ws tma tma-rows-a tiles", 2e-2,
			     dbg | DBG_WS_GATHER);
	gh_check_program_max(prog_c2, 1030, 1100, "moe_k3", "ws tma tma-rows-a cluster2 multicast-b", 2e-2, dbg | DBG_GROUPED_C2);
	gh_check_program_max(prog_ds, 100, 100, "moe_k3", "ws tma tma-rows-a persistent", 2e-2,
			     dbg | DBG_MID_PERSISTENT | DBG_WS_GATHER);
	gh_check_program_max(prog_c2, 200, 1100, "moe_k3_t65_256", "wgmma", 2e-2, dbg | DBG_GROUPED_C2);
}
END_TEST

/* ---- the emulator's named barriers, through cg_emit_turns_probe ---- */

/* The probe (256 threads, 5 turns each) on the emulator: 0 with D[t] = t
 * checked, or -1 with the diagnostic in msg. */
static int
run_turns_probe(DbgFlags flags, char *msg, size_t n)
{
	CgTarget t = {"emu", NULL, 3};
	int32_t D[10];
	uint64_t arg = (uint64_t)(uintptr_t)D;
	CgEmuBuf buf = {D, sizeof D};
	CgEmuLaunch l = {{1, 1, 1}, {256, 1, 1}, 16, &arg, 1, &buf, 1};
	Diag d;
	CgModule *m;
	int rc;

	diag_init(&d, NULL);
	m = cg_module_new(&t, "turns", &d);
	ck_assert_msg(cg_emit_turns_probe(m, "p", 5, flags, &d) == 0, "%s", d.last);
	memset(D, 0xff, sizeof D);
	rc = cg_emu_run(m, "p", &l, &d);
	for (int i = 0; i < 10 && rc == 0; i++)
		ck_assert_int_eq(D[i], i);
	snprintf(msg, n, "%s", d.last);
	cg_module_free(m);
	return rc;
}

/* The ping-pong hand-over kept, and each way of breaking it an error: a
 * missing bar.arrive is a deadlock at the bar.sync that waits for it, one
 * too many leaves its barrier partly arrived when the CTA exits, a count
 * that disagrees leaves the waiters waiting. */
START_TEST(test_ws_named_barrier_turns_and_deadlocks)
{
	CgTarget t = {"sm_90a", NULL, 3};
	char msg[600];
	Diag d;
	CgModule *m;
	size_t len;
	const char *ptx;

	ck_assert_msg(run_turns_probe(0, msg, sizeof msg) == 0, "%s", msg);
	ck_assert_int_eq(run_turns_probe(CG_TURNS_SKIP_ARRIVE, msg, sizeof msg), -1);
	ck_assert_msg(strstr(msg, "deadlock: 128 threads wait at named barriers (thread 128 at bar.sync 2: 128 of 256 "
			  "arrived)"), "%s", msg);
	ck_assert_int_eq(run_turns_probe(CG_TURNS_EXTRA_ARRIVE, msg, sizeof msg), -1);
	ck_assert_msg(strstr(msg, "exits with named barrier 1 partly arrived (128 of 256 threads)"), "%s", msg);
	ck_assert_int_eq(run_turns_probe(CG_TURNS_HALF_COUNT, msg, sizeof msg), -1);
	ck_assert_msg(strstr(msg, "deadlock: 256 threads wait at named barriers"), "%s", msg);
	diag_init(&d, NULL);
	m = cg_module_new(&t, "turns", &d);
	ck_assert_msg(cg_emit_turns_probe(m, "p", 5, 0, &d) == 0, "%s", d.last);
	ptx = cg_module_ptx(m, &len, &d);
	ck_assert_ptr_nonnull(ptx);
	ck_assert_ptr_nonnull(strstr(ptx, "bar.sync %r"));
	ck_assert_ptr_nonnull(strstr(ptx, "bar.arrive %r"));
	gh_assemble(m, 1, "check_ws turns", 0);
	cg_module_free(m);
}
END_TEST

/* ---- the emulator's TMA and mbarriers, through cg_emit_tma_probe ---- */

/* Run the probe with flags over A [20][64] from row 8; 0, or -1 with the diagnostic in msg. */
static int
run_probe(DbgFlags flags, uint16_t *A, uint16_t *D, char *msg, size_t n)
{
	CgTarget t = {"emu", NULL, 3};
	CgTmap map = cg_tma_probe_map(20);
	_Alignas(64) unsigned char enc[128];
	uint64_t args[4];
	CgEmuBuf buf[2] = {{A, 20 * 64 * 2}, {D, 16 * 64 * 2}};
	Diag d;
	CgModule *m;
	int rc = -1;

	diag_init(&d, NULL);
	m = cg_module_new(&t, "probe", &d);
	ck_assert_msg(cg_emit_tma_probe(m, "p", flags, &d) == 0, "%s", d.last);
	ck_assert_int_eq(cg_emu_tmap_encode(&map, A, 0, enc, &d), 0);
	args[0] = (uint64_t)(uintptr_t)A;
	args[1] = (uint64_t)(uintptr_t)D;
	args[2] = (uint64_t)(uintptr_t)enc;
	args[3] = 8;
	{
		CgEmuLaunch l = {{1, 1, 1}, {128, 1, 1}, 4096, args, 4, buf, 2};
		rc = cg_emu_run(m, "p", &l, &d);
	}
	snprintf(msg, n, "%s", d.last);
	cg_module_free(m);
	return rc;
}

START_TEST(test_ws_tma_probe_box_swizzle_and_zero_fill)
{
	uint16_t *A = aligned_alloc(64, 20 * 64 * 2), *D = aligned_alloc(64, 16 * 64 * 2);
	char msg[600];

	for (int i = 0; i < 20 * 64; i++)
		A[i] = (uint16_t)(0x3f80 + i);		/* distinct bf16 values */
	memset(D, 0xff, 16 * 64 * 2);
	ck_assert_msg(run_probe(0, A, D, msg, sizeof msg) == 0, "%s", msg);
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 64; c++)
			ck_assert_msg(D[r * 64 + c] == (r + 8 < 20 ? A[(r + 8) * 64 + c] : 0),
				      "row %d col %d: %04x", r, c, D[r * 64 + c]);
	free(A);
	free(D);
}
END_TEST

START_TEST(test_ws_tma_probe_hazards_are_diagnostics)
{
	static const struct {
		DbgFlags flags;
		const char *says;
	} bad[] = {
		{CG_TMAPROBE_NO_WAIT, "before waiting for phase 0"},
		{CG_TMAPROBE_EXTRA_ARRIVE, "more arrivals"},
		{CG_TMAPROBE_SHORT_TX, "waiting on mbarriers"},
		{CG_TMAPROBE_OVERWRITE, "has not yet written"},
		{CG_TMAPROBE_STRAY_TX, "partly arrived (1 of its 1 arrivals, 16 transaction bytes outstanding)"},
	};
	uint16_t *A = aligned_alloc(64, 20 * 64 * 2), *D = aligned_alloc(64, 16 * 64 * 2);
	char msg[600];

	memset(A, 0, 20 * 64 * 2);
	for (size_t i = 0; i < NELEM(bad); i++) {
		ck_assert_int_eq(run_probe(bad[i].flags, A, D, msg, sizeof msg), -1);
		ck_assert_msg(strstr(msg, bad[i].says), "flags %#llx: %s", (unsigned long long)bad[i].flags, msg);
	}
	free(A);
	free(D);
}
END_TEST

START_TEST(test_ws_tma_probe_ptx)
{
	CgTarget t = {"sm_90a", NULL, 3}, t80 = {"sm_80", NULL, 3};
	Diag d;
	CgModule *m;
	size_t len;
	const char *ptx;

	diag_init(&d, NULL);
	m = cg_module_new(&t80, "p", &d);
	ck_assert_int_eq(cg_emit_tma_probe(m, "p", 0, &d), -1);	/* no TMA on sm_80 */
	ck_assert_ptr_nonnull(strstr(d.last, "TMA"));
	cg_module_free(m);
	m = cg_module_new(&t, "p", &d);
	ck_assert_msg(cg_emit_tma_probe(m, "p", 0, &d) == 0, "%s", d.last);
	ptx = cg_module_ptx(m, &len, &d);
	ck_assert_ptr_nonnull(ptx);
	ck_assert_ptr_nonnull(strstr(ptx, ".param .align 64 .b8 p_param_2[128]"));
	ck_assert_ptr_nonnull(strstr(ptx, "mov.b64 m, p_param_2;"));
	ck_assert_ptr_nonnull(strstr(ptx, "cvta.param.u64"));
	ck_assert_ptr_nonnull(strstr(ptx, "mbarrier.init.shared::cta.b64"));
	ck_assert_ptr_nonnull(strstr(ptx, "fence.mbarrier_init.release.cluster"));
	gh_assemble(m, 1, "check_ws", GH_NO_SPILLS);
	cg_module_free(m);
}
END_TEST

/*
 * The GEMMs in clusters of 2 on the emulator, against the reference and
 * bit for bit the same spec without the cluster (a cluster changes only
 * where a tile's bytes come from: dense, the plain tile; grouped, the pairs
 * alone, each CTA loading all of B's tile): dense 128x256 sharing B (the
 * dense-c2 plan, C by TMA stores; an odd row-tile count, the last pair's
 * second tile past M), column pairs sharing A cooperative and ping-pong,
 * grouped pairs sharing B (scattered and gathered A, ping-pong; experts of
 * 0..300 rows, odd last row tiles), persistent over fewer clusters than
 * pairs.
 */
static void
cluster_case(GemmCase *c, double tol)
{
	GemmCase w = *c;
	GemmRun r, q;
	GemmErr e;
	CgModule *m;
	const CgKernel *k;

	c->s.cluster = 2;
	w.s.cluster = 0;
	if (w.s.groups == 0)
		w.s.cluster_b = 0;
	m = gh_emit_specs("emu", GH_MMA, &c->s, 1, "c");
	k = cg_module_find(m, "c0");
	ck_assert_int_eq(k->cluster, 2);
	ck_assert_msg(strstr(k->note, c->s.cluster_b ? "cluster2 multicast-b" : "cluster2 multicast-a"), "%s", k->note);
	cg_module_free(m);
	ck_assert_msg(gh_run(&r, c) == 0 && gh_compare(&r, &e) == 0, "%s: clusters: %s", c->what, r.msg);
	ck_assert_msg(e.err < tol, "%s: clusters: relative L2 error %g >= %g", c->what, e.err, tol);
	ck_assert_msg(gh_run(&q, &w) == 0, "%s: without: %s", c->what, q.msg);
	ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0,
		      "%s: clusters and the same tiles without them differ", c->what);
	gh_free(&r);
	gh_free(&q);
}

START_TEST(test_ws_emu_dense_clusters)
{
	GemmCase c = {.what = "dense 128x256 sharing B (dense-c2), TMA stores, M = 300, 4 CTAs"};

	gh_spec_dense_bias_gelu(&c.s, 512, 256);
	tiles(&c.s, 128, 256, 64, 2, 4, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 4;
	c.s.cluster_b = 1;
	c.s.tma_store = 1;
	c.T = 300;
	cluster_case(&c, 1e-2);
	c.what = "dense column pairs sharing A, 128x128, M = 200, 2 CTAs over 8 tiles";
	tiles(&c.s, 128, 128, 64, 2, 2, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 2;
	c.s.cluster_b = 0;
	c.s.tma_store = 0;
	c.T = 200;
	cluster_case(&c, 1e-2);
	c.what = "dense ping-pong column pairs sharing A, M = 330, 4 CTAs";
	pingpong(&c.s, 128, 128, 64, 5, 4);
	c.T = 330;
	cluster_case(&c, 1e-2);
}
END_TEST

START_TEST(test_ws_emu_grouped_clusters)
{
	GemmCase c = {0};

	grouped_pair_cases(&c, cluster_case, 0);
}
END_TEST

/*
 * Clusters of 4 as 2x2 (GemmSpec.cluster = 4, --debug=dense-c4) on the
 * emulator: against the reference, and bit for bit the same tiles without
 * the cluster and in dense-c2's pairs sharing B (a cluster changes only
 * where a tile's bytes come from).  Odd row and column tile counts (a 2x2's
 * tile past M reads zeros, past N loads the last column tile's B for its
 * column partner; neither stores), more k-tiles than stages, persistent
 * over fewer clusters than 2x2s; bias + GELU, TMA stores and register stores.
 */
static void
c4_case(GemmCase *c, double tol)
{
	GemmCase w = *c, p = *c;
	GemmRun r, q;
	GemmErr e;
	CgModule *m;
	const CgKernel *k;

	c->s.cluster = 4;
	c->s.cluster_b = 0;
	w.s.cluster = w.s.cluster_b = 0;
	p.s.cluster = 2;
	p.s.cluster_b = 1;
	m = gh_emit_specs("emu", GH_MMA, &c->s, 1, "c");
	k = cg_module_find(m, "c0");
	ck_assert_int_eq(k->cluster, 4);
	ck_assert_msg(strstr(k->note, "cluster4 multicast-ab"), "%s", k->note);
	ck_assert_int_eq(k->tmap[0].box[1], c->s.bm / 2);	/* half of A's rows */
	ck_assert_int_eq(k->tmap[1].box[1], c->s.bn / 2);	/* half of B's */
	cg_module_free(m);
	ck_assert_msg(gh_run(&r, c) == 0 && gh_compare(&r, &e) == 0, "%s: 2x2: %s", c->what, r.msg);
	ck_assert_msg(e.err < tol, "%s: 2x2: relative L2 error %g >= %g", c->what, e.err, tol);
	ck_assert_msg(gh_run(&q, &w) == 0, "%s: without: %s", c->what, q.msg);
	ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0,
		      "%s: the 2x2 and the same tiles without a cluster differ", c->what);
	gh_free(&q);
	ck_assert_msg(gh_run(&q, &p) == 0, "%s: pairs: %s", c->what, q.msg);
	ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0,
		      "%s: the 2x2 and dense-c2's pairs differ", c->what);
	gh_free(&q);
	gh_free(&r);
}

/* The dense-c2 tile (128x256 over two 128x128 warpgroups), persistent over ctas. */
static void
c4_spec(GemmCase *c, int64_t N, int64_t K, int stages, int ctas, int tma_store)
{
	gh_spec_dense_bias_gelu(&c->s, N, K);
	tiles(&c->s, 128, 256, 64, 2, 4, stages);
	c->s.sched = CG_SCHED_PERSISTENT;
	c->s.ctas = ctas;
	c->s.tma_store = tma_store;
}

START_TEST(test_ws_emu_dense_quad_clusters)
{
	GemmCase c = {.what = "2x2, TMA stores, M = 300 (3 row tiles), N = 768 (3 column tiles), 6 k-tiles over "
			      "3 stages, 4 CTAs"};

	c4_spec(&c, 768, 384, 3, 4, 1);
	c.T = 300;
	c4_case(&c, 1e-2);
	c.what = "2x2, register stores, M = 1030 (9 row tiles), N = 512, 2 k-tiles, 8 CTAs over 5 2x2s";
	c4_spec(&c, 512, 128, 2, 8, 0);
	c.T = 1030;
	c4_case(&c, 1e-2);
	c.what = "2x2, TMA stores, M = 100 (one row tile), N = 256 (one column tile): three of the 2x2's tiles empty";
	c4_spec(&c, 256, 256, 2, 4, 1);
	c.T = 100;
	c4_case(&c, 1e-2);
}
END_TEST

/* What the 2x2's protocol needs, each part left out (GemmSpec.quad_fault): a
 * row partner missing from A's multicast mask or a column partner from B's
 * (its full barrier never gets the stage's bytes), the releases not sent to
 * the column partner (whose producer then never refills a stage): the
 * emulator says deadlock, not a hang or the right bits. */
START_TEST(test_ws_emu_dense_quad_faults)
{
	static const int faults[] = {CG_QUAD_NO_A_PARTNER, CG_QUAD_NO_B_PARTNER, CG_QUAD_NO_COL_RELEASE};
	GemmCase c = {.what = "2x2 fault"};
	GemmRun r;

	for (size_t i = 0; i < NELEM(faults); i++) {
		c4_spec(&c, 512, 256, 2, 4, 0);
		c.s.cluster = 4;
		c.s.quad_fault = faults[i];
		c.T = 200;
		ck_assert_msg(gh_run(&r, &c) != 0, "fault %d: ran", faults[i]);
		ck_assert_msg(strstr(r.msg, "deadlock"), "fault %d: %s", faults[i], r.msg);
		gh_free(&r);
	}
	c4_spec(&c, 512, 256, 2, 4, 0);	/* the same case without a fault runs */
	c.s.cluster = 4;
	ck_assert_msg(gh_run(&r, &c) == 0, "%s", r.msg);
	gh_free(&r);
}
END_TEST

/* --debug=dense-c2 on the emulator (cg_gemm_dense_c2_here): a dense GEMM whose bucket past 1024 rows
 * the heuristic tiles 256x128 runs 128x256 in clusters of 2 sharing B, with TMA stores (sm_90a's
 * default, --debug=ws-tma-store on the emulator) and without; 1030 rows (an odd row-tile count: the
 * last pair's second tile empty), against the interpreter. */
static const char prog_dense_c2[] =
	"weight $w : bf16[4096,128]\n"
	"graph @d(%x: bf16[T,128]) -> (y: bf16[T,4096]) {\n"
	"	%y = matmul %x, $w, trans_b=1 : bf16[T,4096]\n"
	"	ret %y\n"
	"}\n";

START_TEST(test_ws_dense_c2_program_against_interpreter)
{
	DbgFlags dbg = DBG_EMU_WGMMA | DBG_EMU_WS | DBG_DENSE_C2;

	gh_check_program_max(prog_dense_c2, 1030, 2048, "d_k0", "128x256x64 w2x4+4 s4 ws tma cluster2 multicast-b "
			     "tma-store persistent", 2e-2, dbg | DBG_WS_TMA_STORE);	/* sm_90a's plan */
	gh_check_program_max(prog_dense_c2, 1030, 2048, "d_k0", "ws tma cluster2 multicast-b persistent", 2e-2, dbg);
}
END_TEST

/*
 * Clusters of 4 (2x2) for sm_90a at the dense up-projection's shape (bench/models/dense_up.ir: N 14336,
 * K 4096, bias + GELU; dense-c2's 128x256 plan, 4 stages, TMA stores; and f16 from registers): the
 * cluster check of 4, A's and B's half boxes multicast to a mask of two ranks (a value: cvt to the
 * 16-bit register), each release here and in the row and column partners (two mapa), no
 * .release.cluster; ptxas without spills; the refusals.
 */
START_TEST(test_ws_quad_ptx_assembles_for_sm90a)
{
	CgTarget a = {"sm_90a", NULL, 3};
	GemmSpec s[2];
	CgModule *m;
	const CgKernel *k;
	const char *ptx;
	Diag d;

	gh_spec_dense_bias_gelu(&s[0], 14336, 4096);
	tiles(&s[0], 128, 256, 64, 2, 4, 4);
	s[0].tma_store = 1;
	s[1] = s[0];
	s[1].a_dt = s[1].b_dt = s[1].c_dt = DT_F16;
	s[1].tma_store = 0;
	for (int i = 0; i < 2; i++) {
		s[i].sched = CG_SCHED_PERSISTENT;
		s[i].ctas = 132;
		s[i].cluster = 4;
	}
	m = gh_emit_specs("sm_90a", GH_MMA, s, 2, "q");
	k = cg_module_find(m, "q0");
	ck_assert_int_eq(k->cluster, 4);
	ck_assert_int_eq(k->tmap[0].box[1], 64);	/* half of A's 128 rows */
	ck_assert_int_eq(k->tmap[1].box[1], 128);	/* half of B's 256 */
	ck_assert_msg(strstr(k->note, "s4 ws tma cluster4 multicast-ab tma-store persistent"), "%s", k->note);
	ptx = gh_ptx(m);
	ck_assert_int_eq(gh_count(ptx, "mov.u32 n, %cluster_nctarank;"), 2);
	ck_assert_int_eq(gh_count(ptx, "barrier.cluster.arrive;"), 4);
	ck_assert_int_eq(gh_count(ptx, ".multicast::cluster ["), 4);	/* A's and B's halves, bk 64: one each a k-tile */
	ck_assert_int_eq(gh_count(ptx, "cvt.u16.u32 k,"), 4);
	ck_assert_int_eq(gh_count(ptx, "mov.b16 k,"), 0);
	ck_assert(gh_count(ptx, "mapa.shared::cluster.u32") >= 4);	/* row and column partner, each kernel */
	ck_assert_int_eq(gh_count(ptx, "mbarrier.arrive.release.cluster"), 0);
	gh_assemble(m, 2, "check_ws cluster4", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
	diag_init(&d, NULL);
	s[0].ctas = 130;
	ck_assert_int_eq(cg_gemm_check(&a, &s[0], &d), -1);
	ck_assert_msg(strstr(d.last, "multiple of 4 CTAs (130)"), "%s", d.last);
	s[0].ctas = 132;
	s[0].cluster_b = 1;
	ck_assert_int_eq(cg_gemm_check(&a, &s[0], &d), -1);
	ck_assert_msg(strstr(d.last, "clusters of 4 (2x2 sharing A and B)"), "%s", d.last);
	s[0].cluster_b = 0;
	s[0].cluster = 3;
	ck_assert_int_eq(cg_gemm_check(&a, &s[0], &d), -1);
	ck_assert_msg(strstr(d.last, "need 2, 4, or none"), "%s", d.last);
}
END_TEST

/* A tuning table's .c4 (codegen/tuning.c): one spelling (after .c2a/.c2b's place, before .wide; never
 * with .pers or a .c2 suffix), persistent over CG_CLUSTER_CTAS, and back from the spec. */
START_TEST(test_ws_quad_variant)
{
	CgVariant v, u;
	GemmSpec s;
	char back[64];

	ck_assert_int_eq(cg_variant_parse("128x256x64.w2x4.s4.k1.c4", &v), 0);
	ck_assert_int_eq(v.cluster, 4);
	ck_assert_int_eq(v.cluster_b, 0);
	ck_assert_int_eq(cg_variant_parse("128x256x64.w2x4.s4.k1.c4.wide", &v), 0);
	ck_assert_int_eq(cg_variant_parse("128x256x64.w2x4.s4.k1.wide.c4", &v), -1);
	ck_assert_int_eq(cg_variant_parse("128x256x64.w2x4.s4.k1.c4.pers", &v), -1);
	ck_assert_int_eq(cg_variant_parse("128x256x64.w2x4.s4.k1.c4.c2b", &v), -1);
	ck_assert_int_eq(cg_variant_parse("128x256x64.w2x4.s4.k1.c2b.c4", &v), -1);
	ck_assert_int_eq(cg_variant_parse("128x256x64.w2x4.s4.k1.c4", &v), 0);
	gh_spec_dense_bias_gelu(&s, 14336, 4096);
	cg_variant_apply(&v, &s);
	ck_assert_int_eq(s.cluster, 4);
	ck_assert_int_eq(s.sched, CG_SCHED_PERSISTENT);
	ck_assert_int_eq(s.ctas, CG_CLUSTER_CTAS);
	cg_variant_of(&s, &u);
	cg_variant_print(&u, back, sizeof back);
	ck_assert_str_eq(back, "128x256x64.w2x4.s4.k1.c4");
}
END_TEST

/* The dense up-projection's form (bench/models/dense_up.ir): bias and GELU (tanh) after the GEMM. */
static const char prog_dense_up[] =
	"weight $w : bf16[4096,128]\n"
	"weight $b : bf16[4096]\n"
	"graph @u(%x: bf16[T,128]) -> (y: bf16[T,4096]) {\n"
	"	%h = matmul %x, $w, $b, trans_b=1 : bf16[T,4096]\n"
	"	%y = gelu %h, approx=tanh : bf16[T,4096]\n"
	"	ret %y\n"
	"}\n";

/* --debug=dense-c4 on the emulator: the same dense GEMM's bucket past 1024 rows as 128x256 tiles in 2x2
 * clusters sharing A and B (4096 columns: 16 column tiles; 1030 rows: 9 row tiles, the last 2x2's second
 * row empty), with and without TMA stores, and with bias + GELU, against the interpreter; without the
 * flag the pairs. */
START_TEST(test_ws_dense_c4_program_against_interpreter)
{
	DbgFlags dbg = DBG_EMU_WGMMA | DBG_EMU_WS | DBG_DENSE_C4;

	gh_check_program_max(prog_dense_c2, 1030, 2048, "d_k0", "128x256x64 w2x4+4 s4 ws tma cluster4 multicast-ab "
			     "tma-store persistent", 2e-2, dbg | DBG_WS_TMA_STORE);
	gh_check_program_max(prog_dense_c2, 1030, 2048, "d_k0", "ws tma cluster4 multicast-ab persistent", 2e-2, dbg);
	gh_check_program_max(prog_dense_c2, 1030, 2048, "d_k0", "ws tma cluster2 multicast-b persistent", 2e-2,
			     (dbg & ~DBG_DENSE_C4) | DBG_DENSE_C2);
	gh_check_program_max(prog_dense_up, 1100, 2048, "u_k0", "ws tma cluster4 multicast-ab tma-store persistent",
			     2e-2, dbg | DBG_WS_TMA_STORE);
}
END_TEST

/* ---- clusters on the emulator, through cg_emit_cluster_probe ---- */

enum { CP_CTAS = 4, CP_ROUNDS = 5, CP_ROWS = 16 * CP_ROUNDS * CP_CTAS / 2 };

/* The cluster probe with flags over A [CP_ROWS][64], launched in clusters
 * of `cluster` (0: the kernel's); 0, or -1 with the diagnostic in msg. */
static int
run_cluster_probe(DbgFlags flags, int cluster, const uint16_t *A, uint16_t *D, char *msg, size_t n)
{
	CgTarget t = {"emu", NULL, 3};
	CgTmap map = cg_cluster_probe_map(CP_ROWS);
	_Alignas(64) unsigned char enc[128];
	uint64_t args[4];
	CgEmuBuf buf[2] = {{A, CP_ROWS * 64 * 2}, {D, CP_CTAS * CP_ROUNDS * 128 * 16}};
	Diag d;
	CgModule *m;
	int rc;

	diag_init(&d, NULL);
	m = cg_module_new(&t, "cprobe", &d);
	ck_assert_msg(cg_emit_cluster_probe(m, "p", CP_CTAS, flags, &d) == 0, "%s", d.last);
	ck_assert_int_eq(cg_module_find(m, "p")->cluster, 2);
	ck_assert_int_eq(cg_emu_tmap_encode(&map, A, 0, enc, &d), 0);
	args[0] = (uint64_t)(uintptr_t)A;
	args[1] = (uint64_t)(uintptr_t)D;
	args[2] = (uint64_t)(uintptr_t)enc;
	args[3] = CP_ROUNDS;
	{
		CgEmuLaunch l = {{CP_CTAS, 1, 1}, {128, 1, 1}, 4096, args, 4, buf, 2, cluster};
		rc = cg_emu_run(m, "p", &l, &d);
	}
	snprintf(msg, n, "%s", d.last);
	cg_module_free(m);
	return rc;
}

/*
 * Two clusters of 2, five rounds through one stage: each CTA gets the whole
 * 16-row tile of its cluster's round, half of it multicast by its peer,
 * and may refill the stage only after the peer's release.
 */
START_TEST(test_ws_cluster_probe_multicast_and_release)
{
	uint16_t *A = aligned_alloc(64, CP_ROWS * 64 * 2), *D = aligned_alloc(64, CP_CTAS * CP_ROUNDS * 128 * 16);
	char msg[600];

	for (int i = 0; i < CP_ROWS * 64; i++)
		A[i] = (uint16_t)(0x3f80 + i);
	memset(D, 0xff, CP_CTAS * CP_ROUNDS * 128 * 16);
	ck_assert_msg(run_cluster_probe(0, 0, A, D, msg, sizeof msg) == 0, "%s", msg);
	for (int c = 0; c < CP_CTAS; c++)
		for (int i = 0; i < CP_ROUNDS; i++)
			for (int t = 0; t < 128; t++) {
				int row = 16 * (c / 2 * CP_ROUNDS + i) + t / 8;
				const uint16_t *got = D + ((size_t)(c * CP_ROUNDS + i) * 128 + (size_t)t) * 8;
				ck_assert_msg(memcmp(got, A + row * 64 + t % 8 * 8, 16) == 0,
					      "CTA %d round %d thread %d: %04x, not row %d's", c, i, t, got[0], row);
			}
	free(A);
	free(D);
	{	/* the same kernel for sm_90a through ptxas */
		CgTarget a = {"sm_90a", NULL, 3};
		Diag d;
		CgModule *m;

		diag_init(&d, NULL);
		m = cg_module_new(&a, "cprobe", &d);
		ck_assert_msg(cg_emit_cluster_probe(m, "p", CP_CTAS, 0, &d) == 0, "%s", d.last);
		ck_assert_int_eq(gh_count(gh_ptx(m), ".multicast::cluster ["), 1);
		ck_assert_int_eq(gh_count(gh_ptx(m), "mbarrier.arrive.shared::cluster.b64 _,"), 1);
		gh_assemble(m, 1, "check_ws cluster probe", GH_NO_SPILLS);
		cg_module_free(m);
	}
}
END_TEST

/* What a cluster kernel gets wrong is a diagnostic, not a hang or quietly wrong bytes. */
START_TEST(test_ws_cluster_probe_hazards_are_diagnostics)
{
	static const struct {
		DbgFlags flags;
		int cluster;
		const char *says;
	} bad[] = {
		{0, 1, "runs in clusters of 2, launched in clusters of 1"},
		{CG_CLPROBE_MASK_SELF, 0, "deadlock: 0 threads at a barrier, 128 waiting on mbarriers"},
		{CG_CLPROBE_SELF_RELEASE, 0, "which an earlier tensor copy has not yet written"},
		{CG_CLPROBE_NO_END_SYNC, 0, "partly arrived"},
		{CG_CLPROBE_NO_INIT_SYNC, 0, "where none was initialised"},
		{CG_CLPROBE_MASK_OUTSIDE, 0, "mask 0x5, in a cluster of 2"},
	};
	uint16_t *A = aligned_alloc(64, CP_ROWS * 64 * 2), *D = aligned_alloc(64, CP_CTAS * CP_ROUNDS * 128 * 16);
	char msg[600];

	memset(A, 0, CP_ROWS * 64 * 2);
	for (size_t i = 0; i < NELEM(bad); i++) {
		ck_assert_int_eq(run_cluster_probe(bad[i].flags, bad[i].cluster, A, D, msg, sizeof msg), -1);
		ck_assert_msg(strstr(msg, bad[i].says), "flags %#llx: %s", (unsigned long long)bad[i].flags, msg);
	}
	free(A);
	free(D);
}
END_TEST

/* ---- setmaxnreg's per-CTA register pool, through cg_emit_regs_probe ---- */

/* The probe (384 threads) on the emulator: 0, or -1 with the diagnostic in msg. */
static int
run_regs_probe(int entry, int dec, int inc, char *msg, size_t n)
{
	CgTarget t = {"emu", NULL, 3};
	int32_t D[384];
	uint64_t arg = (uint64_t)(uintptr_t)D;
	CgEmuBuf buf = {D, sizeof D};
	CgEmuLaunch l = {{1, 1, 1}, {384, 1, 1}, 0, &arg, 1, &buf, 1};
	Diag d;
	CgModule *m;
	int rc;

	diag_init(&d, NULL);
	m = cg_module_new(&t, "regs", &d);
	ck_assert_msg(cg_emit_regs_probe(m, "p", entry, dec, inc, &d) == 0, "%s", d.last);
	memset(D, 0, sizeof D);
	rc = cg_emu_run(m, "p", &l, &d);
	for (int i = 0; i < 384 && rc == 0; i++)
		ck_assert_int_eq(D[i], i + 1);
	snprintf(msg, n, "%s", d.last);
	cg_module_free(m);
	return rc;
}

/* The split the WS GEMM uses fits what 384 threads start with (168 each);
 * the one the gathered kernels used (48 + 2 x 232) does not: the second
 * consumer warpgroup's setmaxnreg.inc waits forever, as it did on the H200. */
START_TEST(test_ws_setmaxnreg_pool)
{
	CgTarget t = {"emu", NULL, 3};
	char msg[600];
	Diag d;
	CgModule *m;

	ck_assert_int_eq(cg_regs_per_thread(384), 168);
	ck_assert_msg(run_regs_probe(168, 40, 232, msg, sizeof msg) == 0, "%s", msg);
	ck_assert_msg(run_regs_probe(168, 56, 224, msg, sizeof msg) == 0, "%s", msg);
	ck_assert_int_eq(run_regs_probe(168, 48, 232, msg, sizeof msg), -1);
	ck_assert_msg(strstr(msg, "deadlock: setmaxnreg.inc 232 of warpgroup 2 waits for 8192 registers, "
			  "the CTA's pool has 7168"), "%s", msg);
	ck_assert_int_eq(run_regs_probe(160, 40, 232, msg, sizeof msg), -1);	/* fewer at entry */
	ck_assert_msg(strstr(msg, "deadlock: setmaxnreg.inc 232"), "%s", msg);
	ck_assert_int_eq(run_regs_probe(168, 40, 160, msg, sizeof msg), -1);	/* .inc downwards */
	ck_assert_msg(strstr(msg, "setmaxnreg.inc 160 with 168 registers"), "%s", msg);
	ck_assert_int_eq(run_regs_probe(168, 176, 232, msg, sizeof msg), -1);	/* .dec upwards */
	ck_assert_msg(strstr(msg, "setmaxnreg.dec 176 with 168 registers"), "%s", msg);
	/* not pinned, or more than 384 threads can start with: refused when built */
	diag_init(&d, NULL);
	m = cg_module_new(&t, "regs", &d);
	ck_assert_int_eq(cg_emit_regs_probe(m, "p", 0, 40, 232, &d), -1);
	ck_assert_msg(strstr(d.last, "registers at entry are not pinned"), "%s", d.last);
	ck_assert_int_eq(cg_emit_regs_probe(m, "q", 176, 40, 232, &d), -1);
	ck_assert_msg(strstr(d.last, "176 registers per thread at entry"), "%s", d.last);
	ck_assert_int_eq(cg_module_nkernel(m), 0);
	cg_module_free(m);
}
END_TEST

/* On sm_90a the pinned count is .maxnreg, and ptxas starts the threads with it. */
START_TEST(test_ws_setmaxnreg_probe_ptx)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	CgModule *m;
	size_t len;
	const char *ptx;

	diag_init(&d, NULL);
	m = cg_module_new(&t, "regs", &d);
	ck_assert_msg(cg_emit_regs_probe(m, "p", 168, 40, 232, &d) == 0, "%s", d.last);
	ptx = cg_module_ptx(m, &len, &d);
	ck_assert_ptr_nonnull(ptx);
	ck_assert_ptr_nonnull(strstr(ptx, ".maxnreg 168"));
	ck_assert_ptr_nonnull(strstr(ptx, "setmaxnreg.dec.sync.aligned.u32 40"));
	ck_assert_ptr_nonnull(strstr(ptx, "setmaxnreg.inc.sync.aligned.u32 232"));
	if (gh_assemble(m, 1, "check_ws regs", 0))	/* unpinned, ptxas gives it 4 and ignores setmaxnreg */
		ck_assert_int_eq(cg_module_find(m, "p")->regs, 168);
	cg_module_free(m);
}
END_TEST

Suite *
ws_suite(void)
{
	Suite *s = suite_create("ws");
	TCase *t = tcase_create("ws");

	tcase_set_timeout(t, 600);
	tcase_add_test(t, test_ws_needs_sm90a_and_refuses_what_tma_cannot);
	tcase_add_test(t, test_ws_params_and_tensor_maps);
	tcase_add_test(t, test_ws_ptx_assembles_for_sm90a);
	tcase_add_test(t, test_ws_gather_ptx_assembles_for_sm90a);
	tcase_add_test(t, test_ws_pingpong_ptx_assembles_for_sm90a);
	tcase_add_test(t, test_ws_cluster_ptx_assembles_for_sm90a);
	tcase_add_loop_test(t, test_ws_emu_dense, 0, (int)NELEM(dense_cases));
	tcase_add_test(t, test_ws_emu_dense_persistent_more_tiles_than_ctas);
	tcase_add_test(t, test_ws_emu_dense_bands);
	tcase_add_test(t, test_ws_emu_kn_f16_residual);
	tcase_add_test(t, test_ws_emu_grouped_scale_scatter);
	tcase_add_test(t, test_ws_emu_grouped_expert_bias_swiglu);
	tcase_add_test(t, test_ws_emu_grouped_gather_swiglu);
	tcase_add_test(t, test_ws_emu_grouped_no_rows);
	tcase_add_test(t, test_ws_emu_192_rows_three_consumers);
	tcase_add_test(t, test_ws_emu_192_skips_warpgroups_without_rows);
	tcase_add_test(t, test_ws_192_ptx_assembles_for_sm90a);
	tcase_add_loop_test(t, test_ws_emu_pingpong_dense, 0, (int)NELEM(pp_cases));
	tcase_add_test(t, test_ws_emu_pingpong_kn_f16_residual);
	tcase_add_test(t, test_ws_emu_pingpong_grouped);
	tcase_add_test(t, test_ws_pingpong_program_against_interpreter);
	tcase_add_test(t, test_ws_named_barrier_turns_and_deadlocks);
	tcase_add_test(t, test_ws_emu_skips_row_blocks_without_rows);
	tcase_add_test(t, test_ws_tma_probe_box_swizzle_and_zero_fill);
	tcase_add_test(t, test_ws_tma_probe_hazards_are_diagnostics);
	tcase_add_test(t, test_ws_tma_probe_ptx);
	tcase_add_test(t, test_ws_setmaxnreg_pool);
	tcase_add_test(t, test_ws_setmaxnreg_probe_ptx);
	suite_add_tcase(s, t);
	t = tcase_create("tma-store");	/* C by TMA stores, --debug=ws-tma-store (CK_RUN_CASE=tma-store) */
	tcase_add_test(t, test_ws_emu_tma_store);
	tcase_add_test(t, test_ws_tma_store_refuses_other_outputs);
	tcase_add_test(t, test_ws_tma_store_ptx);
	suite_add_tcase(s, t);
	t = tcase_create("wide");	/* 256-column warpgroup tiles (CK_RUN_CASE=wide) */
	tcase_set_timeout(t, 600);
	tcase_add_test(t, test_ws_emu_wide_warpgroup_tiles);
	suite_add_tcase(s, t);
	t = tcase_create("epilogue");	/* CK_RUN_CASE=epilogue runs it alone */
	tcase_set_timeout(t, 600);
	tcase_add_test(t, test_ws_emu_mat_leaves_ahead);
	suite_add_tcase(s, t);
	t = tcase_create("mid");	/* --debug=mid-persistent (CK_RUN_CASE=mid) */
	tcase_set_timeout(t, 600);
	tcase_add_test(t, test_mid_persistent_program_against_interpreter);
	suite_add_tcase(s, t);
	t = tcase_create("lean");	/* --debug=grouped-lean (CK_RUN_CASE=lean) */
	tcase_set_timeout(t, 600);
	tcase_add_test(t, test_ws_emu_live_rows_every_height);
	tcase_add_test(t, test_ws_live_rows_ptx_assembles_for_sm90a);
	tcase_add_test(t, test_ws_emu_snake_rounds);
	tcase_add_test(t, test_ws_snake_refuses_clusters);
	tcase_add_test(t, test_ws_lean_program_against_interpreter);
	suite_add_tcase(s, t);
	t = tcase_create("pairs");	/* grouped clusters sharing B, --debug=grouped-c2 (CK_RUN_CASE=pairs) */
	tcase_set_timeout(t, 600);
	tcase_add_test(t, test_ws_grouped_cluster_b_ptx_assembles_for_sm90a);
	tcase_add_test(t, test_ws_emu_grouped_pairs);
	tcase_add_test(t, test_ws_grouped_c2_program_against_interpreter);
	tcase_add_test(t, test_ws_gather_pingpong_program_against_interpreter);
	tcase_add_test(t, test_ws_gather_pingpong_wide_program_against_interpreter);
	tcase_add_test(t, test_ws_grouped_wide_program_against_interpreter);
	tcase_add_test(t, test_ws_grouped_cols_program_against_interpreter);
	suite_add_tcase(s, t);
	t = tcase_create("tma-gather");	/* gathered A by one-row TMA boxes (CK_RUN_CASE=tma-gather) */
	tcase_set_timeout(t, 600);
	tcase_add_test(t, test_ws_emu_tma_gather);
	tcase_add_test(t, test_ws_tma_gather_refuses);
	tcase_add_test(t, test_ws_emu_leaf_gather);
	tcase_add_test(t, test_ws_tma_gather_ptx_assembles_for_sm90a);
	tcase_add_test(t, test_ws_tma_gather_program_against_interpreter);
	suite_add_tcase(s, t);
	t = tcase_create("quad-store");	/* a quad's results swapped, 16 bytes a lane (CK_RUN_CASE=quad-store) */
	tcase_set_timeout(t, 600);
	tcase_add_test(t, test_ws_emu_quad_store);
	tcase_add_test(t, test_ws_quad_store_ptx);
	tcase_add_test(t, test_ws_quad_store_program_against_interpreter);
	suite_add_tcase(s, t);
	t = tcase_create("clusters");	/* clusters on the emulator (CK_RUN_CASE=clusters) */
	tcase_set_timeout(t, 600);
	tcase_add_test(t, test_ws_cluster_probe_multicast_and_release);
	tcase_add_test(t, test_ws_cluster_probe_hazards_are_diagnostics);
	tcase_add_test(t, test_ws_emu_dense_clusters);
	tcase_add_test(t, test_ws_emu_grouped_clusters);
	tcase_add_test(t, test_ws_dense_c2_program_against_interpreter);
	suite_add_tcase(s, t);
	t = tcase_create("c4");	/* clusters of 4 as 2x2, --debug=dense-c4 (CK_RUN_CASE=c4) */
	tcase_set_timeout(t, 600);
	tcase_add_test(t, test_ws_quad_ptx_assembles_for_sm90a);
	tcase_add_test(t, test_ws_quad_variant);
	tcase_add_test(t, test_ws_emu_dense_quad_clusters);
	tcase_add_test(t, test_ws_emu_dense_quad_faults);
	tcase_add_test(t, test_ws_dense_c4_program_against_interpreter);
	suite_add_tcase(s, t);
	t = tcase_create("plans");	/* the ping-pong heuristic (CK_RUN_CASE=plans) */
	tcase_set_timeout(t, 600);
	tcase_add_test(t, test_ws_pingpong_pays_by_waves);
	tcase_add_test(t, test_ws_pingpong_per_bucket_program);
	tcase_add_test(t, test_ws_gather_pingpong_where);
	suite_add_tcase(s, t);
	return s;
}
