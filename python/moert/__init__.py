"""moert — run moec bundles (.moeb) from Python.

    prog = moert.load("layer0.moeb", device=0)
    prog.inputs            # [Spec(name='x', dtype='bf16', shape=('T', 4096))]
    y = prog.run(x)        # x: a CUDA torch tensor; y: a new one, same device
    prog.run(x, out=[y])   # into tensors the caller owns

A thin ctypes layer over libmoert.so (runtime/moert.h).  Tensors are passed
zero-copy by their device pointers: torch tensors (data_ptr) or any object
with __cuda_array_interface__ (and moert.DeviceArray, which needs no torch).
The run is enqueued on the caller's stream — by default torch's current
stream of the program's device — and nothing in run synchronises or
allocates device memory in the runtime, so it can be captured by
torch.cuda.graph.  Runtime failures raise moert.Error with the runtime's
message (moert_last_error).

Without a GPU (no libcuda.so.1, or no device), load still opens the bundle:
the program reports its inputs, outputs and code, and run raises.
"""
import ctypes
import threading
import warnings
from collections import namedtuple
from collections.abc import Mapping

from ._lib import TensorInfo, lib

__all__ = ["load", "Program", "Spec", "WeightSpec", "Error", "DeviceArray", "empty", "device", "verify"]

STATUS = ["MOERT_OK", "MOERT_ENODRIVER", "MOERT_ENODEV", "MOERT_EARCH", "MOERT_EFORMAT",
          "MOERT_EVERSION", "MOERT_ESHAPE", "MOERT_ETOKENS", "MOERT_ENOMEM", "MOERT_ELOAD",
          "MOERT_ELAUNCH", "MOERT_EINVAL", "MOERT_EIO", "MOERT_ECOMM"]
ENODRIVER, ENODEV = 1, 2

# moert dtype name -> bytes per element (util/dtype.def; i4/u4 are never a
# bundle's input or output)
DTYPE_SIZE = {"f32": 4, "f16": 2, "bf16": 2, "f8e4m3": 1, "f8e5m2": 1, "f64": 8,
              "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1, "bool": 1}
# __cuda_array_interface__ typestr -> moert dtype (bf16 and f8 have none)
_TYPESTR = {"<f4": "f32", "<f2": "f16", "<f8": "f64", "<i8": "i64", "<i4": "i32",
            "<i2": "i16", "|i1": "i8", "|u1": "u8", "|b1": "bool"}


class Error(RuntimeError):
    """A runtime failure: .status is the name (MOERT_ESHAPE, ...), the text
    is moert_last_error() at the failing call."""

    def __init__(self, status, message):
        self.status = STATUS[status] if 0 <= status < len(STATUS) else "MOERT_%d" % status
        self.code = status
        super().__init__("%s: %s" % (self.status, message))


def _check(status):
    if status:
        raise Error(status, lib.moert_last_error().decode(errors="replace"))


Spec = namedtuple("Spec", "name dtype shape")
Spec.__doc__ = "An input or output: moert dtype name, shape with 'T' or 'a*T' symbols."
WeightSpec = namedtuple("WeightSpec", "name dtype shape nbytes run generated bound")
WeightSpec.__doc__ = ("A weight of the bundle: run — the run plan reads it (worth binding); "
                      "generated — made at load; bound — the caller's memory.")
WEIGHT_RUN, WEIGHT_GENERATED, WEIGHT_BOUND = 1, 2, 4
MOERT_WEIGHT_ALIGN = 256    # a bound weight's and a workspace's pointer alignment


# --- devices ------------------------------------------------------------------

class Device:
    """An open GPU (moert_open): kept for the life of the process."""

    def __init__(self, ordinal):
        h = ctypes.c_void_p()
        _check(lib.moert_open(ordinal, ctypes.byref(h)))
        self.ordinal, self.handle = ordinal, h
        self.name = lib.moert_device_name(h).decode()

    def __repr__(self):
        return "<moert.Device %d: %s>" % (self.ordinal, self.name)

    def synchronize(self):
        _check(lib.moert_sync(self.handle))


_devices = {}


def device(ordinal=0):
    """The device `ordinal`, opened once; moert.Error without a driver or device."""
    if ordinal not in _devices:
        _devices[ordinal] = Device(ordinal)
    return _devices[ordinal]


_get_device = device    # load() has an argument of that name


# --- device memory without torch ------------------------------------------------

class DeviceArray:
    """Contiguous device memory from moert_malloc, freed with the object.
    Exposes __cuda_array_interface__ (bf16/f8 as raw '<V2'/'|V1') and .dtype
    as the moert name, so it can be an input or output of Program.run."""

    def __init__(self, shape, dtype, dev=0):
        if dtype not in DTYPE_SIZE:
            raise ValueError("unknown dtype %r (one of %s)" % (dtype, ", ".join(DTYPE_SIZE)))
        self.device = dev if isinstance(dev, Device) else device(dev)
        self.shape, self.dtype = tuple(int(d) for d in shape), dtype
        n = 1
        for d in self.shape:
            n *= d
        self.nbytes = n * DTYPE_SIZE[dtype]
        ptr = ctypes.c_uint64()
        _check(lib.moert_malloc(self.device.handle, self.nbytes, ctypes.byref(ptr)))
        self.ptr = ptr.value

    def __del__(self):
        if getattr(self, "ptr", 0) and lib is not None:    # None at interpreter exit
            lib.moert_free(self.device.handle, self.ptr)
            self.ptr = 0

    @property
    def __cuda_array_interface__(self):
        typestr = next((k for k, v in _TYPESTR.items() if v == self.dtype),
                       "|V%d" % DTYPE_SIZE[self.dtype])
        return {"shape": self.shape, "typestr": typestr, "data": (self.ptr, False),
                "strides": None, "version": 3}

    def copy_from(self, data):
        """Upload bytes (anything with the buffer protocol) of exactly nbytes."""
        mv = memoryview(data).cast("B")
        if mv.nbytes != self.nbytes:
            raise ValueError("%d bytes for a %d-byte array" % (mv.nbytes, self.nbytes))
        buf = (ctypes.c_char * mv.nbytes).from_buffer_copy(mv)
        _check(lib.moert_memcpy_htod(self.device.handle, self.ptr, buf, self.nbytes))
        return self

    def tobytes(self):
        """Download (synchronous on the legacy stream: synchronise first)."""
        buf = ctypes.create_string_buffer(self.nbytes)
        _check(lib.moert_memcpy_dtoh(self.device.handle, buf, self.ptr, self.nbytes))
        return buf.raw

    def __repr__(self):
        return "<moert.DeviceArray %s[%s] at 0x%x>" % (
            self.dtype, ",".join(map(str, self.shape)), self.ptr)


def empty(shape, dtype, device=0):
    """Uninitialised device memory (a DeviceArray): no torch needed."""
    return DeviceArray(shape, dtype, device)


# --- tensors as the runtime sees them ---------------------------------------------

_TORCH_NAMES = None


def _torch_dtype_names():
    """torch dtype -> moert name (made once)."""
    global _TORCH_NAMES
    if _TORCH_NAMES is not None:
        return _TORCH_NAMES
    import torch
    names = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
             torch.float64: "f64", torch.int64: "i64", torch.int32: "i32",
             torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool"}
    for attr, name in (("float8_e4m3fn", "f8e4m3"), ("float8_e5m2", "f8e5m2")):
        if hasattr(torch, attr):
            names[getattr(torch, attr)] = name
    _TORCH_NAMES = names
    return names


def _is_torch(t):
    return type(t).__module__.startswith("torch") and hasattr(t, "data_ptr")


def _view(t, what):
    """(pointer, moert dtype, shape, cuda device index or None) of a tensor,
    refusing what cannot be passed without a copy."""
    if isinstance(t, DeviceArray):
        return t.ptr, t.dtype, t.shape, t.device.ordinal
    if _is_torch(t):
        if not t.is_cuda:
            raise ValueError("%s is on %s: the program runs on CUDA tensors" % (what, t.device))
        if not t.is_contiguous():
            raise ValueError("%s is not contiguous (moert passes tensors without copies: "
                             "call .contiguous() first)" % what)
        names = _torch_dtype_names()
        if t.dtype not in names:
            raise ValueError("%s has dtype %s, which bundles do not use" % (what, t.dtype))
        return t.data_ptr(), names[t.dtype], tuple(t.shape), t.device.index
    cai = getattr(t, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError("%s: a CUDA torch tensor, a moert.DeviceArray or an object with "
                        "__cuda_array_interface__, not %s" % (what, type(t).__name__))
    shape = tuple(cai["shape"])
    dtype = getattr(t, "moert_dtype", None) or _TYPESTR.get(cai["typestr"])
    if dtype is None:
        raise ValueError("%s: typestr %r has no moert dtype" % (what, cai["typestr"]))
    if cai.get("strides") is not None:
        expect, step = [], DTYPE_SIZE[dtype]
        for d in reversed(shape):
            expect.insert(0, step)
            step *= d
        if tuple(cai["strides"]) != tuple(expect):
            raise ValueError("%s is not contiguous" % what)
    return cai["data"][0], dtype, shape, None


def _extent(t, what):
    """(pointer, bytes) of a contiguous device tensor."""
    ptr, dtype, shape, _ = _view(t, what)
    n = DTYPE_SIZE[dtype]
    for d in shape:
        n *= d
    return ptr, n


def _symbolic(d1, d2):
    """A dim seen at T=1 and T=2: n, 'T' or 'a*T' (the forms bundles declare)."""
    a = d2 - d1
    return d1 if a == 0 else "T" if a == 1 else "%d*T" % a


# --- programs -----------------------------------------------------------------

class Program:
    """A loaded bundle.  Use moert.load().  A whole-model bundle (moec compile
    --layers) holds a program per layer: .programs maps their names
    ("layer.17") to Programs, and prog["layer.17"] is one of them; the
    Program load() returns is the first and owns the others (close() frees
    them all).  Any other bundle has one program, "main"."""

    def __init__(self, data, name="<bytes>"):
        self._data = ctypes.create_string_buffer(bytes(data), len(data))
        h = ctypes.c_void_p()
        _check(lib.moert_load_host(self._data, len(data), ctypes.byref(h)))
        self._init(h, name, None)
        self._programs = {}
        for i in range(lib.moert_num_programs(h)):
            ph = lib.moert_program_at(h, i)
            if i == 0:
                self._programs[self.name] = self
                continue
            p = Program.__new__(Program)
            p._init(ctypes.c_void_p(ph), name, self)
            self._programs[p.name] = p

    def _init(self, h, path, owner):
        self._h = h
        self._owner = owner         # None: this one owns the bundle's programs
        self.path = path
        self.name = lib.moert_program_name(h).decode()
        self.device = None
        self.device_error = None    # why the program is host-only
        self._keep = []             # bound weights and workspaces, kept alive
        self._lock = threading.Lock()   # moert_run: one thread at a time (runtime.md §3)
        self.max_tokens = lib.moert_max_tokens(h)
        self.inputs = [self._spec(lib.moert_input_info, i)
                       for i in range(lib.moert_num_inputs(h))]
        self.outputs = [self._spec(lib.moert_output_info, i)
                        for i in range(lib.moert_num_outputs(h))]

    def _spec(self, fn, i):
        a, b = TensorInfo(), TensorInfo()
        _check(fn(self._h, i, 1, ctypes.byref(a)))
        _check(fn(self._h, i, min(2, self.max_tokens), ctypes.byref(b)))
        shape = tuple(_symbolic(a.dim[k], b.dim[k]) for k in range(a.rank))
        return Spec(a.name.decode(), a.dtype.decode(), shape)

    @property
    def programs(self):
        """{name: Program} of every program in the bundle, in bundle order."""
        return dict((self._owner or self)._programs)

    def __getitem__(self, name):
        progs = (self._owner or self)._programs
        if name not in progs:
            raise KeyError("%s: no program %r (it holds %s)" % (self.path, name,
                                                                 ", ".join(progs)))
        return progs[name]

    def __len__(self):
        return len((self._owner or self)._programs)

    def _to_device(self, dev):
        """This program onto dev (the owner first shares its code module)."""
        _check(lib.moert_load_device(dev.handle, self._h))
        self.device = dev
        owner = self._owner or self
        if all(p.device for p in owner._programs.values()):
            owner._data = None      # the runtime no longer reads the bytes

    @property
    def weights(self):
        """The bundle's weights (WeightSpec), in manifest order."""
        res = []
        for i in range(lib.moert_num_weights(self._h)):
            info = TensorInfo()
            _check(lib.moert_weight_info(self._h, i, ctypes.byref(info)))
            f = lib.moert_weight_flags(self._h, i)
            res.append(WeightSpec(info.name.decode(), info.dtype.decode(),
                                  tuple(info.dim[k] for k in range(info.rank)), info.bytes,
                                  bool(f & WEIGHT_RUN), bool(f & WEIGHT_GENERATED),
                                  bool(f & WEIGHT_BOUND)))
        return res

    def bind_weight(self, name, tensor):
        """Read weight `name` from the caller's device tensor instead of a copy
        of the program's own (before it is on a device: see load(weights=)).
        dtype and dims must be the manifest's, the pointer 256-byte aligned.
        The tensor must outlive the program: it is kept referenced here."""
        ptr, dtype, shape, _ = _view(tensor, "weight '%s'" % name)
        dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        _check(lib.moert_bind_weight(self._h, name.encode(), ptr, dtype.encode(),
                                     len(shape), dims))
        self._keep.append(tensor)

    @property
    def workspace_size(self):
        """Bytes of workspace a run needs (the bundle's arena)."""
        return lib.moert_workspace_size(self._h)

    def set_workspace(self, tensor):
        """Run in the caller's workspace (any contiguous device tensor of at
        least workspace_size bytes, 256-byte aligned); None: the program's own.
        Given before the program is on a device, it allocates no arena."""
        if tensor is None:
            _check(lib.moert_set_workspace(self._h, 0, 0))
        else:
            ptr, nbytes = _extent(tensor, "workspace")
            _check(lib.moert_set_workspace(self._h, ptr, nbytes))
            self._keep.append(tensor)

    def __del__(self):
        h = getattr(self, "_h", None)
        if getattr(self, "_owner", None) is not None:
            return                      # freed with its owner, which it keeps alive
        if h and lib is not None:      # None at interpreter exit
            lib.moert_unload(h)
            self._h = None
            for p in getattr(self, "_programs", {}).values():
                p._h = None

    def close(self):
        """Free the program's device memory now (also done when it is collected)."""
        self.__del__()

    @property
    def code(self):
        """The code section chosen at load ("ptx:sm_80"); "" when host-only."""
        return lib.moert_code_section(self._h).decode()

    def __repr__(self):
        def fmt(s):
            return "%s: %s[%s]" % (s.name, s.dtype, ",".join(map(str, s.shape)))
        where = ("on %s (%s)" % (self.device.name, self.code) if self.device
                 else "host only" + (": %s" % self.device_error if self.device_error else ""))
        return "<moert.Program %s (%s) -> (%s), max_tokens %d, %s>" % (
            self.path, ", ".join(map(fmt, self.inputs)), ", ".join(map(fmt, self.outputs)),
            self.max_tokens, where)

    def shapes(self, tokens):
        """The outputs' concrete (dtype, shape) at T tokens."""
        res = []
        for i in range(len(self.outputs)):
            info = TensorInfo()
            _check(lib.moert_output_info(self._h, i, tokens, ctypes.byref(info)))
            res.append((info.dtype.decode(), tuple(info.dim[k] for k in range(info.rank))))
        return res

    def _tokens(self, views, fn, tokens):
        """T read off (and checked against) the tensors' dims; -1 if none has T."""
        t = ctypes.c_int64(tokens)
        for i, (ptr, dtype, shape, _) in enumerate(views):
            dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
            _check(fn(self._h, i, dtype.encode(), len(shape), dims, ctypes.byref(t)))
        return t.value

    def run(self, *inputs, out=None, stream=None, graph=False, workspace=None, tokens=None):
        """Run on the inputs (in declaration order) and return the outputs
        (one tensor, or a tuple when the bundle has several).  out: tensors to
        write into instead of new ones.  stream: a torch.cuda.Stream, an
        object with .cuda_stream, or a raw CUstream int; default torch's
        current stream (the legacy default stream without torch).  graph:
        let the runtime capture and replay its own CUDA graph per T (not
        inside torch.cuda.graph capture, which records the plain run).
        workspace: a device tensor of workspace_size bytes for this run
        (moert_run_ws): runs of one program from several threads then go
        ahead at once when each passes its own; without it, runs of one
        program from several threads take turns (a lock).  tokens: T,
        checked against the tensors' T dims; needed only when none has one."""
        if self.device is None:
            raise Error(11, "%s is not loaded on a device%s" % (
                self.path, ": " + self.device_error if self.device_error else ""))
        if len(inputs) != len(self.inputs):
            raise TypeError("%s takes %d inputs (%s), %d given" % (
                self.path, len(self.inputs), ", ".join(s.name for s in self.inputs),
                len(inputs)))
        ins = [_view(t, "input %d '%s'" % (i, s.name))
               for i, (t, s) in enumerate(zip(inputs, self.inputs))]
        self._same_device(ins)
        tokens = self._tokens(ins, lib.moert_check_input, -1 if tokens is None else tokens)
        use_torch = any(_is_torch(t) for t in inputs)
        if out is None:
            out = self._allocate(max(tokens, 1), inputs, use_torch)
        elif not isinstance(out, (list, tuple)):
            out = [out]
        if len(out) != len(self.outputs):
            raise TypeError("%s has %d outputs, %d given in out" % (
                self.path, len(self.outputs), len(out)))
        outs = [_view(t, "output %d '%s'" % (i, s.name))
                for i, (t, s) in enumerate(zip(out, self.outputs))]
        self._same_device(outs)
        tokens = self._tokens(outs, lib.moert_check_output, tokens)
        if tokens < 0:
            tokens = 1      # no T anywhere: a static plan, which T does not change
        in_p = (ctypes.c_uint64 * max(1, len(ins)))(*[v[0] for v in ins])
        out_p = (ctypes.c_uint64 * max(1, len(outs)))(*[v[0] for v in outs])
        st = self._stream(stream, use_torch)
        if workspace is not None:
            if graph:
                raise ValueError("graph=True runs in the program's workspace, not one per run")
            ptr, nbytes = _extent(workspace, "workspace")
            if nbytes < self.workspace_size:
                raise ValueError("workspace of %d bytes, the program needs %d"
                                 % (nbytes, self.workspace_size))
            _check(lib.moert_run_ws(self._h, tokens, in_p, out_p, ptr, st))
        else:
            with self._lock:        # ctypes drops the GIL: threads would meet in C
                _check(lib.moert_run(self._h, tokens, in_p, out_p, st, 1 if graph else 0))
        return out[0] if len(out) == 1 else tuple(out)

    def _same_device(self, views):
        for ptr, dtype, shape, idx in views:
            if idx is not None and idx != self.device.ordinal:
                raise ValueError("a tensor is on cuda:%d, the program on cuda:%d"
                                 % (idx, self.device.ordinal))

    def _allocate(self, tokens, inputs, use_torch):
        if not use_torch:
            return [DeviceArray(shape, dtype, self.device) for dtype, shape in self.shapes(tokens)]
        import torch
        names = {v: k for k, v in _torch_dtype_names().items()}
        dev = next(t.device for t in inputs if _is_torch(t))
        return [torch.empty(shape, dtype=names[dtype], device=dev)
                for dtype, shape in self.shapes(tokens)]

    def _stream(self, stream, use_torch):
        if stream is None:
            if not use_torch:
                return None
            import torch
            return torch.cuda.current_stream(self.device.ordinal).cuda_stream or None
        if hasattr(stream, "cuda_stream"):
            return stream.cuda_stream or None
        return int(stream) or None


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def load(path, device=0, weights=None, workspace=None):
    """Open a bundle and load it onto GPU `device` (None: host only).  With
    no driver or no such device the program stays host-only (a warning says
    why): it still reports .inputs, .outputs and max_tokens; run raises.
    A bad bundle raises moert.Error (MOERT_EFORMAT, MOERT_EVERSION) either way.
    weights: device tensors bound instead of the bundle's own copies
    (Program.bind_weight), in any program of the bundle: {name: tensor} for
    the program that declares `name` (a whole model's names carry their
    layer: "model.layers.3.mlp.gate.weight"), {program: {name: tensor}} for
    one program's ("layer.3"; needed where several declare the name);
    workspace: a device tensor shared with other programs run on the same
    stream (Program.set_workspace)."""
    try:
        data = _read(path)
    except OSError as e:
        raise Error(12, "%s: cannot open: %s" % (path, e.strerror)) from None
    prog = Program(data, str(path))
    if device is None:
        return prog
    try:
        dev = _get_device(device)
    except Error as e:
        if e.code not in (ENODRIVER, ENODEV):
            raise
        prog.device_error = str(e)
        warnings.warn("moert: %s stays on the host: %s" % (path, e), RuntimeWarning, stacklevel=2)
        return prog
    _bind_weights(prog, weights or {})
    if workspace is not None:
        for p in prog.programs.values():
            p.set_workspace(workspace)
    for p in prog.programs.values():       # the first (the owner) first
        p._to_device(dev)
    return prog


def _bind_weights(prog, weights):
    """load(weights=): every entry bound in its program before any program
    is on the device; a name no program declares, or several do, is refused
    (moert.Error MOERT_EINVAL) before anything is bound."""
    progs = prog.programs
    owners = {}
    for name, p in progs.items():
        for w in p.weights:
            owners.setdefault(w.name, []).append(name)
    plan = []
    for key, val in weights.items():
        if isinstance(val, Mapping):
            if key not in progs:
                raise Error(11, "%s: weights for program %r, which the bundle does not hold "
                            "(it holds %s)" % (prog.path, key, ", ".join(progs)))
            plan += [(progs[key], name, t) for name, t in val.items()]
        elif len(owners.get(key, ())) == 1:
            plan.append((progs[owners[key][0]], key, val))
        elif key in owners:
            raise Error(11, "%s: weight %r is declared by programs %s: give it as "
                        "weights={%r: {%r: tensor}}" % (prog.path, key, ", ".join(owners[key]),
                                                         owners[key][0], key))
        else:
            raise Error(11, "%s: no program declares a weight %r" % (prog.path, key))
    for p, name, t in plan:
        p.bind_weight(name, t)


def verify(path):
    """Check a bundle's structure and checksums (no GPU); moert.Error if bad."""
    data = _read(path)
    _check(lib.moert_verify(data, len(data)))
