"""moert without a driver: load opens a bundle and reports what it holds;
bad bundles and runs raise moert.Error with the runtime's message."""
import os
import unittest
import warnings

os.environ.setdefault("MOERT_LIBCUDA", "/nonexistent/libcuda.so.1")

import moert  # noqa: E402

from common import TMP, arctic_bundle, check_bundle, mixtral_bundle, whole_bundle  # noqa: E402


class HostOnly(unittest.TestCase):
    def test_specs(self):
        p = moert.load(mixtral_bundle(), device=None)
        self.assertIsNone(p.device)
        self.assertEqual(p.inputs, [moert.Spec("x", "bf16", ("T", 64))])
        self.assertEqual(p.outputs, [moert.Spec("y", "bf16", ("T", 64))])
        self.assertEqual(p.max_tokens, 4096)
        self.assertEqual(p.code, "")
        self.assertEqual(p.shapes(5), [("bf16", (5, 64))])
        self.assertIn("(x: bf16[T,64]) -> (y: bf16[T,64]), max_tokens 4096, host only", repr(p))

    def test_programs(self):
        p = moert.load(mixtral_bundle(), device=None)
        self.assertEqual(list(p.programs), ["main"])
        self.assertIs(p["main"], p)
        w = moert.load(whole_bundle(), device=None)
        self.assertEqual(list(w.programs), ["layer.0", "layer.1"])
        self.assertEqual(len(w), 2)
        self.assertIs(w.programs["layer.0"], w)
        l1 = w["layer.1"]
        self.assertEqual(l1.name, "layer.1")
        self.assertIs(l1["layer.0"], w)
        self.assertEqual(l1.inputs, [moert.Spec("x", "bf16", ("T", 64))])
        # the dense layer and the MoE layer: different weights
        self.assertNotEqual([x.name for x in w.weights], [x.name for x in l1.weights])
        with self.assertRaises(KeyError) as e:
            w["layer.2"]
        self.assertIn("layer.0, layer.1", str(e.exception))
        w.close()
        self.assertIsNone(l1._h)       # freed with its owner

    def test_several_outputs(self):
        p = moert.load(check_bundle(), device=None)
        self.assertEqual([tuple(s) for s in p.outputs],
                         [("y", "f32", ("T", 96)), ("n", "i32", ("T",))])
        self.assertEqual(p.max_tokens, 1000)

    def test_several_inputs(self):
        p = moert.load(arctic_bundle(), device=None)
        self.assertEqual(p.inputs, [moert.Spec("x", "bf16", ("T", 64)),
                                    moert.Spec("layer_in", "bf16", ("T", 64))])
        self.assertEqual(p.outputs, [moert.Spec("y", "bf16", ("T", 64))])
        self.assertIn("(x: bf16[T,64], layer_in: bf16[T,64]) -> (y: bf16[T,64])", repr(p))

    def test_no_driver_stays_on_host(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            p = moert.load(mixtral_bundle(), device=0)
        if p.device is not None:
            self.skipTest("a driver is present")
        self.assertTrue(any("MOERT_ENODRIVER" in str(x.message) for x in w))
        self.assertIn("MOERT_ENODRIVER", p.device_error)
        with self.assertRaises(moert.Error) as e:
            p.run(object())
        self.assertEqual(e.exception.status, "MOERT_EINVAL")
        self.assertIn("not loaded on a device", str(e.exception))
        self.assertIn("cannot load the CUDA driver", str(e.exception))

    def test_bad_bundles(self):
        data = bytearray(open(mixtral_bundle(), "rb").read())
        flip = os.path.join(TMP, "flip.moeb")
        data[len(data) // 2] ^= 0x20
        open(flip, "wb").write(data)
        with self.assertRaises(moert.Error) as e:
            moert.load(flip, device=None)
        self.assertEqual(e.exception.status, "MOERT_EFORMAT")
        self.assertIn("CRC mismatch", str(e.exception))
        with self.assertRaises(moert.Error) as e:
            moert.verify(flip)
        self.assertEqual(e.exception.status, "MOERT_EFORMAT")
        with self.assertRaises(moert.Error) as e:
            moert.load(os.path.join(TMP, "none.moeb"))
        self.assertEqual(e.exception.status, "MOERT_EIO")
        moert.verify(mixtral_bundle())

    def test_device_needs_driver(self):
        with self.assertRaises(moert.Error) as e:
            moert.empty((4,), "f32")
        self.assertEqual(e.exception.status, "MOERT_ENODRIVER")


if __name__ == "__main__":
    unittest.main()
