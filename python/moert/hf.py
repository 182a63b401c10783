"""moert.hf — run a transformers model's FFN blocks with moec bundles.

    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16).cuda()
    handle = moert.hf.patch(model, "bundles/")       # bundles/layer{N}.moeb
    model.generate(...)                              # layers 0..N-1 run their FFN on moert
    handle.unpatch()

    handle = moert.hf.patch(model, "model.moeb")     # moec compile d --layers=all:
                                                     # program layer.N for layer N

A bundle compiled by `moec compile DIR --layer N` computes decoder layer N's
whole FFN sub-block, residual included (docs/config.md):

    y = x + mlp(post_attention_layernorm(x))

while the layer's forward computes `residual + mlp(post_attention_layernorm(
residual))` inline.  patch() therefore replaces post_attention_layernorm by
an identity, the mlp by a module that runs the bundle on its input (the
residual itself, now) and keeps y, and adds a forward hook on the layer that
returns that y as the layer's output — exactly the bundle's result, with no
x + (y - x) rounding.  Attention, caches and everything else stay the
model's own.  Batches of more tokens than the bundle's max_tokens, and CPU
tensors, run the original modules.

Weights: a bundle compiled from the model's checkpoint holds its own copy.
With bind=True, a weight the bundle's run reads that the model holds under
the same name, dtype and shape (contiguous, 256-byte aligned) is bound to
the model's tensor instead (Program.weights says which were).  All patched
layers run one after another on the current stream, so they share one
workspace (the largest workspace_size).
"""
import os

import torch

import moert

__all__ = ["patch", "Patched", "decoder_layers"]


def decoder_layers(model):
    """The decoder layers of a causal LM (model.model.layers, or model.layers)."""
    for path in ("model.layers", "layers", "model.language_model.layers", "model.model.layers"):
        mod = model
        try:
            for p in path.split("."):
                mod = getattr(mod, p)
        except AttributeError:
            continue
        if isinstance(mod, torch.nn.ModuleList):
            return mod
    raise ValueError("%s: no decoder layers found (model.model.layers)" % type(model).__name__)


def _whole(bundles):
    """A whole-model bundle (a .moeb file holding programs layer.N, or a
    host-only moert.Program of one): {layer: Program}; None if not one."""
    if isinstance(bundles, moert.Program):
        whole = bundles
    elif isinstance(bundles, (str, os.PathLike)) and os.path.isfile(bundles):
        whole = moert.load(bundles, device=None)
    else:
        return None
    progs = {}
    for name, prog in whole.programs.items():
        if name.startswith("layer.") and name[6:].isdigit():
            progs[int(name[6:])] = prog
    if not progs:
        raise ValueError("%s: no program named layer.N (it holds %s): compile the model "
                         "with moec compile --layers" % (whole.path, ", ".join(whole.programs)))
    return progs


def _bundle_paths(bundles, n):
    """{layer: path} from a folder (layerN.moeb), a format string ('{}' for
    N), a dict or a list (None: not patched)."""
    if isinstance(bundles, dict):
        return {int(k): v for k, v in bundles.items() if v}
    if isinstance(bundles, (list, tuple)):
        return {i: p for i, p in enumerate(bundles) if p}
    if os.path.isdir(bundles):
        found = {i: os.path.join(bundles, "layer%d.moeb" % i) for i in range(n)}
        return {i: p for i, p in found.items() if os.path.exists(p)}
    if "{" in bundles:
        found = {i: bundles.format(i) for i in range(n)}
        return {i: p for i, p in found.items() if os.path.exists(p)}
    raise ValueError("bundles: a folder of layerN.moeb, a format string, a dict or a list, not %r"
                     % (bundles,))


class _Identity(torch.nn.Module):
    def forward(self, x):
        return x


class MoertFFN(torch.nn.Module):
    """The FFN sub-block of one layer on a moert program (see the module doc)."""

    def __init__(self, prog, norm, mlp, layer):
        super().__init__()
        self.prog, self.layer, self.y = prog, layer, None
        self.__dict__["_orig"] = (norm, mlp)   # kept alive (bound weights), not submodules

    def forward(self, x):
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        if not flat.is_cuda or flat.shape[0] > self.prog.max_tokens:
            norm, mlp = self._orig
            y = flat + mlp(norm(flat.unsqueeze(0))).reshape(flat.shape)
        else:
            y = self.prog.run(flat.contiguous())
        self.y = y.view(shape)
        return self.y       # the layer adds its residual to this; the hook discards that

    def extra_repr(self):
        return "layer %d: %s" % (self.layer, self.prog.path)


def _take_y(ffn):
    def hook(module, args, output):
        y, ffn.y = ffn.y, None
        if y is None:
            return output
        if isinstance(output, tuple):
            return (y,) + tuple(output[1:])
        return y
    return hook


class Patched:
    """What patch() did: .programs {layer: moert.Program}, .bound {layer:
    [weight names bound to the model's tensors]}, .workspace; unpatch()."""

    def __init__(self):
        self.programs, self.bound, self._undo, self.workspace = {}, {}, [], None

    def unpatch(self):
        for undo in reversed(self._undo):
            undo()
        self._undo = []

    def __repr__(self):
        return "<moert.hf.Patched layers %s, %d weights bound>" % (
            sorted(self.programs), sum(len(v) for v in self.bound.values()))


def _bind(prog, params):
    bound = []
    for w in prog.weights:
        t = params.get(w.name)
        if (not w.run or t is None or not t.is_cuda or not t.is_contiguous()
                or t.data_ptr() % moert.MOERT_WEIGHT_ALIGN
                or tuple(t.shape) != tuple(w.shape)):
            continue
        try:
            prog.bind_weight(w.name, t.detach())
            bound.append(w.name)
        except (moert.Error, ValueError):
            pass        # another dtype or layout: the bundle's own copy is used
    return bound


def patch(model, bundles, bind=True, share_workspace=True):
    """Replace the FFN blocks of the model's decoder layers that have a
    bundle; returns a Patched handle.  The model must be on one CUDA device."""
    layers = decoder_layers(model)
    dev = next(model.parameters()).device
    if dev.type != "cuda":
        raise ValueError("the model is on %s: move it to a CUDA device first" % dev)
    whole = _whole(bundles)
    paths = whole or _bundle_paths(bundles, len(layers))
    if not paths:
        raise ValueError("no bundle for any of the %d layers in %r" % (len(layers), bundles))
    params = dict(model.named_parameters()) if bind else {}
    h = Patched()
    hidden = None
    for i, path in sorted(paths.items()):
        if i >= len(layers):
            raise ValueError("%s: the model has %d layers" % (path, len(layers)))
        layer = layers[i]
        for name in ("post_attention_layernorm", "mlp"):
            if not hasattr(layer, name):
                raise ValueError("layer %d (%s) has no %s" % (i, type(layer).__name__, name))
        prog = path if whole else moert.load(path, device=None)
        hidden = hidden or layer.post_attention_layernorm.weight.shape[-1]
        want = [("x", ("T", hidden))]
        if [(s.name, s.shape) for s in prog.inputs] != want or len(prog.outputs) != 1 or \
                prog.outputs[0].shape != ("T", hidden):
            raise ValueError("%s: not an FFN block of hidden size %d: %r" % (prog.path, hidden, prog))
        h.bound[i] = _bind(prog, params)
        h.programs[i] = prog
    if share_workspace:
        size = max(p.workspace_size for p in h.programs.values())
        h.workspace = torch.empty(max(size, 1), dtype=torch.uint8, device=dev)
    mdev = moert.device(dev.index if dev.index is not None else torch.cuda.current_device())
    for i, prog in sorted(h.programs.items()):
        if h.workspace is not None:
            prog.set_workspace(h.workspace)
    # a whole-model bundle's first program (which owns the code) goes first
    for prog in sorted(h.programs.values(), key=lambda p: p._owner is not None):
        prog._to_device(mdev)
    for i, prog in sorted(h.programs.items()):
        layer = layers[i]
        norm, mlp = layer.post_attention_layernorm, layer.mlp
        ffn = MoertFFN(prog, norm, mlp, i)
        layer.post_attention_layernorm, layer.mlp = _Identity(), ffn
        hook = layer.register_forward_hook(_take_y(ffn))

        def undo(layer=layer, norm=norm, mlp=mlp, hook=hook):
            hook.remove()
            layer.post_attention_layernorm, layer.mlp = norm, mlp
        h._undo.append(undo)
    return h
