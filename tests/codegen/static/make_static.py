"""
make_static.py SRC DST [KEEP]: a static-shape copy of an exported fixture
(every symbolic input/output dim replaced by the size of test_data_set_0's
input), the test data copied along.  What torch.onnx.export writes without
dynamic_axes, for the static-shape tests (tests/CMakeLists.txt, static_*).
KEEP names a symbolic dim left as it is: `seq` gives the export with one
symbolic token dim (dynamic_axes on the sequence alone; onesym_*).
Needs the onnx package:  python make_static.py ../../fixtures/onnx/llama_mlp llama_mlp
"""
import onnx, sys, shutil, os
src, dst = sys.argv[1], sys.argv[2]
keep = sys.argv[3] if len(sys.argv) > 3 else None
m = onnx.load(os.path.join(src, "model.onnx"))
t = onnx.load_tensor(os.path.join(src, "test_data_set_0", "input_0.pb"))
shape = list(t.dims)
for io in list(m.graph.input) + list(m.graph.output):
    dims = io.type.tensor_type.shape.dim
    for i, d in enumerate(dims):
        if d.dim_param and d.dim_param != keep:
            d.Clear(); d.dim_value = shape[i]
del m.graph.value_info[:]
os.makedirs(dst, exist_ok=True)
onnx.save(m, os.path.join(dst, "model.onnx"))
shutil.copytree(os.path.join(src, "test_data_set_0"), os.path.join(dst, "test_data_set_0"), dirs_exist_ok=True)
