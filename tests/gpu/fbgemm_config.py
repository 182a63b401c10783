#!/usr/bin/env python3
# fbgemm_config.py SRC OUT — a bf16 Llama-4 config.json as its FP8 release
# (meta-llama/Llama-4-*-Instruct-FP8): quant_method fbgemm_fp8, per-channel
# e4m3 weights and per-token activations clamped to activation_scale_ub
# (1200, FbgemmFp8Config's default and the release's), attention and router
# left in bf16 (the module list of tests/fixtures/quant/llama4_fbgemm_fp8).
# models/ holds the bf16 release's file alone; tests/gpu/make_fullsize.sh
# spells this NAME@fbgemm.
import json, sys
c = json.load(open(sys.argv[1]))
c["quantization_config"] = {
    "activation_scale_ub": 1200.0,
    "modules_to_not_convert": [
        "language_model.model.layers.*.self_attn",
        "language_model.model.layers.*.feed_forward.router",
        "vision_model", "multi_modal_projector", "lm_head"],
    "quant_method": "fbgemm_fp8"}
json.dump(c, open(sys.argv[2], "w"), indent=1)
