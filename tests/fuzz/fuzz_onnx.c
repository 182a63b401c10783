/*
 * fuzz_onnx.c — the ONNX importer, from memory.  The model "lives" in a
 * temporary folder holding a small external-data file (data.bin, and
 * sub/data.bin), so external data is read too.  Whatever imports must
 * verify, print, and print back to the same text after a parse.
 */
#include <sys/stat.h>

#include "frontend.h"
#include "fuzz.h"

static char model[1024];

static void
setup(void)
{
	const char *dir = fuzz_tmpdir();
	unsigned char bytes[4096];
	char path[1024];

	for (size_t i = 0; i < sizeof bytes; i++)
		bytes[i] = (unsigned char)(i * 37 + 11);
	fuzz_write(fuzz_path(path, sizeof path, dir, "data.bin"), bytes, sizeof bytes);
	mkdir(fuzz_path(path, sizeof path, dir, "sub"), 0700);
	fuzz_write(fuzz_path(path, sizeof path, dir, "sub/data.bin"), bytes, 256);
	fuzz_path(model, sizeof model, dir, "model.onnx");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FeOpts o;
	Module *m;
	Diag d;

	if (!model[0])
		setup();
	fuzz_diag(&d);
	fe_default_opts(&o);
	o.max_bytes = (int64_t)1 << 26;	/* bounded memory per input */
	o.max_host_bytes = (int64_t)1 << 28;
	o.max_nodes = 1 << 14;	/* a function bomb under the real budget takes seconds */
	if (!(m = onnx_import_buffer(model, data, size, &o, &d)))
		return 0;
	fuzz_check_module(m, "the import");
	ir_free_module(m);
	return 0;
}
