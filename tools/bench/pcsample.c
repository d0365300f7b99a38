/* pcsample.c: CUPTI PC sampling of one kernel (kernels serialized, sampling started and stopped
 * around each launch) and the kernel.cu line of each sampled PC, from the cubin's line info. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "jsonl.h"
#include "pcsample.h"
#include "run.h"
#include "xalloc.h"

/* Launches until WANT_SAMPLES (a line's share then has a standard error under 0.4 %), at most
 * MAX_LAUNCHES; the period keeps one launch near PER_LAUNCH samples, and no finer than
 * 2^MIN_PERIOD cycles, which CUPTI's buffers keep up with. */
enum { WANT_SAMPLES = 20000, MAX_LAUNCHES = 32, PER_LAUNCH = 200000, MIN_PERIOD = 9, COLLECT_PCS = 4096 };

static const char stall_prefix[] = "smsp__pcsamp_warps_issue_stalled_";

/* One sampled PC of one range. */
struct pc {
	uint64_t offset;
	int ours;	     /* in the target's function */
	int line;	     /* its kernel.cu line; 0 when it has none */
	uint64_t samples;
	uint64_t *by_reason; /* samples per stall reason, in CUPTI's order */
};

struct session {
	CUcontext ctx;
	const char *function;
	size_t nreasons;
	uint32_t *reason_index;
	char **reason_name;
	int *counted;	       /* the reason counts once per sample (the "_not_issued" ones repeat others) */
	/* GetData fills buf; Disable leaves what CUPTI still holds in rest, the configured buffer
	 * (one buffer for both gets no PC at all: seen on an H100, CUDA 13.0). */
	CUpti_PCSamplingData buf, rest;
	struct pc *pcs;
	size_t npcs, alloc;
	uint64_t dropped, cupti_samples, other_samples; /* CUPTI's counts, for a why when no PC came */
};

static int ends_with(const char *s, const char *end)
{
	size_t n = strlen(s), m = strlen(end);
	return n >= m && strcmp(s + n - m, end) == 0;
}

/* The name of a stall reason in the record: CUPTI's without its prefix. */
static const char *reason_key(const char *name)
{
	return strncmp(name, stall_prefix, sizeof(stall_prefix) - 1) == 0 ? name + sizeof(stall_prefix) - 1 : name;
}

/* The sampling period's exponent: a launch of median_ms on every SM near PER_LAUNCH samples. */
static uint32_t sampling_period(const struct pcsample_target *t)
{
	int sms = 0, khz = 0;
	if (cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, t->dev) != CUDA_SUCCESS ||
	    cu.cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, t->dev) != CUDA_SUCCESS)
		sms = khz = 0;
	double cycles = t->median_ms * khz * sms;
	uint32_t p = MIN_PERIOD;
	while (p < 31 && cycles / ldexp(1, (int)p) > PER_LAUNCH)
		p++;
	return p;
}

/* A buffer for COLLECT_PCS PCs of nreasons stall reasons each. */
static void buffer_init(CUpti_PCSamplingData *b, size_t nreasons)
{
	b->size = sizeof(*b);
	b->collectNumPcs = COLLECT_PCS;
	b->pPcData = xcalloc(COLLECT_PCS, sizeof(*b->pPcData));
	for (size_t k = 0; k < COLLECT_PCS; k++) {
		b->pPcData[k].size = sizeof(b->pPcData[k]);
		b->pPcData[k].stallReason = xcalloc(nreasons + 1, sizeof(CUpti_PCSamplingStallReason));
	}
}

static void buffer_release(CUpti_PCSamplingData *b)
{
	for (size_t k = 0; k < COLLECT_PCS && b->pPcData; k++)
		free(b->pPcData[k].stallReason);
	free(b->pPcData);
}

/* The stall reasons CUPTI samples, and the buffers. */
static int session_init(struct session *s, const struct pcsample_target *t, struct strbuf *why)
{
	memset(s, 0, sizeof(*s));
	s->ctx = t->ctx;
	s->function = t->function;
	CUpti_PCSamplingGetNumStallReasonsParams nr = {.size = CUpti_PCSamplingGetNumStallReasonsParamsSize};
	nr.ctx = t->ctx;
	nr.numStallReasons = &s->nreasons;
	if (cupti_failed(cupti_pc.cuptiPCSamplingGetNumStallReasons(&nr), "cuptiPCSamplingGetNumStallReasons", why))
		return -1;
	s->reason_index = xcalloc(s->nreasons + 1, sizeof(*s->reason_index));
	s->reason_name = xcalloc(s->nreasons + 1, sizeof(*s->reason_name));
	s->counted = xcalloc(s->nreasons + 1, sizeof(*s->counted));
	for (size_t k = 0; k < s->nreasons; k++)
		s->reason_name[k] = xcalloc(CUPTI_STALL_REASON_STRING_SIZE, 1);
	CUpti_PCSamplingGetStallReasonsParams sr = {.size = CUpti_PCSamplingGetStallReasonsParamsSize};
	sr.ctx = t->ctx;
	sr.numStallReasons = s->nreasons;
	sr.stallReasonIndex = s->reason_index;
	sr.stallReasons = s->reason_name;
	if (cupti_failed(cupti_pc.cuptiPCSamplingGetStallReasons(&sr), "cuptiPCSamplingGetStallReasons", why))
		return -1;
	for (size_t k = 0; k < s->nreasons; k++)
		s->counted[k] = !ends_with(s->reason_name[k], "_not_issued");
	buffer_init(&s->buf, s->nreasons);
	buffer_init(&s->rest, s->nreasons);
	return 0;
}

static void session_release(struct session *s)
{
	for (size_t k = 0; k < s->nreasons && s->reason_name; k++)
		free(s->reason_name[k]);
	free(s->reason_name);
	free(s->reason_index);
	free(s->counted);
	buffer_release(&s->buf);
	buffer_release(&s->rest);
	for (size_t k = 0; k < s->npcs; k++)
		free(s->pcs[k].by_reason);
	free(s->pcs);
}

/* Takes the PCs buffer b holds. Their functionName is never freed: CUPTI keeps each string
 * and hands it again in later collections (on an H100, CUDA 13.0, the third collection in a
 * worker named its PCs with the strings of the first two), and its documentation has it freed
 * only once every record is processed, which for a worker is its end. Freeing it after each
 * collection freed it again in a later one: the heap corruption of --metrics-every. */
static void take(struct session *s, CUpti_PCSamplingData *b)
{
	s->dropped += b->droppedSamples;
	s->cupti_samples += b->totalSamples;
	s->other_samples += b->nonUsrKernelsTotalSamples;
	for (size_t k = 0; k < b->totalNumPcs; k++) {
		const CUpti_PCSamplingPCData *d = &b->pPcData[k];
		if (s->npcs == s->alloc) {
			s->alloc = s->alloc ? 2 * s->alloc : 256;
			s->pcs = xreallocarray(s->pcs, s->alloc, sizeof(*s->pcs));
		}
		struct pc *pc = &s->pcs[s->npcs++];
		memset(pc, 0, sizeof(*pc));
		pc->offset = d->pcOffset;
		pc->ours = d->functionName && strcmp(d->functionName, s->function) == 0;
		pc->by_reason = xcalloc(s->nreasons + 1, sizeof(*pc->by_reason));
		for (size_t r = 0; r < d->stallReasonCount && r < s->nreasons; r++)
			for (size_t i = 0; i < s->nreasons; i++)
				if (s->reason_index[i] == d->stallReason[r].pcSamplingStallReasonIndex) {
					pc->by_reason[i] += d->stallReason[r].samples;
					pc->samples += s->counted[i] ? d->stallReason[r].samples : 0;
				}
	}
	b->totalNumPcs = 0;
}

/* Everything CUPTI holds of the ranges so far. */
static int drain(struct session *s, struct strbuf *why)
{
	do {
		CUpti_PCSamplingGetDataParams gd = {.size = CUpti_PCSamplingGetDataParamsSize};
		gd.ctx = s->ctx;
		gd.pcSamplingData = &s->buf;
		s->buf.remainingNumPcs = 0;
		if (cupti_failed(cupti_pc.cuptiPCSamplingGetData(&gd), "cuptiPCSamplingGetData", why)) {
			if (s->buf.hardwareBufferFull)
				strbuf_addstr(why, " (CUPTI's hardware buffer filled up)");
			return -1;
		}
		take(s, &s->buf);
	} while (s->buf.remainingNumPcs > 0);
	return 0;
}

static int configure(struct session *s, uint32_t period, struct strbuf *why)
{
	CUpti_PCSamplingConfigurationInfo info[4];
	memset(info, 0, sizeof(info));
	info[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
	info[0].attributeData.samplingPeriodData.samplingPeriod = period;
	info[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
	info[1].attributeData.collectionModeData.collectionMode = CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED;
	info[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
	info[2].attributeData.enableStartStopControlData.enableStartStopControl = 1;
	info[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
	info[3].attributeData.samplingDataBufferData.samplingDataBuffer = &s->rest;
	CUpti_PCSamplingConfigurationInfoParams cp = {.size = CUpti_PCSamplingConfigurationInfoParamsSize};
	cp.ctx = s->ctx;
	cp.numAttributes = ARRAY_SIZE(info);
	cp.pPCSamplingConfigurationInfo = info;
	return cupti_failed(cupti_pc.cuptiPCSamplingSetConfigurationAttribute(&cp), "cuptiPCSamplingSetConfigurationAttribute",
			    why);
}

/* Launches the kernel in sampled ranges until there are samples enough. Returns the launches
 * made, or -1 with why. */
static int sample(struct session *s, const struct pcsample_replay *replay, struct strbuf *why)
{
	const char *err = replay->load(replay->arg);
	int launches = 0;
	uint64_t samples = 0;
	while (!err && launches < MAX_LAUNCHES && samples < WANT_SAMPLES) {
		CUpti_PCSamplingStartParams st = {.size = CUpti_PCSamplingStartParamsSize};
		CUpti_PCSamplingStopParams sp = {.size = CUpti_PCSamplingStopParamsSize};
		st.ctx = sp.ctx = s->ctx;
		size_t before = s->npcs;
		if ((err = replay->prepare(replay->arg)))
			break;
		if (cupti_failed(cupti_pc.cuptiPCSamplingStart(&st), "cuptiPCSamplingStart", why))
			return -1;
		err = replay->launch(replay->arg);
		if (cupti_failed(cupti_pc.cuptiPCSamplingStop(&sp), "cuptiPCSamplingStop", why) || err || drain(s, why))
			break;
		launches++;
		for (size_t k = before; k < s->npcs; k++)
			samples += s->pcs[k].samples;
	}
	if (err)
		strbuf_addf(why, "the kernel's replay for PC sampling failed: %s", err);
	return why->len ? -1 : launches;
}

/* The kernel.cu line of the PC at offset in the target's function: 0 when the cubin says none
 * (no line info, or a line of another file such as a header). */
static int source_line(const struct pcsample_target *t, uint64_t offset)
{
	CUpti_GetSassToSourceCorrelationParams p = {.size = CUpti_GetSassToSourceCorrelationParamsSize};
	p.cubin = t->cubin;
	p.cubinSize = t->cubin_size;
	p.functionName = t->function;
	p.pcOffset = offset;
	if (cupti_pc.cuptiGetSassToSourceCorrelation(&p) != CUPTI_SUCCESS)
		return 0;
	const char *base = p.fileName ? strrchr(p.fileName, '/') : NULL;
	base = base ? base + 1 : p.fileName;
	int line = base && strcmp(base, run_variant_file(VARIANT_KERNEL)) == 0 ? (int)p.lineNumber : 0;
	free(p.fileName);
	free(p.dirName);
	return line;
}

static int by_line(const void *a, const void *b)
{
	const struct pc *x = a, *y = b;
	return (x->line > y->line) - (x->line < y->line);
}

static double share(uint64_t part, uint64_t whole)
{
	return whole ? round(1000.0 * (double)part / (double)whole) / 10 : 0;
}

/* The samples by kernel.cu line into m: "samples", "unmapped" and "lines". */
static void add_lines(struct session *s, const struct pcsample_target *t, cJSON *m)
{
	uint64_t total = 0, unmapped = 0;
	for (size_t k = 0; k < s->npcs; k++) {
		struct pc *pc = &s->pcs[k];
		pc->line = pc->ours && pc->samples ? source_line(t, pc->offset) : 0;
		total += pc->samples;
		unmapped += pc->line ? 0 : pc->samples;
	}
	qsort(s->pcs, s->npcs, sizeof(*s->pcs), by_line);
	cJSON *lines = cJSON_CreateArray();
	if (!lines)
		xalloc_die();
	for (size_t k = 0; k < s->npcs;) {
		size_t end = k;
		uint64_t samples = 0, by_reason[s->nreasons + 1];
		memset(by_reason, 0, sizeof(by_reason));
		for (; end < s->npcs && s->pcs[end].line == s->pcs[k].line; end++) {
			samples += s->pcs[end].samples;
			for (size_t r = 0; r < s->nreasons; r++)
				by_reason[r] += s->pcs[end].by_reason[r];
		}
		if (s->pcs[k].line && samples) {
			cJSON *line = json_object(), *stalls = json_object();
			json_add_number(line, "line", s->pcs[k].line);
			json_add_number(line, "samples", (double)samples);
			json_add_number(line, "share_pct", share(samples, total));
			for (size_t r = 0; r < s->nreasons; r++)
				if (s->counted[r] && by_reason[r])
					json_add_number(stalls, reason_key(s->reason_name[r]), (double)by_reason[r]);
			json_add(line, "stalls", stalls);
			json_append(lines, line);
		}
		k = end;
	}
	json_add_number(m, "samples", (double)total);
	json_add_number(m, "dropped", (double)s->dropped);
	json_add_number(m, "unmapped", (double)unmapped);
	json_add(m, "lines", lines);
}

/* Whether the PC sampling API could be loaded, once per process. */
static int api_ready(struct strbuf *why)
{
	static int tried;
	static struct strbuf failed;
	if (!tried) {
		tried = 1;
		strbuf_init(&failed);
		cupti_pcsampling_open(&failed);
	}
	strbuf_addstr(why, failed.buf);
	return failed.len ? -1 : 0;
}

cJSON *pcsample_collect(const struct pcsample_target *t, const struct pcsample_replay *replay)
{
	double t0 = monotonic_ms();
	cJSON *m = json_object();
	struct strbuf why;
	strbuf_init(&why);
	struct session s;
	memset(&s, 0, sizeof(s));
	uint32_t period = sampling_period(t);
	int launches = -1, enabled = 0;
	CUpti_PCSamplingEnableParams en = {.size = CUpti_PCSamplingEnableParamsSize};
	en.ctx = t->ctx;
	if (api_ready(&why) == 0 && !cupti_failed(cupti_pc.cuptiPCSamplingEnable(&en), "cuptiPCSamplingEnable", &why)) {
		enabled = 1;
		if (session_init(&s, t, &why) == 0 && configure(&s, period, &why) == 0)
			launches = sample(&s, replay, &why);
	}
	if (enabled) {
		CUpti_PCSamplingDisableParams dis = {.size = CUpti_PCSamplingDisableParamsSize};
		dis.ctx = t->ctx;
		cupti_pc.cuptiPCSamplingDisable(&dis);
		if (launches >= 0 && s.rest.pPcData)
			take(&s, &s.rest);
	}
	if (launches >= 0 && s.npcs == 0) {
		strbuf_addf(&why, "CUPTI gave no sampled PC in %d launches (its counts: %llu samples, %llu in other "
			    "kernels, %llu dropped)", launches, (unsigned long long)s.cupti_samples,
			    (unsigned long long)s.other_samples, (unsigned long long)s.dropped);
		launches = -1;
	}
	json_add_string(m, "status", launches >= 0 ? "ok" : "unavailable");
	if (launches < 0)
		json_add_string(m, "why", why.buf);
	json_add_string(m, "source", "cupti-pc-sampling");
	if (launches >= 0) {
		json_add_number(m, "sampling_period_cycles", ldexp(1, (int)period));
		json_add_number(m, "launches", launches);
		add_lines(&s, t, m);
	}
	json_add_number(m, "cost_ms", monotonic_ms() - t0);
	session_release(&s);
	strbuf_release(&why);
	return m;
}
