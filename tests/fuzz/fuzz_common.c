/*
 * fuzz_common.c — helpers of fuzz.h: quiet diagnostics, a temporary folder
 * for readers that take paths (config.json, safetensors), and failures that
 * abort with a message.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "ir.h"

void
fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: fuzz check failed: %s: ", file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

void
fuzz_diag(Diag *d)
{
	static int verbose = -1;

	if (verbose < 0)
		verbose = getenv("FUZZ_VERBOSE") != NULL;
	diag_init(d, verbose ? stderr : NULL);
}

static char tmpdir[256];

static void
remove_tmpdir(void)
{
	char cmd[300];

	if (!tmpdir[0])
		return;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz: could not remove %s\n", tmpdir);
}

const char *
fuzz_tmpdir(void)
{
	const char *base;

	if (tmpdir[0])
		return tmpdir;
	base = getenv("TMPDIR");
	if (!base || !*base)
		base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(tmpdir, sizeof tmpdir, "%s/moec-fuzz-XXXXXX", base);
	if (!mkdtemp(tmpdir)) {
		perror(tmpdir);
		abort();
	}
	atexit(remove_tmpdir);
	return tmpdir;
}

char *
fuzz_path(char *buf, size_t n, const char *dir, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
	return buf;
}

void
fuzz_write(const char *path, const void *data, size_t size)
{
	FILE *f = fopen(path, "wb");

	if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
		perror(path);
		abort();
	}
}

void
fuzz_check_module(Module *m, const char *what)
{
	Module *m2;
	char *a, *b;
	Diag d;

	fuzz_diag(&d);
	FUZZ_CHECK(ir_verify(m, &d) == 0, "%s does not verify: %s", what, d.last);
	a = ir_print_string(m, IR_PRINT_LOC);
	m2 = ir_parse("fuzz.ir", a, strlen(a), &d);
	FUZZ_CHECK(m2, "%s: its print does not parse: %s\n%s", what, d.last, a);
	FUZZ_CHECK(ir_verify(m2, &d) == 0, "%s: its print does not verify: %s\n%s", what,
		   d.last, a);
	b = ir_print_string(m2, IR_PRINT_LOC);
	FUZZ_CHECK(strcmp(a, b) == 0, "%s: print(parse(print(m))) != print(m):\n%s---\n%s",
		   what, a, b);
	free(a);
	free(b);
	ir_free_module(m2);
}
