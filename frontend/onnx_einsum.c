/* onnx_einsum.c — placeholder */
#include "onnx_int.h"
int imp_einsum(ONode *n) { return ox_err(n, "todo"); }
