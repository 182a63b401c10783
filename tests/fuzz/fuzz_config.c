/*
 * fuzz_config.c — the Hugging Face config.json reader.  Each input is
 * written as config.json into a temporary folder and imported twice: with
 * synthetic weights, and with real ones, from the tests/fixtures/hf folder
 * of the same model_type (its safetensors symlinked beside the config), so
 * a mutated config meets weights that no longer match it.  Whatever
 * imports must verify and print back to the same text.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "frontend.h"
#include "fuzz.h"

#ifndef MOEC_SOURCE_DIR
#define MOEC_SOURCE_DIR "."
#endif

typedef struct {
	char type[64];		/* model_type of the fixture */
	char config[1100];	/* where the fuzzed config.json goes */
} Fixture;

static Fixture fix[32];
static int nfix;
static char synth[1100];

static void
link_weights(const char *src, const char *dst)
{
	DIR *dp = opendir(src);
	struct dirent *e;
	char a[2048], b[2048];

	if (!dp)
		return;
	while ((e = readdir(dp)) != NULL) {
		if (!strstr(e->d_name, ".safetensors"))
			continue;
		snprintf(a, sizeof a, "%s/%s", src, e->d_name);
		snprintf(b, sizeof b, "%s/%s", dst, e->d_name);
		if (symlink(a, b))
			perror(b);
	}
	closedir(dp);
}

static void
add_fixture(const char *tmp, const char *name)
{
	char src[1024], path[2048], dst[1024];
	size_t len;
	char *text;
	cJSON *j, *t;
	Diag d;

	snprintf(src, sizeof src, "%s/tests/fixtures/hf/%s", MOEC_SOURCE_DIR, name);
	snprintf(path, sizeof path, "%s/config.json", src);
	diag_init(&d, NULL);
	if (nfix == (int)NELEM(fix) || !(text = file_read(path, &len, &d)))
		return;
	j = cJSON_ParseWithLength(text, len);
	t = cJSON_GetObjectItemCaseSensitive(j, "model_type");
	if (cJSON_IsString(t) && strlen(t->valuestring) < sizeof fix[0].type) {
		snprintf(dst, sizeof dst, "%s/%s", tmp, name);
		mkdir(dst, 0700);
		link_weights(src, dst);
		strcpy(fix[nfix].type, t->valuestring);
		snprintf(fix[nfix].config, sizeof fix[nfix].config, "%s/config.json", dst);
		nfix++;
	}
	cJSON_Delete(j);
	free(text);
}

static void
setup(void)
{
	const char *tmp = fuzz_tmpdir();
	char dir[1024];
	DIR *dp;
	struct dirent *e;

	snprintf(dir, sizeof dir, "%s/tests/fixtures/hf", MOEC_SOURCE_DIR);
	if ((dp = opendir(dir)) != NULL) {
		while ((e = readdir(dp)) != NULL)
			if (e->d_name[0] != '.')
				add_fixture(tmp, e->d_name);
		closedir(dp);
	}
	snprintf(dir, sizeof dir, "%s/synthetic", tmp);
	mkdir(dir, 0700);
	snprintf(synth, sizeof synth, "%s/config.json", dir);
}

/* The fixture folder for this config's model_type, or NULL. */
static const char *
fixture_for(const uint8_t *data, size_t size)
{
	cJSON *j = cJSON_ParseWithLength((const char *)data, size), *t;
	const char *path = NULL;

	t = cJSON_GetObjectItemCaseSensitive(j, "model_type");
	for (int i = 0; i < nfix && cJSON_IsString(t); i++)
		if (strcmp(fix[i].type, t->valuestring) == 0) {
			path = fix[i].config;
			break;
		}
	cJSON_Delete(j);
	return path;
}

static void
import(const char *path, const uint8_t *data, size_t size, int synthetic)
{
	FeOpts o;
	Module *m;
	Diag d;

	fuzz_write(path, data, size);
	fuzz_diag(&d);
	fe_default_opts(&o);
	o.synthetic = synthetic;
	o.seed = 1;
	o.max_bytes = (int64_t)1 << 26;
	if ((m = cfg_import(path, &o, &d)) != NULL) {
		fuzz_check_module(m, synthetic ? "the synthetic import" : "the import");
		ir_free_module(m);
	}
	unlink(path);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *real;

	if (!synth[0])
		setup();
	import(synth, data, size, 1);
	if ((real = fixture_for(data, size)) != NULL)
		import(real, data, size, 0);
	return 0;
}
