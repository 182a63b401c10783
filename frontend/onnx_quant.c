/* onnx_quant.c — placeholder */
#include "onnx_int.h"
int imp_quantize(ONode *n) { return ox_err(n, "todo"); }
int imp_dequantize(ONode *n) { return ox_err(n, "todo"); }
int imp_ms_simplified_ln(ONode *n) { return ox_err(n, "todo"); }
int imp_ms_skip_simplified_ln(ONode *n) { return ox_err(n, "todo"); }
int imp_ms_matmul_nbits(ONode *n) { return ox_err(n, "todo"); }
int imp_ms_moe(ONode *n) { return ox_err(n, "todo"); }
int imp_ms_qmoe(ONode *n) { return ox_err(n, "todo"); }
