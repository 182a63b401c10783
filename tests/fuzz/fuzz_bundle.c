/*
 * fuzz_bundle.c — the bundle loader without a GPU: bundle_read (structure,
 * checksums, manifest, cross-checks), moert_verify and moert_load_host,
 * then every query a serving program makes before it runs (tensor infos at
 * T = 1 and max_tokens, input checks, cost).
 *
 * Every byte of a bundle is under a CRC, so a mutated bundle rarely gets
 * past the checksums; each input is therefore tried twice: as it is, and
 * with its size field and CRCs recomputed, so that mutations reach the
 * manifest parser and the cross-checks.  An input starting with "moeb " is
 * manifest text: parsed, printed, and parsed back to the same print.
 */
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "fuzz.h"
#include "moert.h"

static void
queries(moert_program *p)
{
	int64_t max = moert_max_tokens(p), T[2] = {1, max};
	moert_tensor_info info;
	double flops, bytes;

	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < moert_num_inputs(p); i++) {
			int64_t tokens = -1;
			if (moert_input_info(p, i, T[k], &info) != MOERT_OK)
				continue;
			FUZZ_CHECK(moert_check_input(p, i, info.dtype, info.rank, info.dim,
						     &tokens) == MOERT_OK,
				   "input %d does not match its own info: %s", i,
				   moert_last_error());
		}
		for (int i = 0; i < moert_num_outputs(p); i++)
			moert_output_info(p, i, T[k], &info);
		moert_cost(p, T[k], &flops, &bytes);
	}
	moert_input_info(p, 0, max + 1, &info);
	moert_input_info(p, -1, 1, &info);
}

static void
load(const uint8_t *data, size_t size)
{
	moert_program *p;
	moert_status v = moert_verify(data, size), s;
	Arena *a = arena_new(0);
	Bundle b;
	Diag d;
	int rc;

	fuzz_diag(&d);
	rc = bundle_read(a, "fuzz.moeb", data, size, &b, &d);
	arena_free(a);
	s = moert_load_host(data, size, &p);
	FUZZ_CHECK((v == MOERT_OK) == (rc == BUNDLE_OK) && (s == MOERT_OK) == (v == MOERT_OK),
		   "bundle_read %d, moert_verify %d and moert_load_host %d disagree", rc, v, s);
	if (s != MOERT_OK)
		return;
	queries(p);
	moert_unload(p);
}

/* The bundle with its size field and every CRC made right, where the
 * header and table are whole enough to find them. */
static void
fixup(uint8_t *p, size_t size)
{
	uint32_t n;

	if (size < BUNDLE_HDRSIZE)
		return;
	bundle_put64(p + 16, size);
	n = bundle_get32(p + 12);
	if (n >= 1 && n <= BUNDLE_MAXSEC && BUNDLE_HDRSIZE + (size_t)BUNDLE_ENTSIZE * n <= size) {
		for (uint32_t i = 0; i < n; i++) {
			unsigned char *e = p + BUNDLE_HDRSIZE + BUNDLE_ENTSIZE * i;
			uint64_t off = bundle_get64(e + 32), len = bundle_get64(e + 40);
			if (off <= size && len <= size - off)
				bundle_put32(e + 48, crc32c(0, p + off, len));
		}
		bundle_put32(p + 40, crc32c(0, p + BUNDLE_HDRSIZE, (size_t)BUNDLE_ENTSIZE * n));
	}
	bundle_put32(p + 44, crc32c(0, p, 44));
}

static void
manifest(const uint8_t *data, size_t size)
{
	Arena *a = arena_new(0);
	Manifest *m, *m2;
	char *t1, *t2;
	size_t n1, n2;
	Diag d;

	fuzz_diag(&d);
	if (bundle_manifest_parse(a, "fuzz", (const char *)data, size, &m, &d) == BUNDLE_OK) {
		t1 = bundle_manifest_print(m, &n1);
		FUZZ_CHECK(bundle_manifest_parse(a, "again", t1, n1, &m2, &d) == BUNDLE_OK,
			   "the manifest's print does not parse: %s\n%s", d.last, t1);
		t2 = bundle_manifest_print(m2, &n2);
		FUZZ_CHECK(n1 == n2 && memcmp(t1, t2, n1) == 0,
			   "print(parse(print(m))) != print(m):\n%s---\n%s", t1, t2);
		free(t1);
		free(t2);
	}
	arena_free(a);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	if (size >= 5 && memcmp(data, "moeb ", 5) == 0) {
		manifest(data, size);
		return 0;
	}
	load(data, size);
	if (size >= BUNDLE_HDRSIZE) {
		copy = xmalloc(size);
		memcpy(copy, data, size);
		fixup(copy, size);
		if (memcmp(copy, data, size) != 0)
			load(copy, size);
		free(copy);
	}
	return 0;
}
