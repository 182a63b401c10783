/*
 * tuning.c — the measured tile choice: a versioned text table mapping
 * (target, GEMM key) to a tile variant, which `moec compile --tuning=FILE`
 * prefers to the heuristic (program.c).  TensorRT's timing cache is the
 * model: a key names the problem, not the kernel, so one table serves every
 * bundle with GEMMs of that class.  docs/codegen.md has the format.
 *
 *	moec-tuning 2
 *	# target key variant [us=MEDIAN]
 *	sm_90a dense.m1.n14336.k4096.bf16.bf16.nk.t2-16 16x128x128.w1x4.s5.k2 us=38.5
 *
 * Key: dense or gE (E experts), rows per token, N, K, A and B types, B's
 * layout, and a range of T: a T bucket (version 2: 1, 2-16, 17-64, 65-256,
 * then x4, the last one of a bundle cut at its max_tokens) or the range a
 * launch of the heuristic's plan runs for (t1-64, t65-MAX; all version 1
 * had).  Variant: tile bm x bn x bk, warps, stages, split-K slices, and
 * `.pN` for stream-K over N CTAs, `.pN.uU` for dynamic stream-K (U units a
 * CTA handed out by an atomic counter: GemmSpec.units), `.pN.tXwW` for stream-K whose
 * last X CTAs take runs 1/W of the others' (GemmSpec.tail); `.bN` after `.pers`: tiles in bands of N row
 * tiles (GemmSpec.bands, dense); `.lN` last: a launch bound of N CTAs an SM.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

#define TUNING_VERSION 2	/* 1: keys by launch range only; read as it was */

struct CgTuning {
	CgTuningEntry *e;
	int n, cap;
	char *path;
	int version;
};

void
cg_tuning_bucket(int64_t t, int64_t *lo, int64_t *hi)
{
	int64_t h = 1, l = 1;

	while (h < t) {
		l = h + 1;
		h = h == 1 ? 16 : h > INT64_MAX / 4 ? INT64_MAX : h * 4;
	}
	*lo = l, *hi = h;
}

int
cg_gemm_key(const GemmSpec *s, int64_t tlo, int64_t thi, char *buf, size_t n)
{
	char kind[16];

	if (s->groups)
		snprintf(kind, sizeof kind, "g%d", s->groups);
	else
		snprintf(kind, sizeof kind, "dense");
	return snprintf(buf, n, "%s.m%d.n%lld.k%lld.%s.%s.%s.t%lld-%lld", kind,
			s->m_per_t > 0 ? s->m_per_t : 1, (long long)s->N, (long long)s->K,
			dtype_name(s->a_dt), dtype_name(s->b_dt), s->b_layout == CG_B_KN ? "kn" : "nk",
			(long long)tlo, (long long)thi);
}

int
cg_variant_print(const CgVariant *v, char *buf, size_t n)
{
	int k = snprintf(buf, n, "%dx%dx%d.w%dx%d.s%d.k%d", v->bm, v->bn, v->bk, v->wm, v->wn,
			 v->stages, v->split > 1 ? v->split : 1);

	if (v->stream > 0 && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, ".p%d", v->stream);
	if (v->stream > 0 && v->units > 0 && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, ".u%d", v->units);
	if (v->stream > 0 && v->tail > 0 && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, ".t%dw%d", v->tail, v->tail_w);
	if (v->cluster == 2 && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, ".c2%c", v->cluster_b ? 'b' : 'a');
	if (v->cluster == 4 && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, ".c4");
	if (v->wide && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, ".wide");
	if (v->persistent && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, ".pers");
	if (v->bands > 0 && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, ".b%d", v->bands);
	if (v->direct && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, ".d");
	if (v->f8whole && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, ".fw");
	if (v->minctas > 0 && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, ".l%d", v->minctas);
	if (v->tma_store > 0 && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, ".ts%d", v->tma_store);
	return k;
}

int
cg_variant_parse(const char *s, CgVariant *v)
{
	char tail, body[64];
	size_t len = strlen(s);

	memset(v, 0, sizeof *v);
	if (len >= sizeof body)
		return -1;
	memcpy(body, s, len + 1);
	char *lb = strrchr(body, '.');
	if (lb && lb[1] == 't' && lb[2] == 's') {	/* C by TMA stores: buffers a warpgroup (the last word) */
		if (lb[3] < '1' || lb[3] > '2' || lb[4])
			return -1;
		v->tma_store = lb[3] - '0';
		len = (size_t)(lb - body);
		*lb = 0;
		lb = strrchr(body, '.');
	}
	if (lb && lb[1] == 'l') {	/* a launch bound: CTAs an SM (the last word) */
		char *end;
		long m = strtol(lb + 2, &end, 10);
		if (end == lb + 2 || *end || m < 1 || m > 32)
			return -1;
		v->minctas = (int)m;
		len = (size_t)(lb - body);
		*lb = 0;
	}
	if (len > 3 && strcmp(body + len - 3, ".fw") == 0) {	/* FP8: whole k-tiles */
		v->f8whole = 1;
		len -= 3;
		body[len] = 0;
	}
	if (len > 2 && strcmp(body + len - 2, ".d") == 0) {	/* direct quantised B */
		v->direct = 1;
		body[len -= 2] = 0;
	}
	lb = strrchr(body, '.');
	if (lb && lb[1] == 'b') {	/* bands of row tiles */
		char *end;
		long b = strtol(lb + 2, &end, 10);
		if (end == lb + 2 || *end || b < 1 || b > 1024)
			return -1;
		v->bands = (int)b;
		len = (size_t)(lb - body);
		*lb = 0;
	}
	if (len > 5 && strcmp(body + len - 5, ".pers") == 0) {	/* persistent, one CTA an SM */
		v->persistent = 1;
		body[len -= 5] = 0;
	}
	if (len > 5 && strcmp(body + len - 5, ".wide") == 0) {	/* 64x256 warpgroup tiles */
		v->wide = 1;
		body[len -= 5] = 0;
	}
	if (len > 4 && (strcmp(body + len - 4, ".c2a") == 0 || strcmp(body + len - 4, ".c2b") == 0)) {
		v->cluster = 2;					/* clusters of 2, sharing A or B */
		v->cluster_b = body[len - 1] == 'b';
		body[len -= 4] = 0;
	} else if (len > 3 && strcmp(body + len - 3, ".c4") == 0) {
		v->cluster = 4;					/* clusters of 4, 2x2 sharing A and B */
		body[len -= 3] = 0;
	}
	char *tl = strstr(body, ".t");	/* stream-K with a tail: short runs, a long run's weight */
	if (tl) {
		if (sscanf(tl, ".t%dw%d%c", &v->tail, &v->tail_w, &tail) != 2 || v->tail < 1 || v->tail_w < 2 ||
		    v->tail_w > 64)
			return -1;
		*tl = 0;
	}
	char *u = strstr(body, ".u");	/* dynamic stream-K: units a CTA */
	if (u) {
		if (sscanf(u, ".u%d%c", &v->units, &tail) != 1 || v->units < 1 || v->units > 64)
			return -1;
		*u = 0;
	}
	int n = sscanf(body, "%dx%dx%d.w%dx%d.s%d.k%d.p%d%c", &v->bm, &v->bn, &v->bk, &v->wm, &v->wn,
		       &v->stages, &v->split, &v->stream, &tail);

	if (n != 7 && n != 8)
		return -1;
	if (n == 8 && (v->stream < 1 || v->stream > 65535 || v->split > 1))
		return -1;	/* stream-K over 1..65535 CTAs, never with split-K */
	if (v->tail && (n != 8 || v->units || v->tail >= v->stream))
		return -1;	/* a tail: static stream-K, fewer short runs than CTAs */
	if (v->persistent && (n == 8 || v->cluster || v->split > 1))
		return -1;	/* clusters are persistent already; not with stream- or split-K */
	if (v->bm < 16 || v->bm > 256 || v->bn < 16 || v->bn > 512 || v->bk < 16 || v->bk > 512 ||
	    v->wm < 1 || v->wm > 16 || v->wn < 1 || v->wn > 16 || v->stages < 2 || v->stages > 5 ||
	    v->split < 1 || v->split > 64)
		return -1;
	char back[64];
	cg_variant_print(v, back, sizeof back);
	return strcmp(back, s) ? -1 : 0;	/* one spelling */
}

void
cg_variant_of(const GemmSpec *s, CgVariant *v)
{
	*v = (CgVariant){s->bm, s->bn, s->bk, s->warps_m, s->warps_n, s->stages,
			 s->split_k > 1 ? s->split_k : 1, s->sched == CG_SCHED_STREAM ? s->ctas : 0,
			 s->sched == CG_SCHED_STREAM ? s->units : 0, s->bq.direct,
			 s->cluster == 2 || s->cluster == 4 ? s->cluster : 0, s->cluster == 2 && s->cluster_b, s->wg_wide != 0,
			 s->f8.whole, s->mainloop == CG_MAINLOOP_MMA ? s->min_ctas : 0,
			 0, s->bands, s->tma_store, 0, 0};	/* .pers: a table's request only (the spec's own schedule stays); the vec
				 * mainloop's bound is its plan's own, not a tile's */
	if (s->sched == CG_SCHED_STREAM && s->tail > 0)
		v->tail = s->tail, v->tail_w = s->tail_w;
}

void
cg_variant_apply(const CgVariant *v, GemmSpec *s)
{
	s->bm = v->bm, s->bn = v->bn, s->bk = v->bk;
	s->warps_m = v->wm, s->warps_n = v->wn, s->stages = v->stages;
	s->split_k = v->split > 1 ? v->split : 0;
	s->bq.direct = v->direct;
	s->wg_wide = v->wide;
	s->cluster = v->cluster;
	s->cluster_b = v->cluster_b;
	s->f8.whole = v->f8whole;
	s->units = v->stream > 0 ? v->units : 0;
	s->tail = v->stream > 0 ? v->tail : 0;
	s->tail_w = v->stream > 0 ? v->tail_w : 0;
	s->min_ctas = v->minctas;
	s->bands = v->bands;
	s->tma_store = v->tma_store;
	if (v->stream > 0)
		s->sched = CG_SCHED_STREAM, s->ctas = v->stream;
	else if (v->cluster >= 2 || v->persistent)	/* a CTA an SM (an H100 SXM's or H200's 132) */
		s->sched = CG_SCHED_PERSISTENT, s->ctas = CG_CLUSTER_CTAS;
	else if (s->sched == CG_SCHED_STREAM)
		s->sched = CG_SCHED_TILES;
	if (s->sched != CG_SCHED_STREAM || s->units)
		s->sk_unroll = 0;	/* the planner's unrolled loop is static stream-K's alone */
}

static int
bad(CgTuning *t, int line, int col, Diag *d, const char *what, const char *word)
{
	diag_error(d, loc_line(t->path, line, col), "%s '%s'", what, word);
	return -1;
}

/* One entry line: TARGET KEY VARIANT [us=F]. */
static int
entry(CgTuning *t, char **w, int nw, int line, Diag *d)
{
	CgTuningEntry e = {0};
	CgTarget tg = {w[0], NULL, 3};
	Diag quiet;
	char *end;

	diag_init(&quiet, NULL);
	if (nw < 3 || nw > 4) {
		diag_error(d, loc_line(t->path, line, 1), "expected 'TARGET KEY VARIANT [us=MEDIAN]', "
			   "got %d words", nw);
		return -1;
	}
	if (cg_target_check(&tg, &quiet))	/* emu too: the emulator's plans, for tests */
		return bad(t, line, 1, d, "unknown target", w[0]);
	if (strchr(w[1], '=') || strlen(w[1]) > 200)
		return bad(t, line, 1, d, "bad key", w[1]);
	if (cg_variant_parse(w[2], &e.v))
		return bad(t, line, 1, d, "bad variant (want BMxBNxBK.wMxN.sS.kK[.pN], e.g. "
			   "128x256x64.w2x4.s4.k1)", w[2]);
	e.us = -1;
	if (nw == 4) {
		errno = 0;
		if (strncmp(w[3], "us=", 3) || !w[3][3] || (e.us = strtod(w[3] + 3, &end), *end) ||
		    errno || !(e.us >= 0))
			return bad(t, line, 1, d, "bad timing (want us=MEDIAN)", w[3]);
	}
	if (cg_tuning_find(t, w[0], w[1]))
		return bad(t, line, 1, d, "a second entry for", w[1]);
	e.arch = xstrdup(w[0]);
	e.key = xstrdup(w[1]);
	e.line = line;
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 16;
		t->e = xrealloc(t->e, sizeof *t->e * (size_t)t->cap);
	}
	t->e[t->n++] = e;
	return 0;
}

CgTuning *
cg_tuning_read(const char *path, Diag *d)
{
	CgTuning *t = xcalloc(1, sizeof *t);
	FILE *f = fopen(path, "r");
	char buf[1024], *w[8];
	int line = 0, rc = 0, header = 0;

	t->path = xstrdup(path);
	if (!f) {
		diag_error(d, loc_file(path), "cannot open the tuning table: %s", strerror(errno));
		cg_tuning_free(t);
		return NULL;
	}
	while (!rc && fgets(buf, sizeof buf, f)) {
		int nw = 0;
		line++;
		if (!strchr(buf, '\n') && !feof(f)) {
			rc = bad(t, line, 1, d, "line longer than", "1023 bytes");
			break;
		}
		for (char *s = strtok(buf, " \t\r\n"); s && nw < 8; s = strtok(NULL, " \t\r\n"))
			w[nw++] = s;
		if (!nw || w[0][0] == '#')
			continue;
		if (!header) {
			header = 1;
			if (nw != 2 || strcmp(w[0], "moec-tuning"))
				rc = bad(t, line, 1, d, "expected 'moec-tuning 2' (or 1), got", w[0]);
			else if (strcmp(w[1], "1") && strcmp(w[1], "2"))
				rc = bad(t, line, 13, d, "tuning table version is not 1 or 2 (this moec "
					 "reads 1: keys by launch range, 2: by T bucket or launch range):", w[1]);
			else
				t->version = w[1][0] - '0';
			continue;
		}
		rc = entry(t, w, nw, line, d);
	}
	if (!rc && ferror(f))
		rc = bad(t, line, 1, d, "read error", strerror(errno));
	if (!rc && !header)
		rc = bad(t, line ? line : 1, 1, d, "expected 'moec-tuning 2' (or 1), got", "an empty file");
	fclose(f);
	if (rc) {
		cg_tuning_free(t);
		return NULL;
	}
	return t;
}

const CgTuningEntry *
cg_tuning_find(const CgTuning *t, const char *arch, const char *key)
{
	for (int i = 0; t && i < t->n; i++)
		if (!strcmp(t->e[i].arch, arch) && !strcmp(t->e[i].key, key))
			return &t->e[i];
	return NULL;
}

int
cg_tuning_version(const CgTuning *t)
{
	return t ? t->version : 0;
}

int
cg_tuning_count(const CgTuning *t)
{
	return t ? t->n : 0;
}

const char *
cg_tuning_path(const CgTuning *t)
{
	return t ? t->path : "";
}

void
cg_tuning_free(CgTuning *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->n; i++) {
		free((char *)t->e[i].arch);
		free((char *)t->e[i].key);
	}
	free(t->e);
	free(t->path);
	free(t);
}
