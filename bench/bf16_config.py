#!/usr/bin/env python3
# bf16_config.py SRC OUT — a quantised checkpoint's config.json as its bf16
# block: quantization_config dropped, the dtype the checkpoint has once
# dequantised.  Used by bench/make_bench.sh, tests/plan_cases.sh and
# tests/gpu/make_fullsize.sh.
import json, sys
c = json.load(open(sys.argv[1]))
c.pop("quantization_config", None)
c["torch_dtype"] = c["dtype"] = "bfloat16"
json.dump(c, open(sys.argv[2], "w"), indent=1)
