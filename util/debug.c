/*
 * debug.c — the debug flags, one table: what `moec --debug=LIST` names, the
 * bit the libraries test in their options (PassOpts.debug,
 * CgCompileOpts.debug, CgTarget.debug), and the environment variable that
 * was the switch before (a deprecated alias: only the driver reads it).
 *
 *	moec compile m.onnx --debug=manifest,cg-dump    => DBG_MANIFEST | DBG_CG_DUMP
 */
#include <stdio.h>
#include <string.h>

#include "util.h"

const DebugFlag debug_flags[] = {
	{"fold", DBG_FOLD, "MOEC_DEBUG_FOLD", "fold: why each node left unfolded did not evaluate"},
	{"manifest", DBG_MANIFEST, "MOEC_DEBUG_MANIFEST", "compile: the manifest, before it is checked"},
	{"cg-dump", DBG_CG_DUMP, "MOEC_CG_DUMP", "compile: a kernel LLVM's verifier refuses, printed"},
	{"emu-wgmma", DBG_EMU_WGMMA, "MOEC_EMU_WGMMA",
	 "test --emulate: GEMMs on the sm_90a wgmma mainloop, emulated"},
	{"emu-ws", DBG_EMU_WS, "MOEC_EMU_WS",
	 "test --emulate: GEMMs whose tiles suit it on the warp-specialised TMA mainloop, emulated"},
	{"ws-gather", DBG_WS_GATHER, NULL,
	 "compile: gathered-A GEMMs (the MoE up-projection) on the warp-specialised mainloop (off: slower on the H200)"},
	{"ws-pingpong", DBG_WS_PINGPONG, NULL,
	 "compile: every warp-specialised bf16/f16 GEMM that fits takes ping-pong consumers "
	 "(default: short-K MoE down projections, and dense GEMMs in the T buckets whose last wave it fills better)"},
	{"bq-v1", DBG_BQ_V1, NULL,
	 "compile: MXFP4 weights in session 24's e2m1 layout with two multiplies a register (x 2^126, x the scale) "
	 "instead of one, for A/B on the GPU (docs/codegen.md, Mixed-input GEMMs); integer formats unchanged"},
	{"no-front", DBG_NO_FRONT, NULL,
	 "compile: keep a decode block's norm, router GEMM, route and permute kernels (no decode front: A/B checks)"},
	{"roundtrip", DBG_ROUNDTRIP, "MOEC_CHECK_ROUNDTRIP",
	 "opt: print, parse and print the result again, the same or fail"},
	{"full-blocks", DBG_FULL_BLOCKS, NULL,
	 "compile: wgmma over every 64-row block of a tile, also blocks past its last row, and every row of a 192-row tile "
	 "loaded (the mainloops before their skips)"},
	{"persistent-prefill", DBG_PERSISTENT_PREFILL, NULL,
	 "compile: prefill grouped GEMMs on sm_90a persistent over SMs x CTAs per SM (off: 7-8% slower on the H200)"},
	{"simt-router", DBG_SIMT_ROUTER, NULL,
	 "compile: f32 GEMMs with a bf16-exact A (DeepSeek-style routers) keep their f32 weight on CUDA cores, "
	 "not the exact bf16 x3 split on tensor cores (split-f32; A/B timing)"},
	{"row-kernels", DBG_ROW_KERNELS, NULL,
	 "compile: rms_norm and rstd keep the body compiler's row kernels (a CTA a row) instead of k_norm.c's warp a row (A/B)"},
	{"bq-direct", DBG_BQ_DIRECT, NULL,
	 "compile: quantised decode GEMMs load the packed weights straight into registers (direct B, lane vectors "
	 "of 2 atoms; off: no faster on the H200, docs/codegen.md, Direct quantised B)"},
	{"bq-tiles", DBG_BQ_TILES, NULL,
	 "compile: grouped quantised decode GEMMs keep the tiles of session 26 instead of wide stream-K runs "
	 "(A/B on the GPU; docs/codegen.md, Stream-K for quantised B)"},
	{"mid-persistent", DBG_MID_PERSISTENT, NULL,
	 "compile: prefill grouped GEMMs whose experts average under a row tile run persistent, heavy experts first "
	 "(not a grid of a potential tile an expert), and grouped GEMMs in clusters sharing B keep cooperative "
	 "consumers, not ping-pong (the persistent plan: the default on sm_90a since session 30; the flag: both, on the "
	 "emulator too)"},
	{"no-vec-gemm", DBG_NO_VEC_GEMM, NULL,
	 "compile: GEMMs of launches for at most 4 tokens keep 16-row tensor-core tiles instead of warp dot products "
	 "on CUDA cores (k_gemm_vec.c, the default since the H200's A/B: Qwen3-30B-A3B T = 1 56.8 -> 38.6 us), and "
	 "such a bundle's decode front its unsplit rows (session 26's plan, for A/B)"},
	{"f8-col-scales", DBG_F8_COL_SCALES, NULL,
	 "compile: FP8 x FP8 GEMMs read a B scale a column also where the weights' scales hold one a 128-row block "
	 "(the kernels before one a block, for A/B on the GPU)"},
	{"old-rows", DBG_OLD_ROWS, NULL,
	 "compile: permute kernels sort in one CTA of 1024 threads instead of on the whole GPU (a count and a place "
	 "launch of a CTA a chunk of slots, the default since the H200's A/B), and MoE combines take the body "
	 "kernel (a thread an element) instead of 16-byte loads (the same bits; session 26's kernels, for A/B)"},
	{"grouped-lean", DBG_GROUPED_LEAN, NULL,
	 "compile: bf16/f16 grouped GEMMs of 64 rows a tile or more on sm_90a load no rows of A past a tile's expert "
	 "at any tile height (default: gathered A), persistent ones take serpentine rounds, tiled WS ones rank no experts "
	 "(off: DeepSeek-V3's down slower on the H200)"},
	{"f8-c2", DBG_F8_C2, NULL,
	 "compile: grouped FP8 x FP8 GEMMs of 64 rows a tile or more (the routed gate|up through lower-moe's "
	 "interleave, with gathered A, and the down projection) run on the warp-specialised mainloop in clusters of "
	 "2 CTAs sharing B as the bf16 ones do (grouped-c2): an expert's row tiles in pairs, each CTA loading half "
	 "of B's tile multicast to both (the default on cluster targets since session 30; the flag: on the emulator too)"},
	{"f8-cp", DBG_F8_CP, NULL,
	 "compile: FP8 x FP8 GEMMs with gathered A or a gate|up interleaved B (the routed and the shared expert's "
	 "gate|up, SwiGLU + quantisation per 128) keep the cp.async wgmma mainloop (before session 28; the default: "
	 "the warp-specialised mainloop, B by TMA, consumers that meet only at the ring: DeepSeek-V3's FP8 layer at "
	 "T = 4096 7111 -> 6803 us on the H200; for A/B on the GPU)"},
	{"wg-wide", DBG_WG_WIDE, NULL,
	 "compile: dense bf16/f16 GEMMs on the warp-specialised mainloop take 64x256 warpgroup tiles (one wgmma "
	 "m64n256k16 a k-step: 128x256 cooperative as two 64x256, ping-pong 64x256 a warpgroup; for A/B on the GPU)"},
	{"grouped-c2", DBG_GROUPED_C2, NULL,
	 "compile: bf16/f16 grouped GEMMs of 64 rows a tile or more with B [N,K] run on the warp-specialised "
	 "mainloop in clusters of 2 CTAs, an expert's row tiles in pairs reading each B tile once (TMA multicast; "
	 "the default on sm_90a since the H200's A/B; the flag takes them on the emulator too, which runs clusters)"},
	{"stream-waves", DBG_STREAM_WAVES, NULL,
	 "compile: decode stream-K GEMMs of bundles for more than 4 tokens run W runs per CTA slot (W x SMs CTAs, "
	 "the block scheduler balancing the SMs' unequal rates; docs/codegen.md, Stream-K in waves; A/B on the GPU)"},
	{"vec-ahead", DBG_VEC_AHEAD, NULL,
	 "compile: decode fronts at every T take the top-k without a barrier a round, sort few slots without "
	 "counters and hand over with acq_rel fences (the same bits; the default at T <= 4, where the warp-dot "
	 "GEMMs also always load a group ahead; docs/codegen.md, Decode fronts)"},
	{"pdl", DBG_PDL, NULL,
	 "compile: kernels for sm_90 and newer open with griddepcontrol.wait and launch_dependents, and their kernel "
	 "lines say pdl=1: the runtime launches them with programmatic stream serialization, so each one's launch "
	 "and ramp overlap its predecessor's tail (docs/codegen.md, Programmatic dependent launch); the default for "
	 "bundles of max_tokens <= 64 since session 31, the flag: at every max_tokens"},
	{"slots-x", DBG_SLOTS_X, NULL,
	 "lower-moe: each MoE slot (a down projection row times its routing weight) rounded to x's type (bf16, f16) "
	 "before the f32 sum over the k choices, instead of kept in f32: half the down GEMM's stores and the "
	 "combine's loads, a change of numerics (HF's blocks round each slot too; docs/passes.md, lower-moe; A/B)"},
	{"sk-unroll", DBG_SK_UNROLL, NULL,
	 "compile: static stream-K GEMMs (decode; quantised decode's wide runs) unroll their pair loop over the "
	 "stages: constant stage offsets, the load stream's k-tile and tile and the mma's tile end carried instead "
	 "of divided out of the pair index each k-tile, one tile-end block (the default on GPU targets since "
	 "session 30; the flag: on the emulator too; docs/codegen.md, Stream-K unrolled over the stages)"},
	{"div-rn", DBG_DIV_RN, NULL,
	 "compile: tanh and erf (so GELU) divide by div.rn.f32 (a slow-path branch an element) instead of the "
	 "default, its fast path alone (rcp.approx and four fma, the divisor clamped where that changes no "
	 "result): the same bits, session 27's kernels, for A/B on the GPU (docs/codegen.md, Division without a branch)"},
	{"gelu-tanh", DBG_GELU_TANH, NULL,
	 "compile: GELU (tanh) as 0.5 x (1 + tanh u), session 29's kernels, instead of the default x sigmoid(2u) = "
	 "x / (1 + 2^a) with the quotient by rcp.approx (~8 instructions an element against ~30; the same "
	 "function within a few ulp of f32; docs/codegen.md, GELU as a sigmoid; A/B on the GPU)"},
	{"ws-tma-store", DBG_WS_TMA_STORE, NULL,
	 "compile: dense warp-specialised GEMMs (bf16/f16 C, no swiglu or quantised output) write each consumer "
	 "warpgroup's 64-row blocks into a 128-byte-swizzled shared buffer and store them by TMA "
	 "(cp.async.bulk.tensor ... bulk_group, a C_map parameter), waiting for the buffer's reads only before "
	 "its next use, instead of bf16x2 stores from registers; a cooperative tiled plan goes persistent (where the "
	 "stores drain under the next tile's k-tiles: H200 dense_up M=4096 0.92x, M=1024 0.97x; docs/codegen.md, "
	 "TMA stores); the default on sm_90a where the schedule is persistent since session 31, the flag: every "
	 "plain tile, the emulator too"},
	{"fp8-per-token", DBG_FP8_PER_TOKEN, NULL,
	 "compile: no fp8-regroup: FP8 weights per channel or tensor (fbgemm_fp8, compressed-tensors) keep the "
	 "model's per-token activation scales and run on bf16 tensor cores (the e4m3 weights dequantised in "
	 "registers or at load: session 30's path), instead of FP8 x FP8 with activations per token and 128 "
	 "columns (docs/passes.md, fp8-regroup; A/B on the GPU)"},
	{"down-ahead", DBG_DOWN_AHEAD, NULL,
	 "compile: with PDL (decode bundles), each CTA of a stream-K MoE down projection of one CTA an SM (grouped, A not "
	 "gathered: its offsets were written two launches back) sends the first k-tiles of its run's weights, "
	 "about 192 KB an SM, toward L2 (cp.async.bulk.prefetch.L2) before its grid wait, while the gate|up's "
	 "last SMs still stream; and so does the gate|up after a decode front where every expert is expected to "
	 "be touched at max_tokens (Mixtral at T = 16: its CTAs wait for the front meanwhile; session 35) "
	 "(docs/codegen.md, B ahead of the grid wait; A/B on the GPU)"},
	{"front-pair", DBG_FRONT_PAIR, NULL,
	 "compile: decode fronts whose warps each get two or more tokens (Qwen3-30B-A3B, DeepSeek-V3 at T > 8) "
	 "compute them two at a time (one pass over the row: twice the loads in flight, W and gamma read once for "
	 "both) and broadcast a warp's sum of squares by shuffles instead of shared memory and two CTA barriers a "
	 "token (the same bits; docs/codegen.md, Decode fronts; A/B on the GPU)"},
	{"f8-l2pf", DBG_F8_L2PF, NULL,
	 "compile: FP8 x FP8 GEMMs on the warp-specialised mainloop prefetch B's boxes of k-tile kt + S (S stages) "
	 "into L2 with kt's (cp.async.bulk.prefetch.tensor), so that the weights' DRAM latency is hidden over twice "
	 "the k-tiles shared memory holds (the same bits; nothing on the emulator; session 32's H200 A/B: DeepSeek-V3's "
	 "FP8 layer 1.06x slower at T = 4096, so opt-in)"},
	{"fp8-glu", DBG_FP8_GLU, NULL,
	 "compile: a dense gate|up whose two weights are e4m3 with scales per output row runs FP8 x FP8 (the e4m3 "
	 "weights and scales merged, dequantised after) even when its input is quantised per token (Llama-4 "
	 "fbgemm_fp8's shared expert: fp8-regroup then quantises it per token and 128 columns); by default "
	 "(FP8_GLU_DEFAULT) only where the model quantises the input per 128 columns itself (DeepSeek-V3 fp8), "
	 "the others bf16 on weights dequantised at load (docs/passes.md, canon and fp8-regroup; A/B on the GPU)"},
	{"kept-flags", DBG_KEPT_FLAGS, NULL,
	 "compile (the default of decode bundles since session 33; the flag: every bundle): a decode bundle whose one front is the only writer of its flags (the split GEMMs' flags in its "
	 "chain) marks the front's flag memset when=shared: the front's last CTA leaves every flag 0, so a run on the "
	 "program's own arena (zeroed at load) skips it and the plan is a chain of programmatic launches from the "
	 "front on; a workspace the caller gives still gets it (docs/runtime.md; H200 A/B, session 33: 0.97-1.00x, "
	 "the same bits; KEPT_DECODE_DEFAULT in program.c makes it the default of decode bundles)"},
	{"grouped-wide", DBG_GROUPED_WIDE, NULL,
	 "compile (the default on sm_90a since session 33; the flag adds the emulator): cooperative bf16/f16 grouped GEMMs on the warp-specialised mainloop (the MoE expert GEMMs at "
	 "prefill) whose tiles are narrower than 256 columns stack their two consumer warpgroups over the rows, "
	 "each a 64-row tile of the tile's whole width (gpt-oss-20b's 128x192: one wgmma m64n192k16 a k-step for "
	 "two m64n96k16, so a k-step reads B from shared memory once a warpgroup, not twice; its gate|up 1144 -> "
	 "1040 us on the H200); the same bits (docs/codegen.md, Grouped wide tiles; A/B on the GPU)"},
	{"f8-cvt", DBG_F8_CVT, NULL,
	 "compile: the default since session 33 (F8_CVT_DEFAULT in codegen/epilogue.c; the flag is kept so that "
	 "scripts naming it still run): on sm_89 and later, quantisations to e4m3 (GEMM epilogues, the norm's "
	 "kernel) convert two f32 values an instruction (cvt.rn.satfinite.e4m3x2.f32) and the norm's kernel reads "
	 "e4m3 back by cvt (e4m3x2 to f16x2), instead of the integer code that the emulator runs (the same bits: "
	 "nearest even, saturated, NaN kept; docs/codegen.md, the norm's kernel; session 33's H200 A/B: the same "
	 "bits, DeepSeek-V3 FP8's norm 163 -> 80 us, the layer 0.966x at T = 4096, 0.952x at T = 16)"},
	{"bq-gacc", DBG_BQ_GACC, NULL,
	 "compile (the default for grouped GEMMs since session 33; the flag: every GEMM it applies to): 4-bit integer quantised weights (GPTQ, AWQ, W4A16) enter the mma as the exact q - z, each "
	 "scale group's products summed apart in f32 and scaled once per group and column, instead of "
	 "(q - z) * s rounded to bf16 a weight (one multiply a register less; more accurate than the "
	 "interpreter's rounded weights, not the same bits; docs/codegen.md, Group sums; A/B on the GPU)"},
	{"sk-tail", DBG_SK_TAIL, NULL,
	 "compile: static stream-K GEMMs over bf16/f16 weights (the decode GEMMs) launch twice their CTAs: the "
	 "first-dispatched take runs SK_TAIL_W times as long as the rest, whose short runs the block scheduler "
	 "hands to the SMs that finish their long run first, so the SMs' spread (the slowest 14-17% above the "
	 "average) is filled instead of waited for (deterministic; the tiles cut at other k-tiles than the equal "
	 "runs', so f32 sums in another grouping: not the same bits; docs/codegen.md, Stream-K with a tail; session 34's "
	 "H200 A/B: Qwen3-30B-A3B T = 16 1.004x, skewed 1.31x, dense M = 16 1.39x, gpt-oss-20b 0.975x: opt-in)"},
	{"f8-pingpong", DBG_F8_PINGPONG, NULL,
	 "compile: FP8 x FP8 grouped GEMMs with A not gathered and at most 32 k-tiles (DeepSeek-V3's down "
	 "projection) on ping-pong consumers: the 64x256 tile's two warpgroups each on whole 64x128 tiles of their "
	 "own, taking turns at the tensor cores, so that one's last promotion and epilogue (x routing weight, rows "
	 "scattered) run under the other's wgmmas (the same bits; docs/codegen.md, FP8 x FP8; session 34's H200 "
	 "A/B: DeepSeek-V3's FP8 layer 1.020x slower at T = 4096, 0.995x at 256, so opt-in)"},
	{"gather-pingpong", DBG_GATHER_PINGPONG, NULL,
	 "compile: grouped bf16/f16 GEMMs that gather A (the MoE gate|up at prefill) on cooperative 128x256 tiles of "
	 "at most 64 k-tiles take ping-pong consumers (128x128 a warpgroup, persistent; with a tuning table's .wide "
	 "64x256), as the MoE downs of at most 32 k-tiles do: one warpgroup's epilogue (SwiGLU, the stores) runs "
	 "under the other's k-tiles (Mixtral-8x7B's gate|up, 64 k-tiles, ran 598 TFLOP/s where its down, 224, ran "
	 "650; Qwen3-30B-A3B's, 32); the same bits, but measured slower on the H200 (session 34: Mixtral's block "
	 "1.061x, with .wide 1.038x, Qwen3's 1.020x; the ping-pong tiles load A or B twice a flop), so opt-in "
	 "(docs/codegen.md, heuristic step 6a; GATHER_PINGPONG_DEFAULT in codegen/program.c)"},
	{"norm-bcast", DBG_NORM_BCAST, NULL,
	 "compile: the RMSNorm row kernel (k_norm.c, a warp a row) hands a row's sum of squares to its warp by "
	 "five shuffles instead of a shared slot and a CTA barrier (its warps no longer wait for each other) and "
	 "keeps rows of up to 64 registers a lane (H <= 4096 in bf16) between its two passes instead of reading "
	 "them again; the same bits (docs/codegen.md, Row kernels; A/B on the GPU: NORM_BCAST_DEFAULT in program.c)"},
	{"tma-gather", DBG_TMA_GATHER, NULL,
	 "compile: the warp-specialised sm_90a GEMMs that gather A (the MoE gate|up at prefill in clusters sharing "
	 "B, and --debug=ws-gather's) load A's rows by TMA, a box of one row a row (a map over x; the 128-byte "
	 "swizzle lands each row where a whole box would): one producer warp, its lanes bm/32 rows each, instead "
	 "of the producer warpgroup's cp.async and the consumers' proxy fences; the same bits, but 3-6x slower on "
	 "the H200 (session 35: the TMA unit is bound by boxes issued, not bytes), so opt-in (docs/codegen.md, "
	 "Gathered A rows; TMA_GATHER_DEFAULT in codegen/k_gemm_ws.c)"},
	{"slots-ref", DBG_SLOTS_REF, NULL,
	 "lower-moe (the default since session 35: SLOTS_REF_DEFAULT; the flag names it): a moe that the config "
	 "importer marked slots=x (the families whose Hugging Face block rounds "
	 "each weighted expert output to the model dtype before index_add_: Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, "
	 "gpt-oss; not DeepSeek-V3/GLM-4.5, whose f32 routing weights keep f32 products) has its slots rounded "
	 "to x's type (bf16, f16) in the down GEMM's epilogue and summed in f32 by the combine, as --debug=slots-x "
	 "does for every moe: half the down GEMM's stores and the combine's loads (docs/passes.md, lower-moe; "
	 "H200: Qwen3-30B-A3B T = 4096 0.951x, the combine 76.5 -> 43.5 us)"},
	{"front2", DBG_FRONT2, NULL,
	 "compile (the default since session 35 for fronts of one expert a CTA; the flag: every front, "
	 "DeepSeek-V3's two experts a CTA too): decode fronts (T <= 64, k_front.c) take front-pair (two tokens a warp, sums by shuffles, W "
	 "ahead), vec-ahead's last CTA (butterfly top-k, slot sort, acq_rel hand-over) at every T, and load the "
	 "whole rows of a warp's tokens (up to 16 groups of 8 a lane) before using them where a CTA has one expert "
	 "(Mixtral's 4096 and gpt-oss's 2880 a token, Qwen3's two 2048: one round trip for x, one for W and "
	 "gamma, not two each); the same "
	 "bits (docs/codegen.md, Decode fronts; H200 A/B: Mixtral 0.993x, Qwen3-30B-A3B 0.983x, gpt-oss-20b "
	 "0.991x at T = 16, DeepSeek-V3 1.003x; CG_FRONT2_DEFAULT in codegen/codegen.h)"},
	{"f8-acc1", DBG_F8_ACC1, NULL,
	 "compile: the warp-specialised FP8 x FP8 consumers (whole k-tiles) keep one accumulator set, each k-tile's "
	 "group waited for (wait_group 0) and promoted before the next is issued (before session 35; the default: two "
	 "sets, k-tile k promoted under k + 1's wgmmas: DeepSeek-V3's FP8 layer at T = 4096 6446 -> 6079 us, "
	 "MiniMax-M2's 2073 -> 1976 on the H200, the same bits; F8_ACC2_DEFAULT in k_gemm_ws.c; for A/B on the GPU)"},
	{"front3", DBG_FRONT3, NULL,
	 "compile (the default since session 37 for fronts of one expert a CTA; the flag: every front, "
	 "DeepSeek-V3's two experts a CTA too): decode fronts (T <= 64, k_front.c) hand over by a ticket: every CTA "
	 "adds 1 to one counter when its logits are out and the last to finish routes and sorts (no flag waits, no "
	 "launch order); the flags of the split GEMMs after the front are zeroed by every CTA at its start, not by "
	 "the last; the route hands the ids to the slot sort in shared memory, which reads 8 buckets a trip; the "
	 "same bits (docs/codegen.md, Decode fronts; H200 A/B: Qwen3-30B-A3B T = 1 0.986x, T = 16 0.997x, gpt-oss-20b "
	 "0.996x, Mixtral 0.999x, DeepSeek-V3 FP8 1.001x; CG_FRONT3_DEFAULT in codegen/codegen.h)"},
	{"qdec", DBG_QDEC, NULL,
	 "compile (the default on GPU targets since session 37; the flag: on the emulator too): the decode GEMMs on 16-row mma.sync tiles (quantised or bf16/f16 B) copy only the rows of A that "
	 "belong to the tile's expert (the chunks past its rows zero-filled without a global read: an expert holds "
	 "1-4 of the 16 rows at T = 16), and a decode bundle's (max_tokens <= 16) grouped quantised weights are laid "
	 "out in lane vectors of 2 atoms (one 8-byte shared load a lane where two 4-byte ones were); the same bits "
	 "(docs/codegen.md, Quantised decode, session 37; H200, T = 16: gpt-oss-20b MXFP4 0.968x, Mixtral GPTQ "
	 "0.964x, bf16 gpt-oss-20b 0.957x, bf16 Mixtral 0.940x; QDEC_DEFAULT in program.c)"},
	{"grouped", DBG_GROUPED, NULL,
	 "compile (the default on sm_90a since session 37: GROUPED_COLS_DEFAULT; the flag names it and takes it on the "
	 "emulator): a grouped bf16/f16 prefill GEMM (T > 64) whose heuristic tile is 128 rows x fewer than 256 columns "
	 "and whose column tiles are odd in count or could be wider (gpt-oss-20b's down: N = 2880 = 15 x 192, so no "
	 "clusters of 2 sharing B and the tiles schedule) takes the widest tile of at most 256 columns that divides N "
	 "into an even count, on 64-row warpgroup tiles (128x240: 12 column tiles for the down, 24 for the gate|up), "
	 "in clusters of 2 sharing B, persistent; the same bits (H200: gpt-oss-20b T = 4096 0.951x, skewed 0.943x, "
	 "the down 581 -> 526 us; docs/codegen.md, heuristic step 1b; bench/gptoss_tiles192.tuning gives back the "
	 "plan before)"},
	{"prefill-small", DBG_PREFILL_SMALL, NULL,
	 "compile: two of the small kernels around the expert GEMMs at prefill, each the same bits: (1) the RMSNorm "
	 "row kernel (k_norm.c) takes 4 rows a warp (rows g, g + G, ... of G warps; a quarter of the CTAs): gamma "
	 "is copied to shared memory once a CTA instead of read from L1/L2 a row; where two rows fit in 128 "
	 "registers a lane (H <= 4096 in bf16) a row stays in registers between the two passes and the next row's "
	 "loads are issued before this row's sums (longer rows stay a row a warp, read twice, as before); sums by "
	 "shuffles. Measured slower on the H200 (session 37, the kernel alone: Qwen3-30B-A3B 16.9 -> 18.1 us, "
	 "gpt-oss-20b 22.0 -> 23.9, DeepSeek-V3 bf16 58.7 -> 77.4, decode T = 16 8.8 -> 12.2), so opt-in "
	 "(NORM_ROWS_DEFAULT in program.c); (2) the route kernel (k_route.c) with no CTA barrier: top-k by "
	 "butterfly maxima of 64-bit keys as the decode fronts, the softmax maximum and sum by shuffles, warp syncs "
	 "where its lanes exchange groups and choices through shared memory: the default since session 37 "
	 "(ROUTE_WARP_DEFAULT in program.c; the kernel alone 14.1 -> 10.5 us for Qwen3-30B-A3B at T = 4096, "
	 "29.9 -> 26.3 DeepSeek-V3, 7.0 -> 5.9 gpt-oss-20b), so the flag no longer changes it; docs/codegen.md, Row "
	 "kernels and Router"},
	{"dense-c2", DBG_DENSE_C2, NULL,
	 "compile (the default since session 37, CG_DENSE_C2_DEFAULT in codegen/codegen.h; the flag changes "
	 "nothing since but on the emulator, whose plans take the clusters with it): dense warp-specialised GEMMs in clusters of 2 (a tuning table's .c2a/.c2b) store C by TMA as "
	 "the default plan does without clusters (before: from registers); the dense cooperative 256x128 plan of "
	 "buckets over 1024 rows runs as 128x256 in clusters of 2 sharing B; every TMA-store epilogue computes a "
	 "block's results before it waits for the block's buffer; the same bits (H200: dense_up M = 4096 675.0 -> "
	 "656.5 us); issue 12"},
	{"fp8", DBG_FP8, NULL,
	 "compile: a moe of bf16/f16 x whose slots would be f32 (DeepSeek-V3, GLM) stores each expert's down "
	 "output rounded to x's type, unweighted, and the sum over the k choices multiplies each by its routing "
	 "weight in f32, as transformers' DeepSeek-V3 block rounds (the expert's bf16 output times the f32 weight, "
	 "index_add_ into f32): half the bytes in the down GEMM's stores and the sum's loads; other bits "
	 "(the default for moes the importer marks slots=out since session 38's H200 A/B: DeepSeek-V3 FP8 "
	 "T = 4096 0.979x, T = 256 0.987x; SLOTS_OUT_DEFAULT in passes/lower_moe.c; issue 13)"},
	{"quad-store", DBG_QUAD_STORE, NULL,
	 "compile: the epilogues of grouped warp-specialised bf16/f16 GEMMs that store C from registers (the MoE "
	 "gate|up after swiglu, the down into the slots; rows ahead, no matrix leaves, not quantised, not TMA "
	 "stores) swap each row's results across its quad of lanes by shuffles, so that a lane stores 16 "
	 "consecutive bytes at once (8 outputs) where it stored 2 (after swiglu) or 4 bytes a fragment: a warp's "
	 "store then writes whole 32-byte sectors, not 8 partial ones (ncu, Qwen3-30B-A3B T = 4096: k3's excess "
	 "sectors 3x its output's, k4's 1x); the same values in the same places (H200: Qwen3-30B-A3B T = 4096 "
	 "0.950-0.960x (two calls), Mixtral 0.991-0.994x, gpt-oss-20b 0.934-0.992x; the default since, "
	 "CG_QUAD_STORE_DEFAULT in codegen/codegen.h; issue 12, session 38, bench/ab/quadst.ab)"},
	{"f8-l2", DBG_F8_L2, NULL,
	 "compile: FP8 x FP8 grouped GEMMs that gather A (DeepSeek-V3's routed gate|up at every T) load fewer "
	 "bytes from L2: the rows past a tile's expert (~20% of the 64-row tiles' rows at T = 4096, ~87% at "
	 "T = 256) are zero-filled by cp.async without a read (live rows, as the bf16/f16 gate|ups have them "
	 "since session 27); the same bits (F8_L2_DEFAULT in codegen/program.c; H200, session 38: DeepSeek-V3's "
	 "FP8 layer 0.989x at T = 4096, 0.984x at 256; the default since; issue 13)"},
	{"live-sums", DBG_LIVE_SUMS, NULL,
	 "compile: a stream-K or split-K GEMM on the mma.sync mainloop (the decode tiles) hands over only the "
	 "partial sums of the rows its tile holds (row < the expert's or M's end; the lanes of other rows store "
	 "nothing), not all bm rows, and releases them by thread 0's fence.acq_rel.gpu after the barrier (the "
	 "front's hand-over), not every thread's fence.sc.gpu; the same bits. H200, session 38, T = 16: gpt-oss-20b "
	 "MXFP4 0.996x, Mixtral GPTQ 0.993x, bf16 gpt-oss-20b 0.989x, bf16 Mixtral 0.998x "
	 "(docs/codegen.md, Quantised decode, session 38; the default on GPU targets since: LIVE_SUMS_DEFAULT in program.c; issue 13)"},
	{"combine-fold", DBG_COMBINE_FOLD, NULL,
	 "compile: a decode MoE down projection on CUDA cores (gemm-vec, max_tokens <= 4) whose combine (the sum over a "
	 "token's k slots + the residual) fits two rounds of its CTA's threads runs that combine itself: every CTA adds 1 "
	 "to a ticket in the split-K workspace when its slots are stored, and the last to finish sums them (the combine "
	 "kernel's code: the same bits), so the plan has no combine launch (Qwen3-30B-A3B T = 1: front, gate|up, down); "
	 "docs/codegen.md, \"The combine in the down's last CTA\"; CG_COMBINE_FOLD_DEFAULT in codegen/codegen.h; measured "
	 "slower on the H200 (session 38: Qwen3-30B-A3B T = 1 1.015x, Mixtral 1.005x, gpt-oss-20b 1.018x, the same bits: "
	 "the ticket costs more than the launch's grid dependency), kept for A/B"},
	{"route2", DBG_ROUTE2, NULL,
	 "compile: the decode front's second launch (the route and the slot sort, one CTA) with a short critical "
	 "path: a warp for every token of a round of up to 16 (512 threads: Qwen3-30B-A3B T = 16 in one round, not "
	 "two of 8), the softmax's warp sums and maxima with no CTA barrier, each top-k round's arg-max two "
	 "redux.sync.max.u32 of the 64-bit key's words (not five butterfly steps of both) and each broadcast one, "
	 "the sort's offsets counted by threads of their own beside the places, a compare an element (bucket << 16 | slot a word); the same bits (the default: "
	 "CG_ROUTE2_DEFAULT in codegen/codegen.h; docs/codegen.md, \"The route launch's critical path\"; issue 12; "
	 "H200, session 39 (CUDA graphs, 6 interleaved rounds, the same bits and routing dumps): Qwen3-30B-A3B T = 1 0.988x, T = 16 216.3 -> 213.0 us (0.985x), T = 16 skewed 74.8 -> 71.5 (0.955x); DeepSeek-V3 bf16 T = 16 0.994x; gpt-oss-20b T = 16 0.996x)"},
	{"route-count", DBG_ROUTE_COUNT, NULL,
	 "compile: a prefill route kernel whose ids go to the grid permute also counts them, each chosen slot "
	 "adding 1 to its expert's and chunk's count by an atomic add (integer counts: the same table, offsets "
	 "and rows as the count launch's), into a table after the router GEMM's split-K flags that the flags' "
	 "memset zeroes too; the plan has no NAME_count launch (Qwen3-30B-A3B prefill: norm, memset, router "
	 "GEMM, route, place, gate|up, down, combine). Taken only where such a memset comes before the route "
	 "(not Mixtral's plan); docs/codegen.md, \"The route counts the permute's slots\"; CG_ROUTE_COUNT_DEFAULT "
	 "in codegen/codegen.h: the default since session 39's H200 A/B (the same bits and routing buffers: Qwen3-30B-A3B "
	 "T = 4096 0.992x, skewed 0.992x, T = 256 0.990x; DeepSeek-V3 bf16 T = 4096 0.999x)"},
	{"qahead", DBG_QAHEAD, NULL,
	 "compile: down-ahead for quantised B (MXFP4, GPTQ; session 39, issue 13): with PDL (decode bundles), each CTA "
	 "of a stream-K mixed-input MoE down projection (and of the gate|up where down-ahead's rule takes it: every "
	 "expert expected to be touched) sends the packed words, scales and zero points of its run's first k-tiles, "
	 "about 192 KB an SM at any CTAs an SM, toward L2 (cp.async.bulk.prefetch.L2) before its grid wait: a hint "
	 "(every address inside B); and the down keeps the expert table it built then (its offsets are final "
	 "before its wait: QAHEAD_TABLE_DEFAULT); the same bits (CG_QAHEAD_DEFAULT in codegen/codegen.h; docs/codegen.md, \"Quantised "
	 "B ahead of the grid wait\"): the default since session 39's H200 A/B (T = 16, the same bits: gpt-oss-20b "
	 "MXFP4 0.994x, skewed 0.993x; Mixtral GPTQ 0.995x, skewed 1.000x; the prefetch alone 0.997-1.006x)"},
	{"qbulk", DBG_QBULK, NULL,
	 "compile: the stream-K mixed-input decode GEMMs (MXFP4, GPTQ; session 40, issue 13) on sm_90 fill each "
	 "stage's packed words, scales and zero points by bulk tensor copies (one a part, from lane 0 of warps 0-2; "
	 "per-lane cp.async.bulk where a stage's parts are not 128-byte aligned), complete_tx on an mbarrier a stage that the consumers "
	 "wait on (no LDGSTS or addresses of B in their threads), and take the most stages (up to 8) that keep "
	 "the plan's CTAs an SM by shared memory (gpt-oss-20b: 4 -> 6, ~117 KB of B in flight an SM; Mixtral "
	 "GPTQ stays at 3); the same bits (CG_QBULK_DEFAULT in codegen/codegen.h; docs/codegen.md, \"Bulk "
	 "copies of quantised B\"; not measured: no device in session 40)"},
	{"dense-c4", DBG_DENSE_C4, NULL,
	 "compile: the dense prefill GEMMs that run in clusters of 2 sharing B (dense-c2's 128x256 plan: buckets over "
	 "1024 rows on the cooperative plan) run in clusters of 4 as 2x2 instead: a cluster covers 256 rows x 512 "
	 "columns, each CTA a 128x256 tile, persistent over the clusters the device holds at once (moert asks; 31-32 of a 132-SM GH100's 33), loading half of its A box multicast to its row partner (the other "
	 "column tile) and half of its B box multicast to its column partner (the other row tile): 12 KB of L2 reads "
	 "a 128x128x64 step where dense-c2 reads 16; the same bits (on the emulator too: its plans take dense-c2's "
	 "clusters with this flag); not measured yet (session 40 had no device); docs/codegen.md, \"Dense, 2x2 "
	 "sharing A and B\"; issue 12"},
};
const int ndebug_flags = (int)NELEM(debug_flags);

int
debug_parse(const char *list, DbgFlags *flags, char *why, size_t whylen)
{
	const char *p = list;

	while (p && *p) {
		size_t n = strcspn(p, ",");
		int i;
		for (i = 0; i < ndebug_flags; i++)
			if (strlen(debug_flags[i].name) == n && strncmp(p, debug_flags[i].name, n) == 0)
				break;
		if (i == ndebug_flags) {	/* the valid names: debug_names_line() */
			snprintf(why, whylen, "unknown debug flag '%.*s'", (int)n, p);
			return -1;
		}
		*flags |= debug_flags[i].bit;
		p += n + (p[n] == ',');
	}
	return 0;
}

/*
 * The valid names from flag *next on, as many as fit in one line of about
 * `width` characters (at least one); *next moves past them.  0 when none
 * are left.  The driver prints the whole list a line at a time, so no
 * message buffer cuts it short however many flags there are.
 */
int
debug_names_line(int *next, char *buf, size_t n, size_t width)
{
	size_t k = 0;

	if (*next >= ndebug_flags || !n)
		return 0;
	buf[0] = 0;
	while (*next < ndebug_flags) {
		const char *s = debug_flags[*next].name;
		if (k && k + strlen(s) + 2 > width)
			break;
		k += (size_t)snprintf(buf + k, k < n ? n - k : 0, "%s%s", s,
				      *next + 1 < ndebug_flags ? ", " : "");
		(*next)++;
	}
	return 1;
}
