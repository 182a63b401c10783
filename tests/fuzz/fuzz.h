/*
 * fuzz.h — what the fuzz targets share.  Each fuzz_<target>.c defines the
 * libFuzzer entry point LLVMFuzzerTestOneInput; with MOEC_FUZZ=ON it links
 * against libFuzzer (clang), and in the normal build against driver.c, a
 * main() that feeds files and folders to it (the regression tests).
 *
 * A target returns 0 for any input the reader rejects with a diagnostic;
 * a property that must hold for every accepted input (it verifies, it
 * prints and parses back to the same text) fails with FUZZ_CHECK, which
 * aborts so that libFuzzer saves the input.
 */
#ifndef MOEC_FUZZ_H
#define MOEC_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                  \
	do {                                                                   \
		if (!(cond))                                                   \
			fuzz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);     \
	} while (0)
_Noreturn void fuzz_fail(const char *file, int line, const char *cond,
			 const char *fmt, ...);

/* A Diag that prints only when FUZZ_VERBOSE is set (reproducing a case). */
void fuzz_diag(Diag *d);
/* A private temporary folder, made on first use, removed at exit. */
const char *fuzz_tmpdir(void);
/* dir/name, in a static buffer per call site: copy if kept. */
char *fuzz_path(char *buf, size_t n, const char *dir, const char *name);
/* Write (or replace) a file; dies if it cannot. */
void fuzz_write(const char *path, const void *data, size_t size);

/* What every imported module must do: verify, print (with locations), and
 * print back to the same text after a parse, which verifies too. */
struct Module;
void fuzz_check_module(struct Module *m, const char *what);

#endif
