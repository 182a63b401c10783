"""Program.run against the stand-in driver tests/gpu/fakecuda.c (device
memory is host memory, kernels are C twins of gpu_runtime_check's PTX):
results bit-exact against a Python reference, caller-owned outputs,
__cuda_array_interface__ objects, graphs, and the runtime's refusals as
moert.Error.  Skipped unless MOERT_LIBCUDA names libfakecuda.so."""
import os
import unittest

import moert

from common import axpb, check_bundle, pack_f32, programs_bundle, synth_w, unpack, whole_bundle

FAKE = "fakecuda" in os.environ.get("MOERT_LIBCUDA", "")


def xvalues(T):
    return [((i * 7) % 17 - 8) * 0.25 for i in range(T * 96)]


class Cai:
    """A bare __cuda_array_interface__ over another array's memory."""

    def __init__(self, arr, typestr, shape, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "strides": strides,
                                         "data": (arr.ptr, False), "version": 3}


@unittest.skipUnless(FAKE, "needs MOERT_LIBCUDA=.../libfakecuda.so")
class FakeDriver(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.p = moert.load(check_bundle(), device=0)
        cls.w = synth_w()

    def x(self, T):
        return moert.empty((T, 96), "f32").copy_from(pack_f32(xvalues(T)))

    def check(self, T, y, n):
        self.assertEqual(unpack("f", y.tobytes()), axpb(xvalues(T), self.w))
        self.assertEqual(unpack("i", n.tobytes()), [240] * T)

    def test_loaded(self):
        self.assertIsNotNone(self.p.device)
        self.assertEqual(self.p.code, "ptx:sm_80")
        self.assertIn("on Fake GPU", repr(self.p))

    def test_run(self):
        for T in (1, 7, 1000):
            y, n = self.p.run(self.x(T))
            self.assertEqual((y.dtype, y.shape, n.dtype, n.shape), ("f32", (T, 96), "i32", (T,)))
            self.check(T, y, n)

    def test_out_stream_graph(self):
        T = 5
        y, n = moert.empty((T, 96), "f32"), moert.empty((T,), "i32")
        r = self.p.run(self.x(T), out=[y, n], stream=0)
        self.assertIs(r[0], y)
        self.check(T, y, n)
        for _ in range(2):  # capture, then replay
            y2, n2 = moert.empty((T, 96), "f32"), moert.empty((T,), "i32")
            self.p.run(self.x(T), out=(y2, n2), graph=True)
            self.check(T, y2, n2)

    def test_cuda_array_interface(self):
        T = 3
        x = self.x(T)
        y, n = self.p.run(Cai(x, "<f4", (T, 96)))
        self.check(T, y, n)
        with self.assertRaises(ValueError):
            self.p.run(Cai(x, "<f4", (T, 96), strides=(4, 4 * T)))
        with self.assertRaises(ValueError):
            self.p.run(Cai(x, "<c8", (T, 96)))

    def test_weights_and_workspace(self):
        p = moert.load(check_bundle(), device=None)
        self.assertEqual(p.weights, [moert.WeightSpec("w", "f32", (96,), 384, True, True, False),
                                     moert.WeightSpec("inc", "i32", (4,), 16, True, False, False)])
        self.assertEqual(p.workspace_size, 4000)
        mine = [(j % 13) * 0.5 - 3.0 for j in range(96)]
        w = moert.empty((96,), "f32").copy_from(pack_f32(mine))
        inc = moert.empty((4,), "i32").copy_from(bytes([5, 0, 0, 0, 6, 0, 0, 0, 7, 0, 0, 0,
                                                        8, 0, 0, 0]))
        ws = moert.empty((4096,), "u8")
        q = moert.load(check_bundle(), weights={"w": w, "inc": inc}, workspace=ws)
        self.assertTrue(all(x.bound for x in q.weights))
        T = 9
        y, n = q.run(self.x(T))
        self.assertEqual(unpack("f", y.tobytes()), axpb(xvalues(T), mine))
        self.assertEqual(unpack("i", n.tobytes()), [24 * 26] * T)
        self.assertEqual(unpack("f", w.tobytes()), mine)   # init did not overwrite it
        ws2 = moert.empty((4000,), "u8")
        y, n = self.p.run(self.x(T), workspace=ws2)       # moert_run_ws
        self.check(T, y, n)
        with self.assertRaises(ValueError):
            self.p.run(self.x(T), workspace=moert.empty((3999,), "u8"))
        with self.assertRaises(moert.Error) as e:
            q.set_workspace(None)
        self.assertIn("without a workspace of its own", str(e.exception))
        r = moert.load(check_bundle(), device=None)
        with self.assertRaises(moert.Error) as e:
            r.bind_weight("w", moert.empty((95,), "f32"))
        self.assertEqual(e.exception.status, "MOERT_ESHAPE")
        self.assertIn("weight 'w' is f32[95], the bundle declares f32[96]", str(e.exception))

    def test_weights_of_every_program(self):
        """load(weights=) on a bundle of three programs: {program: {name: t}}
        binds in that program only; a name several programs declare is
        refused unqualified, and so is an unknown name or program, before
        anything is bound.  Each program runs with its own weights."""
        def i32(*v):
            return moert.empty((4,), "i32").copy_from(b"".join(x.to_bytes(4, "little") for x in v))
        mine = [(j % 13) * 0.5 - 3.0 for j in range(96)]
        w = moert.empty((96,), "f32").copy_from(pack_f32(mine))
        inc1, inc2 = i32(9, 10, 11, 12), i32(5, 6, 7, 8)
        for bad, why in (({"inc": inc1}, "weight 'inc' is declared by programs layer.0, layer.1, "
                                         "layer.2: give it as weights={'layer.0': {'inc': tensor}}"),
                         ({"v": w}, "no program declares a weight 'v'"),
                         ({"layer.7": {"w": w}}, "program 'layer.7', which the bundle does not "
                                                 "hold (it holds layer.0, layer.1, layer.2)")):
            with self.assertRaises(moert.Error) as e:
                moert.load(programs_bundle(), weights=bad)
            self.assertEqual(e.exception.status, "MOERT_EINVAL")
            self.assertIn(why, str(e.exception))
        with self.assertRaises(moert.Error) as e:     # the runtime's check, in program layer.2
            moert.load(programs_bundle(), weights={"layer.2": {"w": moert.empty((95,), "f32")}})
        self.assertIn("weight 'w' is f32[95], the bundle declares f32[96]", str(e.exception))
        ws = moert.empty((4096,), "u8")
        p = moert.load(programs_bundle(), weights={"layer.1": {"inc": inc1},
                                                   "layer.2": {"w": w, "inc": inc2}}, workspace=ws)
        self.assertEqual([[x.bound for x in q.weights] for q in p.programs.values()],
                         [[False, False], [False, True], [True, True]])
        T = 11
        for name, wv, s in (("layer.0", self.w, 240), ("layer.1", self.w, 24 * 42),
                            ("layer.2", mine, 24 * 26)):
            y, n = p[name].run(self.x(T))
            self.assertEqual(unpack("f", y.tobytes()), axpb(xvalues(T), wv), name)
            self.assertEqual(unpack("i", n.tobytes()), [s] * T, name)

    def test_weights_by_unique_name(self):
        """A whole model's weight names carry their layer: a plain name binds
        in the one program that declares it (load(weights=) does this before
        the programs go to the device; here on the host)."""
        p = moert.load(whole_bundle(), device=None)
        spec = {w.name: w for w in p["layer.1"].weights}["model.layers.1.mlp.gate.weight"]
        t = moert.empty(spec.shape, spec.dtype)
        moert._bind_weights(p, {spec.name: t})
        self.assertEqual([w.name for q in p.programs.values() for w in q.weights if w.bound],
                         [spec.name])
        self.assertTrue({w.name: w for w in p["layer.1"].weights}[spec.name].bound)

    def test_threads(self):
        """8 threads run one program at once, each with its own workspace
        (moert_run_ws), and 8 more without one (moert_run, taking turns)."""
        import threading
        bad = []

        def work(i, ws):
            for it in range(20):
                T = 1 + (i * 7 + it) % 50
                x = moert.empty((T, 96), "f32").copy_from(pack_f32(xvalues(T)))
                y, n = self.p.run(x, workspace=ws)
                if unpack("f", y.tobytes()) != axpb(xvalues(T), self.w) or \
                        unpack("i", n.tobytes()) != [240] * T:
                    bad.append((i, it))
        threads = [threading.Thread(target=work, args=(i, moert.empty((4000,), "u8") if i < 8 else None))
                   for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(bad, [])

    def test_refusals(self):
        with self.assertRaises(moert.Error) as e:
            self.p.run(moert.empty((2, 96), "bf16"))
        self.assertEqual(e.exception.status, "MOERT_ESHAPE")
        self.assertIn("input 'x' has dtype bf16, the bundle declares f32[T,96]", str(e.exception))
        with self.assertRaises(moert.Error) as e:
            self.p.run(moert.empty((1001, 96), "f32"))
        self.assertEqual(e.exception.status, "MOERT_ETOKENS")
        with self.assertRaises(moert.Error) as e:
            self.p.run(self.x(2), out=[moert.empty((3, 96), "f32"), moert.empty((2,), "i32")])
        self.assertEqual(e.exception.status, "MOERT_ESHAPE")
        self.assertIn("output 'y'", str(e.exception))
        with self.assertRaises(moert.Error) as e:
            self.p.run(self.x(3), tokens=4)
        self.assertIn("implies T=3, but T=4 already", str(e.exception))
        y, n = self.p.run(self.x(3), tokens=3)
        self.check(3, y, n)
        with self.assertRaises(TypeError):
            self.p.run()
        with self.assertRaises(TypeError):
            self.p.run([1.0])


if __name__ == "__main__":
    unittest.main()
