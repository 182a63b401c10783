/*
 * check_outfile.c — util/outfile.c: outputs written atomically (the old file
 * stays whole until the rename, an error leaves no temporary), the checks
 * made before work, and the mapping of model-chosen names to file names.
 */
#include <check.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static char dir[64];

static void
make_dir(void)
{
	strcpy(dir, "/tmp/moec-out-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* Entries of dir other than . and .. */
static int
entries(void)
{
	DIR *dp = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(dp);
	while ((e = readdir(dp)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(dp);
	return n;
}

static void
remove_dir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_outfile_old_file_stays_until_commit)
{
	char *path;
	size_t n;
	char *text;
	FileOut o;
	FILE *f;
	Diag d;

	make_dir();
	diag_init(&d, NULL);
	path = file_join(dir, "x.txt");
	ck_assert_int_eq(file_write(path, "old", 3, &d), 0);
	f = file_create(&o, path, &d);
	ck_assert_ptr_nonnull(f);
	fputs("new contents", f);
	fflush(f);
	/* a reader meanwhile sees the old file whole */
	text = file_read(path, &n, &d);
	ck_assert_str_eq(text, "old");
	free(text);
	ck_assert_int_eq(entries(), 2);	/* x.txt and the temporary */
	ck_assert_int_eq(file_commit(&o, &d), 0);
	text = file_read(path, &n, &d);
	ck_assert_str_eq(text, "new contents");
	free(text);
	ck_assert_int_eq(entries(), 1);
	/* discarding leaves the old file and removes the temporary */
	f = file_create(&o, path, &d);
	fputs("never", f);
	file_discard(&o);
	text = file_read(path, &n, &d);
	ck_assert_str_eq(text, "new contents");
	free(text);
	ck_assert_int_eq(entries(), 1);
	free(path);
	remove_dir();
}
END_TEST

START_TEST(test_outfile_errors_name_the_path)
{
	FileOut o;
	FILE *f;
	Diag d;
	char *path;

	diag_init(&d, NULL);
	/* a device is written in place, and its write error is reported */
	f = file_create(&o, "/dev/full", &d);
	ck_assert_ptr_nonnull(f);
	fputs("x", f);
	ck_assert_int_eq(file_commit(&o, &d), -1);
	ck_assert_str_eq(d.last, "/dev/full: write error: No space left on device");
	ck_assert_int_eq(file_write("/dev/full", "x", 1, &d), -1);
	/* a folder, a missing folder, a path under a file */
	make_dir();
	ck_assert_ptr_null(file_create(&o, dir, &d));
	ck_assert_ptr_nonnull(strstr(d.last, "cannot write: it is a folder"));
	ck_assert_int_eq(file_check_output(dir, &d), -1);
	ck_assert_int_eq(file_check_output("/no/such/dir/x", &d), -1);
	ck_assert_str_eq(d.last, "/no/such/dir/x: cannot write: the folder '/no/such/dir' does not exist");
	path = file_join(dir, "file");
	ck_assert_int_eq(file_write(path, "", 0, &d), 0);
	free(path);
	path = file_join(dir, "file/x");
	ck_assert_int_eq(file_check_output(path, &d), -1);
	ck_assert_int_eq(file_make_dir(path, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "Not a directory"));
	ck_assert_ptr_null(file_create(&o, path, &d));
	free(path);
	ck_assert_int_eq(file_check_output("/proc/x", &d), -1);
	/* nothing was left behind by the probes or the failures */
	ck_assert_int_eq(entries(), 1);
	path = file_join(dir, "new");
	ck_assert_int_eq(file_check_output(path, &d), 0);
	ck_assert_int_eq(file_make_dir(path, &d), 0);
	ck_assert(file_is_dir(path));
	ck_assert_int_eq(file_make_dir(path, &d), 0);	/* it exists: fine */
	ck_assert(file_same(path, dir) == 0);
	ck_assert(file_same(path, path));
	free(path);
	remove_dir();
}
END_TEST

START_TEST(test_outfile_safe_names)
{
	static const char *const map[][2] = {
		{"y", "y"},
		{"Identity:0", "Identity_0"},
		{"out/0", "out_0"},
		{"../../etc/x", "_._.._etc_x"},
		{".hidden", "_hidden"},
		{"..", "_."},
		{"", "_"},
		{"a b\n\tc", "a_b__c"},
		{"\xc3\xa9t\xc3\xa9", "__t__"},
		{"x.npy", "x.npy"},
	};
	char buf[256], big[400];

	for (size_t i = 0; i < NELEM(map); i++) {
		file_safe_name(buf, sizeof buf, map[i][0]);
		ck_assert_str_eq(buf, map[i][1]);
	}
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = 0;
	file_safe_name(buf, sizeof buf, big);
	ck_assert_uint_eq(strlen(buf), 200);
	file_safe_name(buf, 4, "abcdef");
	ck_assert_str_eq(buf, "abc");
}
END_TEST

/* A process stopped by a signal while writing leaves no temporary behind,
 * and still dies of that signal (the handler re-raises it). */
START_TEST(test_outfile_signal_removes_temporary)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};

	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
		char *path;
		int status;
		pid_t pid;

		make_dir();
		path = file_join(dir, "x.moeb");
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			FileOut o, o2;
			Diag d;
			char *p2 = file_join(dir, "y.moeb");

			/* as in moec: the default action (check's runner handles
			 * SIGTERM and SIGINT itself, for the whole group) */
			signal(sigs[i], SIG_DFL);
			diag_init(&d, NULL);
			if (!file_create(&o, path, &d) || !file_create(&o2, p2, &d))
				_exit(3);
			fputs("half", o.f);
			fflush(o.f);
			raise(sigs[i]);
			_exit(4);	/* not reached */
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert(WIFSIGNALED(status));
		ck_assert_int_eq(WTERMSIG(status), sigs[i]);
		ck_assert_int_eq(entries(), 0);
		free(path);
		remove_dir();
	}
}
END_TEST

Suite *
outfile_suite(void)
{
	Suite *s = suite_create("outfile");
	TCase *tc = tcase_create("outfile");

	tcase_add_test(tc, test_outfile_old_file_stays_until_commit);
	tcase_add_test(tc, test_outfile_errors_name_the_path);
	tcase_add_test(tc, test_outfile_safe_names);
	tcase_add_test(tc, test_outfile_signal_removes_temporary);
	suite_add_tcase(s, tc);
	return s;
}
