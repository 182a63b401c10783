/*
 * fuzz_tensor.c — the tensor file readers: .npy (npy_read) and ONNX
 * TensorProto (pb_tensor_decode) on every input.  A tensor that reads must
 * write and read back to the same dtype, shape and bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static void
same(const Tensor *a, const Tensor *b, const char *what)
{
	FUZZ_CHECK(a->dt == b->dt && a->rank == b->rank, "%s: dtype or rank changed", what);
	for (int i = 0; i < a->rank; i++)
		FUZZ_CHECK(a->dim[i] == b->dim[i], "%s: dim %d changed", what, i);
	FUZZ_CHECK(memcmp(a->data, b->data, tensor_nbytes(a)) == 0, "%s: data changed", what);
}

/* Write t with `write`, read it back with `read`. */
static void
again(const Tensor *t, int (*write)(FILE *, const Tensor *),
      int (*read)(const char *, const void *, size_t, Tensor *, Diag *), const char *what)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	Tensor u;
	Diag d;

	FUZZ_CHECK(f, "%s: open_memstream", what);
	if (write(f, t) != 0) {	/* a dtype the format cannot hold */
		fclose(f);
		free(buf);
		return;
	}
	fclose(f);
	fuzz_diag(&d);
	FUZZ_CHECK(read("again", buf, len, &u, &d) == 0, "%s: its own output does not read: %s",
		   what, d.last);
	same(t, &u, what);
	tensor_free(&u);
	free(buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Tensor t;
	Diag d;

	fuzz_diag(&d);
	if (npy_read("fuzz.npy", data, size, &t, &d) == 0) {
		again(&t, npy_write, npy_read, "npy");
		tensor_free(&t);
	}
	fuzz_diag(&d);
	if (pb_tensor_decode("fuzz.pb", data, size, &t, &d) == 0) {
		again(&t, pb_tensor_write, pb_tensor_decode, "pb");
		tensor_free(&t);
	}
	return 0;
}
