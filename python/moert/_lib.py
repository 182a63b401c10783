"""ctypes declarations of libmoert.so (runtime/moert.h), and where it is found.

The library is looked for, in order, at $MOERT_LIBRARY, next to this file
(where `pip install` puts the one it compiles), and as libmoert.so on the
loader's path.  It needs only libc: libcuda.so.1 is opened by the library
itself when a device is first opened, so importing moert never needs a GPU.
"""
import ctypes
import os

c_int64_p = ctypes.POINTER(ctypes.c_int64)
c_uint64_p = ctypes.POINTER(ctypes.c_uint64)


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p),
                ("rank", ctypes.c_int), ("dim", ctypes.c_int64 * 8),
                ("bytes", ctypes.c_size_t)]


# name: (restype, argtypes).  A status is a C enum: c_int.
_P = ctypes.c_void_p
_S = ctypes.c_int
_SIGNATURES = {
    "moert_status_name": (ctypes.c_char_p, [_S]),
    "moert_last_error": (ctypes.c_char_p, []),
    "moert_open": (_S, [ctypes.c_int, ctypes.POINTER(_P)]),
    "moert_close": (None, [_P]),
    "moert_device_name": (ctypes.c_char_p, [_P]),
    "moert_load_host": (_S, [_P, ctypes.c_size_t, ctypes.POINTER(_P)]),
    "moert_load_device": (_S, [_P, _P]),
    "moert_unload": (None, [_P]),
    "moert_code_section": (ctypes.c_char_p, [_P]),
    "moert_num_programs": (ctypes.c_int, [_P]),
    "moert_program_at": (_P, [_P, ctypes.c_int]),
    "moert_program_name": (ctypes.c_char_p, [_P]),
    "moert_num_inputs": (ctypes.c_int, [_P]),
    "moert_num_outputs": (ctypes.c_int, [_P]),
    "moert_max_tokens": (ctypes.c_int64, [_P]),
    "moert_input_info": (_S, [_P, ctypes.c_int, ctypes.c_int64, ctypes.POINTER(TensorInfo)]),
    "moert_output_info": (_S, [_P, ctypes.c_int, ctypes.c_int64, ctypes.POINTER(TensorInfo)]),
    "moert_check_input": (_S, [_P, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                               c_int64_p, c_int64_p]),
    "moert_check_output": (_S, [_P, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                c_int64_p, c_int64_p]),
    "moert_run": (_S, [_P, ctypes.c_int64, c_uint64_p, c_uint64_p, _P, ctypes.c_int]),
    "moert_malloc": (_S, [_P, ctypes.c_size_t, c_uint64_p]),
    "moert_free": (_S, [_P, ctypes.c_uint64]),
    "moert_memcpy_htod": (_S, [_P, ctypes.c_uint64, _P, ctypes.c_size_t]),
    "moert_memcpy_dtoh": (_S, [_P, _P, ctypes.c_uint64, ctypes.c_size_t]),
    "moert_sync": (_S, [_P]),
    "moert_verify": (_S, [_P, ctypes.c_size_t]),
}

# Functions a newer library has; an older one still loads without them.
_OPTIONAL = {
    "moert_num_weights": (ctypes.c_int, [_P]),
    "moert_weight_info": (_S, [_P, ctypes.c_int, ctypes.POINTER(TensorInfo)]),
    "moert_weight_flags": (ctypes.c_int, [_P, ctypes.c_int]),
    "moert_bind_weight": (_S, [_P, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p,
                               ctypes.c_int, c_int64_p]),
    "moert_workspace_size": (ctypes.c_uint64, [_P]),
    "moert_set_workspace": (_S, [_P, ctypes.c_uint64, ctypes.c_uint64]),
    "moert_run_ws": (_S, [_P, ctypes.c_int64, c_uint64_p, c_uint64_p, ctypes.c_uint64, _P]),
}


def _candidates():
    env = os.environ.get("MOERT_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, "libmoert.so"), "libmoert.so"]


def _open():
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
            continue
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        for name, (res, args) in _OPTIONAL.items():
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype, fn.argtypes = res, args
        return lib
    raise ImportError("moert: cannot load libmoert.so (%s); reinstall the package "
                      "(pip install ./python) or set MOERT_LIBRARY to the library "
                      "built by CMake (build/runtime/libmoert.so)" % "; ".join(errors))


lib = _open()
