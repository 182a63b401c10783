/*
 * main.c — the one Check runner.  Every tests/unit/check_<module>.c exports
 * Suite *<module>_suite(void); CMake lists them in suites.inc.
 *
 *	check_moec [SUITE...]     run all suites, or only those named
 *	CK_RUN_CASE=CASE check_moec SUITE   one test case (ctest's unit_SUITE.CASE)
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUITE(n) Suite *n##_suite(void);
#include "suites.inc"
#undef SUITE

static const struct {
	const char *name;
	Suite *(*make)(void);
} suites[] = {
#define SUITE(n) {#n, n##_suite},
#include "suites.inc"
#undef SUITE
	{NULL, NULL},
};

static int
wanted(const char *name, int argc, char **argv)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return 1;
	return 0;
}

int
main(int argc, char **argv)
{
	SRunner *sr = NULL;
	int nfail, nrun;

	for (int i = 0; suites[i].name; i++) {
		if (!wanted(suites[i].name, argc, argv))
			continue;
		if (!sr)
			sr = srunner_create(suites[i].make());
		else
			srunner_add_suite(sr, suites[i].make());
	}
	if (!sr)
		return 2;
	srunner_run_all(sr, CK_NORMAL);
	nfail = srunner_ntests_failed(sr);
	nrun = srunner_ntests_run(sr);
	srunner_free(sr);
	if (nrun == 0) {	/* CK_RUN_CASE naming no case of these suites */
		fprintf(stderr, "check_moec: no test ran (CK_RUN_CASE=%s)\n",
			getenv("CK_RUN_CASE") ? getenv("CK_RUN_CASE") : "");
		return 2;
	}
	return nfail ? 1 : 0;
}
