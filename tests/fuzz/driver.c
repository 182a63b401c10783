/*
 * driver.c — main() for the fuzz targets outside libFuzzer: feeds every
 * file named, and every file in every folder named, to
 * LLVMFuzzerTestOneInput.  This is how the saved crashes under
 * tests/fuzz/regress/<target>/ run in CI (built with gcc like everything
 * else); a case that still fails aborts the driver, and one that runs
 * longer than 30 s (libFuzzer's -timeout is 10 s, uninstrumented; this runs
 * under ASan too) fails it, so a hang found once cannot come back unseen.
 *
 *	fuzz_regress_<target> FILE|DIR ...
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

enum { TIMEOUT_S = 30 };

static int nrun;
static const char *current;

static void
timeout(int sig)
{
	static const char msg[] = ": took longer than 30 s: a hang\n";
	ssize_t r;	/* nothing to do if stderr is gone: the exit status says it */

	(void)sig;
	r = write(2, current, strlen(current));
	r = write(2, msg, sizeof msg - 1);
	(void)r;
	_exit(1);
}

static void
run_file(const char *path)
{
	Diag d;
	size_t len;
	char *buf;

	diag_init(&d, stderr);
	if (!(buf = file_read(path, &len, &d)))
		exit(2);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "fuzz: %s (%zu bytes)\n", path, len);
	current = path;
	alarm(TIMEOUT_S);
	LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
	alarm(0);
	free(buf);
	nrun++;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
run_dir(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0;

	if (!dp) {
		perror(dir);
		exit(2);
	}
	while ((e = readdir(dp)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		names = xrealloc(names, (n + 1) * sizeof *names);
		names[n++] = file_join(dir, e->d_name);
	}
	closedir(dp);
	qsort(names, n, sizeof *names, cmp_str);
	for (size_t i = 0; i < n; i++) {
		if (file_is_dir(names[i]))
			run_dir(names[i]);
		else
			run_file(names[i]);
		free(names[i]);
	}
	free(names);
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR ...\n", argv[0]);
		return 2;
	}
	signal(SIGALRM, timeout);
	for (int i = 1; i < argc; i++) {
		if (file_is_dir(argv[i]))
			run_dir(argv[i]);
		else
			run_file(argv[i]);
	}
	printf("%s: %d inputs, no failure\n", argv[0], nrun);
	return 0;
}
