/*
 * fuzz_ir.c — the text IR parser.  Whatever parses must print, and the
 * print must parse back and print to the same bytes (with and without
 * locations); whatever also verifies must verify again after the trip.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "ir.h"

static void
roundtrip(const Module *m, int flags, int verified)
{
	char *a = ir_print_string(m, flags), *b;
	Module *m2;
	Diag d;

	fuzz_diag(&d);
	m2 = ir_parse("fuzz.ir", a, strlen(a), &d);
	FUZZ_CHECK(m2, "the print does not parse: %s\n%s", d.last, a);
	FUZZ_CHECK(!verified || ir_verify(m2, &d) == 0,
		   "the print does not verify: %s\n%s", d.last, a);
	b = ir_print_string(m2, flags);
	FUZZ_CHECK(strcmp(a, b) == 0, "print(parse(print(m))) != print(m):\n%s---\n%s", a, b);
	free(a);
	free(b);
	ir_free_module(m2);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Module *m;
	Diag d;
	int ok;

	fuzz_diag(&d);
	if (!(m = ir_parse("fuzz.ir", (const char *)data, size, &d)))
		return 0;
	ok = ir_verify(m, &d) == 0;
	roundtrip(m, 0, ok);
	roundtrip(m, IR_PRINT_LOC, ok);
	ir_free_module(m);
	return 0;
}
