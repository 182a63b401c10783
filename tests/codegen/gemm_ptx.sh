#!/bin/sh
# FileCheck the PTX of two GEMM kernels: the entry, launch bounds, dynamic
# shared memory, the expert-table scan, and the tensor-core instructions.
#	gemm_ptx.sh GEMM_EMIT FILECHECK
set -e
emit=$1
fc=$2
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
"$emit" --ptx-only -t sm_80 -o "$t" --only c_f16_kn_residual 2>/dev/null
"$fc" --check-prefix=KN "$0" < "$t/c_f16_kn_residual.ptx"
"$emit" --ptx-only -t sm_90a -o "$t" --only up_16x128x128_s4_p 2>/dev/null
"$fc" --check-prefix=UP "$0" < "$t/up_16x128x128_s4_p.ptx"
exit 0

# f16, B as [K,N] (ldmatrix .trans), residual epilogue, sm_80 (PTX 7.0)
# KN: .version 7.0
# KN: .target sm_80
# KN: .extern .shared .align 128 .b8 moec_smem[];
# KN: .visible .entry c_f16_kn_residual(
# KN-COUNT-4: .param .u64
# KN-NEXT: .param .u32
# KN: .maxntid 128
# KN-DAG: cp.async.cg.shared.global [{{%rd[0-9]+}}], [{{%rd[0-9]+}}], 16;
# KN-DAG: cp.async.wait_group 1;
# KN-DAG: ldmatrix.sync.aligned.m8n8.x4.shared.b16
# KN-DAG: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
# KN-DAG: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
# KN-DAG: bar.sync 0;
# KN: cvt.rn.f16.f32

# MoE gate|up: gathered rows, grouped over device offsets, persistent, SwiGLU
# UP: .target sm_90a
# UP: .visible .entry up_16x128x128_s4_p(
# UP: .maxntid 128
# UP: shfl.sync.up.b32
# UP: mov.u32 {{%r[0-9]+}}, %nctaid.x;
# UP-DAG: cp.async.cg.shared.global
# UP-DAG: cp.async.wait_group 2;
# UP-DAG: ldmatrix.sync.aligned.m8n8.x4.shared.b16
# UP-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
# UP: ex2.approx.ftz.f32
# UP: cvt.rn.bf16.f32
# UP: st.global.b16
