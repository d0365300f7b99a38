/* metrics.c: hardware metrics of one kernel through CUPTI's range profiler (one range, the
 * kernel's launch, replayed once per pass the metrics need) and its occupancy from the driver. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "jsonl.h"
#include "metrics.h"
#include "xalloc.h"

/* Each figure of the record and the CUPTI metrics it may come from: the first alternative
 * the chip has wins; "a+b" is the sum of two metrics. tools/bench/README.md says what each
 * one means; keep the two in step. */
static const struct metric_def {
	const char *key;
	const char *alt[2];
} metric_defs[] = {
	{"sm_throughput_pct", {"sm__throughput.avg.pct_of_peak_sustained_elapsed"}},
	{"dram_throughput_pct",
	 {"dram__throughput.avg.pct_of_peak_sustained_elapsed", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"}},
	{"memory_throughput_pct", {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"}},
	{"achieved_occupancy_pct", {"sm__warps_active.avg.pct_of_peak_sustained_active"}},
	{"l1_hit_rate_pct", {"l1tex__t_sector_hit_rate.pct"}},
	{"l2_hit_rate_pct", {"lts__t_sector_hit_rate.pct"}},
	{"shared_bank_conflicts",
	 {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum+l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
	  "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"}},
	{"shared_wavefronts", {"l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"}},
	{"tensor_pipe_pct",
	 {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
	  "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"}},
	{"fma_pipe_pct",
	 {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active"}},
	{"sfu_pipe_pct", {"sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"}},
	{"global_atomics",
	 {"l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum+l1tex__t_requests_pipe_lsu_mem_global_op_red.sum"}},
	{"instructions_issued", {"smsp__inst_issued.sum"}},
	{"ipc", {"sm__inst_executed.avg.per_cycle_active"}},
	{"dram_bytes", {"dram__bytes.sum"}},
	{"duration_us", {"gpu__time_duration.sum"}}, /* ns, scaled below */
};

/* The warp stall reasons, each "stalls.REASON" from smsp__warp_issue_stalled_REASON_per_warp_active.pct. */
static const char *const stall_reasons[] = {
	"long_scoreboard", "barrier",	 "mio_throttle", "short_scoreboard", "math_pipe_throttle", "wait",
	"not_selected",	   "lg_throttle", "selected",	  "no_instruction",   "dispatch_stall",	    "drain",
	"imc_miss",	   "membar",	  "branch_resolving", "sleeping",	     "tex_throttle",	    "misc",
};

enum { NMETRICS = ARRAY_SIZE(metric_defs) + ARRAY_SIZE(stall_reasons), MAX_PASSES = 200 };

/* One figure once the chip is known: which CUPTI metrics make it, or why none can. */
struct metric {
	char *key;	    /* "ipc", "stalls.barrier" */
	char *alt[2];	    /* as in metric_defs */
	int comp[2];	    /* indexes in prof.names of its metrics (comp[1] -1 for one) */
	char *missing;	    /* why the chip has none of the alternatives; NULL when comp is set */
};

/* The profiler, set up once per process for its GPU. */
static struct {
	int tried;			 /* profiler_ready ran */
	struct strbuf why;		 /* why the profiler cannot be used; empty when it can */
	char chip[64];
	CUpti_Profiler_Host_Object *host;
	uint8_t *config;		 /* the config image: which counters each pass collects */
	size_t config_size, passes;
	const char *names[2 * NMETRICS]; /* every CUPTI metric configured */
	size_t nnames;
	struct metric metrics[NMETRICS];
} prof;

/* ---------------------------------------------------------------- occupancy */

/* Theoretical occupancy from the driver's occupancy calculator, and what limits it: the
 * blocks per multiprocessor each resource allows, the smallest naming the limiter. These
 * need no counters, so they are there even when the profiler is not. */
static void add_occupancy(const struct metrics_target *t, cJSON *values, cJSON *unavailable)
{
	int threads = (int)(t->block[0] * t->block[1] * t->block[2]), blocks = 0, regs = 0, smem_static = 0;
	int max_threads = 0, max_blocks = 0, regs_sm = 0, smem_sm = 0, smem_reserved = 0;
	if (cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, t->function, threads, t->dynamic_smem) != CUDA_SUCCESS ||
	    cu.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, t->function) != CUDA_SUCCESS ||
	    cu.cuFuncGetAttribute(&smem_static, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, t->function) != CUDA_SUCCESS ||
	    cu.cuDeviceGetAttribute(&max_threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, t->dev) != CUDA_SUCCESS ||
	    cu.cuDeviceGetAttribute(&max_blocks, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, t->dev) != CUDA_SUCCESS ||
	    cu.cuDeviceGetAttribute(&regs_sm, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, t->dev) != CUDA_SUCCESS ||
	    cu.cuDeviceGetAttribute(&smem_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, t->dev) != CUDA_SUCCESS ||
	    cu.cuDeviceGetAttribute(&smem_reserved, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, t->dev) != CUDA_SUCCESS ||
	    threads <= 0 || max_threads < 32) {
		const char *why = "the CUDA driver's occupancy calculator failed";
		json_add_string(unavailable, "theoretical_occupancy_pct", why);
		json_add_string(unavailable, "occupancy_limiter", why);
		return;
	}
	int warps = (threads + 31) / 32, max_warps = max_threads / 32;
	/* Registers go to warps in units of 256, and each of the 4 schedulers has a quarter of them. */
	int regs_per_warp = (regs * 32 + 255) / 256 * 256;
	int warps_by_regs = regs_per_warp ? regs_sm / 4 / regs_per_warp * 4 : max_warps;
	/* Shared memory goes to blocks in units of 128 bytes, each with the driver's reserve. */
	long smem_block = ((long)smem_static + (long)t->dynamic_smem + smem_reserved + 127) / 128 * 128;
	static const char *const names[] = {"registers", "shared_memory", "threads", "blocks"};
	/* At the largest carveout the kernel may get: the driver may choose a smaller one for a
	 * launch that cannot use more (Nsight Compute reports that one). */
	long by_smem = smem_sm / smem_block < max_blocks ? smem_sm / smem_block : max_blocks;
	long limits[] = {warps_by_regs / warps, by_smem, max_warps / warps, max_blocks};
	cJSON *by = json_object();
	size_t limiter = 0;
	for (size_t k = 0; k < ARRAY_SIZE(limits); k++) {
		json_add_number(by, names[k], (double)limits[k]);
		if (limits[k] < limits[limiter])
			limiter = k;
	}
	double pct = 100.0 * blocks * warps / max_warps;
	json_add_number(values, "theoretical_occupancy_pct", pct);
	/* A kernel at the multiprocessor's full warp count is limited by nothing. */
	json_add(values, "occupancy_limiter", pct >= 100 ? cJSON_CreateNull() : cJSON_CreateString(names[limiter]));
	json_add_number(values, "blocks_per_sm", blocks);
	json_add(values, "blocks_per_sm_by", by);
}

/* ---------------------------------------------------------------- the profiler, once */

/* Whether name's base (the part before the first '.') is one of the chip's metrics. */
static int chip_has(const char *name, const char *const *base, size_t nbase)
{
	size_t len = strcspn(name, ".");
	for (size_t k = 0; k < nbase; k++)
		if (strlen(base[k]) == len && strncmp(base[k], name, len) == 0)
			return 1;
	return 0;
}

static int host_init(const uint8_t *availability, struct strbuf *why)
{
	CUpti_Profiler_Host_Initialize_Params hi = {.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
	hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
	hi.pChipName = prof.chip;
	hi.pCounterAvailabilityImage = availability;
	if (cupti_failed(cupti_prof.cuptiProfilerHostInitialize(&hi), "cuptiProfilerHostInitialize", why))
		return -1;
	prof.host = hi.pHostObject;
	return 0;
}

static void host_release(void)
{
	CUpti_Profiler_Host_Deinitialize_Params hd = {.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
	hd.pHostObject = prof.host;
	if (prof.host)
		cupti_prof.cuptiProfilerHostDeinitialize(&hd);
	prof.host = NULL;
}

static CUptiResult add_metrics(const char **names, size_t n)
{
	CUpti_Profiler_Host_ConfigAddMetrics_Params am = {.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
	am.pHostObject = prof.host;
	am.ppMetricNames = names;
	am.numMetrics = n;
	return n ? cupti_prof.cuptiProfilerHostConfigAddMetrics(&am) : CUPTI_SUCCESS;
}

/* Adds one alternative ("a" or "a+b") to the config. A metric the host refuses may leave it
 * half-configured, so it is made again with the metrics added before. Returns 0, -1 when
 * refused, -2 when the host cannot be made again (why set). */
static int try_alternative(struct metric *m, const char *alt, const uint8_t *availability, struct strbuf *why)
{
	char *copy = xstrdup(alt), *plus = strchr(copy, '+');
	const char *parts[2] = {copy, plus ? plus + 1 : NULL};
	if (plus)
		*plus = '\0';
	size_t n = plus ? 2 : 1;
	for (size_t k = 0; k < n; k++)
		prof.names[prof.nnames + k] = parts[k];
	if (add_metrics(prof.names + prof.nnames, n) == CUPTI_SUCCESS) {
		for (size_t k = 0; k < 2; k++)
			m->comp[k] = k < n ? (int)(prof.nnames + k) : -1;
		prof.nnames += n;
		return 0;
	}
	free(copy);
	host_release();
	if (host_init(availability, why) != 0 || add_metrics(prof.names, prof.nnames) != CUPTI_SUCCESS)
		return -2;
	return -1;
}

/* The chip's base metrics of each type, as lists the host object owns: valid only while it
 * lives. Returns 0, or -1 with why. */
static int base_metrics(const char **base[], size_t nbase[], struct strbuf *why)
{
	for (int type = 0; type < CUPTI_METRIC_TYPE__COUNT; type++) {
		CUpti_Profiler_Host_GetBaseMetrics_Params bm = {.structSize = CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE};
		bm.pHostObject = prof.host;
		bm.metricType = (CUpti_MetricType)type;
		if (cupti_failed(cupti_prof.cuptiProfilerHostGetBaseMetrics(&bm), "cuptiProfilerHostGetBaseMetrics", why))
			return -1;
		base[type] = bm.ppMetricNames;
		nbase[type] = bm.numMetrics;
	}
	return 0;
}

/* Chooses each figure's metrics among the chip's and adds them to the config. Returns 0, or
 * -1 (why set) when the host cannot go on. */
static int configure(const uint8_t *availability, struct strbuf *why)
{
	const char **base[CUPTI_METRIC_TYPE__COUNT];
	size_t nbase[CUPTI_METRIC_TYPE__COUNT];
	if (base_metrics(base, nbase, why) != 0)
		return -1;
	for (size_t i = 0; i < NMETRICS; i++) {
		struct metric *m = &prof.metrics[i];
		if (i < ARRAY_SIZE(metric_defs)) {
			m->key = xstrdup(metric_defs[i].key);
			for (size_t a = 0; a < 2; a++)
				m->alt[a] = metric_defs[i].alt[a] ? xstrdup(metric_defs[i].alt[a]) : NULL;
		} else {
			const char *reason = stall_reasons[i - ARRAY_SIZE(metric_defs)];
			m->key = xasprintf("stalls.%s", reason);
			m->alt[0] = xasprintf("smsp__warp_issue_stalled_%s_per_warp_active.pct", reason);
		}
		m->comp[0] = m->comp[1] = -1;
		struct strbuf refused;
		strbuf_init(&refused);
		for (size_t a = 0; a < 2 && m->alt[a] && m->comp[0] < 0; a++) {
			const char *alt = m->alt[a], *plus = strchr(alt, '+');
			int known = 0;
			for (int type = 0; type < CUPTI_METRIC_TYPE__COUNT; type++)
				known += chip_has(alt, base[type], nbase[type]) + (plus && chip_has(plus + 1, base[type], nbase[type]));
			int rc = known < (plus ? 2 : 1) ? -1 : try_alternative(m, alt, availability, why);
			if (rc == -1)
				strbuf_addf(&refused, "%s%s", refused.len ? ", " : "", alt);
			/* a refusal made the host again: the lists of the one before are gone */
			if (rc == -2 || (rc == -1 && known >= (plus ? 2 : 1) && base_metrics(base, nbase, why) != 0)) {
				strbuf_release(&refused);
				return -1;
			}
		}
		if (m->comp[0] < 0)
			m->missing = xasprintf("CUPTI has no such metric for %s: %s", prof.chip, refused.buf);
		strbuf_release(&refused);
	}
	return 0;
}

/* Readies the profiler for the target's GPU, once per process. Returns 0, or -1 with why. */
static int profiler_ready(const struct metrics_target *t, struct strbuf *why)
{
	if (prof.tried) {
		strbuf_addstr(why, prof.why.buf);
		return prof.why.len ? -1 : 0;
	}
	prof.tried = 1;
	strbuf_init(&prof.why);
	struct strbuf *w = &prof.why;
	uint8_t *availability = NULL;
	CUpti_Profiler_Initialize_Params ip = {.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
	CUpti_Profiler_DeviceSupported_Params ds = {.structSize = CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
	CUpti_Device_GetChipName_Params cn = {.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE};
	CUpti_Profiler_GetCounterAvailability_Params ca = {.structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
	CUpti_Profiler_Host_GetConfigImageSize_Params cs = {.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
	CUpti_Profiler_Host_GetConfigImage_Params ci = {.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
	CUpti_Profiler_Host_GetNumOfPasses_Params np = {.structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
	ds.cuDevice = t->dev;
	ds.api = CUPTI_PROFILER_RANGE_PROFILING;
	cn.deviceIndex = (size_t)t->ordinal;
	ca.ctx = t->ctx;
	if (cupti_profiler_open(w) != 0 ||
	    cupti_failed(cupti_prof.cuptiProfilerInitialize(&ip), "cuptiProfilerInitialize", w) ||
	    cupti_failed(cupti_prof.cuptiProfilerDeviceSupported(&ds), "cuptiProfilerDeviceSupported", w))
		goto out;
	if (ds.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
		strbuf_addf(w, "CUPTI cannot profile %s here (architecture %d, vGPU %d, confidential computing %d, WSL %d, "
			       "SLI %d, CMP %d; 3 is supported)", t->device, ds.architecture, ds.vGpu, ds.confidentialCompute,
			    ds.wsl, ds.sli, ds.cmp);
		goto out;
	}
	if (cupti_failed(cupti_prof.cuptiDeviceGetChipName(&cn), "cuptiDeviceGetChipName", w) ||
	    cupti_failed(cupti_prof.cuptiProfilerGetCounterAvailability(&ca), "cuptiProfilerGetCounterAvailability", w))
		goto out;
	snprintf(prof.chip, sizeof(prof.chip), "%s", cn.pChipName);
	availability = xmalloc(ca.counterAvailabilityImageSize + 1);
	ca.pCounterAvailabilityImage = availability;
	if (cupti_failed(cupti_prof.cuptiProfilerGetCounterAvailability(&ca), "cuptiProfilerGetCounterAvailability", w) ||
	    host_init(availability, w) != 0 || configure(availability, w) != 0)
		goto out;
	if (prof.nnames == 0) {
		strbuf_addf(w, "CUPTI knows none of kg-bench's metrics for %s", prof.chip);
		goto out;
	}
	cs.pHostObject = prof.host;
	if (cupti_failed(cupti_prof.cuptiProfilerHostGetConfigImageSize(&cs), "cuptiProfilerHostGetConfigImageSize", w))
		goto out;
	prof.config_size = cs.configImageSize;
	prof.config = xmalloc(prof.config_size + 1);
	ci.pHostObject = prof.host;
	ci.configImageSize = prof.config_size;
	ci.pConfigImage = prof.config;
	np.configImageSize = prof.config_size;
	np.pConfigImage = prof.config;
	if (cupti_failed(cupti_prof.cuptiProfilerHostGetConfigImage(&ci), "cuptiProfilerHostGetConfigImage", w) ||
	    cupti_failed(cupti_prof.cuptiProfilerHostGetNumOfPasses(&np), "cuptiProfilerHostGetNumOfPasses", w))
		goto out;
	prof.passes = np.numOfPasses;
out:
	free(availability);
	strbuf_addstr(why, w->buf);
	return w->len ? -1 : 0;
}

/* ---------------------------------------------------------------- one kernel */

/* Profiles the target: the range profiler enabled on the context only for this (so that it
 * never touches a timed launch), one auto range (the launch), one pass after another as the
 * caller replays it (CUPTI's own kernel replay when the user replay is refused). Fills
 * values[] (one per prof.names). Returns 0, or -1 with why. */
static int profile(const struct metrics_target *t, const struct metrics_replay *replay, double *values,
		   const char **mode, struct strbuf *why)
{
	CUpti_RangeProfiler_Enable_Params en = {.structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
	en.ctx = t->ctx;
	if (cupti_failed(cupti_prof.cuptiRangeProfilerEnable(&en), "cuptiRangeProfilerEnable", why))
		return -1;
	CUpti_RangeProfiler_Object *obj = en.pRangeProfilerObject;
	CUpti_RangeProfiler_GetCounterDataSize_Params ds = {.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
	CUpti_RangeProfiler_CounterDataImage_Initialize_Params di = {.structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
	CUpti_RangeProfiler_SetConfig_Params sc = {.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
	CUpti_RangeProfiler_DecodeData_Params dd = {.structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
	CUpti_RangeProfiler_GetCounterDataInfo_Params gi = {.structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
	CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
	uint8_t *image = NULL;
	int rc = -1;
	ds.pRangeProfilerObject = obj;
	ds.pMetricNames = prof.names;
	ds.numMetrics = prof.nnames;
	ds.maxNumOfRanges = 1;
	ds.maxNumRangeTreeNodes = 1;
	if (cupti_failed(cupti_prof.cuptiRangeProfilerGetCounterDataSize(&ds), "cuptiRangeProfilerGetCounterDataSize", why))
		goto out;
	image = xcalloc(ds.counterDataSize + 1, 1);
	di.pRangeProfilerObject = obj;
	di.counterDataSize = ds.counterDataSize;
	di.pCounterData = image;
	if (cupti_failed(cupti_prof.cuptiRangeProfilerCounterDataImageInitialize(&di),
			 "cuptiRangeProfilerCounterDataImageInitialize", why))
		goto out;
	sc.pRangeProfilerObject = obj;
	sc.configSize = prof.config_size;
	sc.pConfig = prof.config;
	sc.counterDataImageSize = ds.counterDataSize;
	sc.pCounterDataImage = image;
	sc.range = CUPTI_AutoRange;
	sc.replayMode = CUPTI_UserReplay;
	sc.maxRangesPerPass = 1;
	sc.numNestingLevels = 1;
	sc.minNestingLevel = 1;
	sc.targetNestingLevel = 1;
	*mode = "user";
	/* Our own replay readies each pass as a timed launch is readied (outputs poisoned, the
	 * L2 flushed); CUPTI's kernel replay saves and restores memory around passes instead. */
	if (cupti_prof.cuptiRangeProfilerSetConfig(&sc) != CUPTI_SUCCESS) {
		sc.replayMode = CUPTI_KernelReplay;
		*mode = "kernel";
		if (cupti_failed(cupti_prof.cuptiRangeProfilerSetConfig(&sc), "cuptiRangeProfilerSetConfig", why))
			goto out;
	}
	for (size_t pass = 0;; pass++) {
		CUpti_RangeProfiler_Start_Params st = {.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
		CUpti_RangeProfiler_Stop_Params sp = {.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
		st.pRangeProfilerObject = sp.pRangeProfilerObject = obj;
		const char *err = replay->prepare(replay->arg);
		if (!err && cupti_failed(cupti_prof.cuptiRangeProfilerStart(&st), "cuptiRangeProfilerStart", why))
			goto out;
		if (!err)
			err = replay->launch(replay->arg);
		if (err) {
			strbuf_addf(why, "the kernel's replay for the profiler failed: %s", err);
			goto out;
		}
		if (cupti_failed(cupti_prof.cuptiRangeProfilerStop(&sp), "cuptiRangeProfilerStop", why))
			goto out;
		if (sp.isAllPassSubmitted)
			break;
		if (pass + 1 == MAX_PASSES) {
			strbuf_addf(why, "the profiler wanted more than %d passes", MAX_PASSES);
			goto out;
		}
	}
	dd.pRangeProfilerObject = obj;
	gi.pCounterDataImage = image;
	gi.counterDataImageSize = ds.counterDataSize;
	if (cupti_failed(cupti_prof.cuptiRangeProfilerDecodeData(&dd), "cuptiRangeProfilerDecodeData", why) ||
	    cupti_failed(cupti_prof.cuptiRangeProfilerGetCounterDataInfo(&gi), "cuptiRangeProfilerGetCounterDataInfo", why))
		goto out;
	if (dd.numOfRangeDropped || gi.numTotalRanges != 1) {
		strbuf_addf(why, "the profiler recorded %zu ranges (%zu dropped) for one launch", gi.numTotalRanges,
			    dd.numOfRangeDropped);
		goto out;
	}
	ev.pHostObject = prof.host;
	ev.pCounterDataImage = image;
	ev.counterDataImageSize = ds.counterDataSize;
	ev.rangeIndex = 0;
	ev.ppMetricNames = prof.names;
	ev.numMetrics = prof.nnames;
	ev.pMetricValues = values;
	if (cupti_failed(cupti_prof.cuptiProfilerHostEvaluateToGpuValues(&ev), "cuptiProfilerHostEvaluateToGpuValues", why))
		goto out;
	rc = 0;
out:
	{
		CUpti_RangeProfiler_Disable_Params dis = {.structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
		dis.pRangeProfilerObject = obj;
		cupti_prof.cuptiRangeProfilerDisable(&dis);
	}
	free(image);
	return rc;
}

/* Puts value under key in values, or under values.stalls for "stalls.REASON". */
static void add_value(cJSON *values, const char *key, double value)
{
	if (strncmp(key, "stalls.", 7) != 0) {
		json_add_number(values, key, value);
		return;
	}
	cJSON *stalls = cJSON_GetObjectItemCaseSensitive(values, "stalls");
	if (!stalls) {
		stalls = json_object();
		json_add(values, "stalls", stalls);
	}
	json_add_number(stalls, key + 7, value);
}

cJSON *metrics_collect(const struct metrics_target *t, const struct metrics_replay *replay)
{
	double t0 = monotonic_ms();
	cJSON *m = json_object(), *values = json_object(), *unavailable = json_object();
	struct strbuf why;
	strbuf_init(&why);
	add_occupancy(t, values, unavailable);
	double results[2 * NMETRICS];
	const char *mode = NULL;
	int ok = profiler_ready(t, &why) == 0 && profile(t, replay, results, &mode, &why) == 0;
	if (!ok) {
		for (size_t i = 0; i < ARRAY_SIZE(metric_defs); i++)
			json_add_string(unavailable, metric_defs[i].key, why.buf);
		json_add_string(unavailable, "stalls", why.buf);
	}
	for (size_t i = 0; i < NMETRICS && ok; i++) {
		const struct metric *mt = &prof.metrics[i];
		double v = mt->comp[0] < 0 ? NAN : results[mt->comp[0]] + (mt->comp[1] >= 0 ? results[mt->comp[1]] : 0);
		if (mt->comp[0] < 0)
			json_add_string(unavailable, mt->key, mt->missing);
		else if (!isfinite(v) || v < 0)
			json_add_string(unavailable, mt->key, "the profiler gave no value");
		else
			add_value(values, mt->key, strcmp(mt->key, "duration_us") == 0 ? v / 1e3 : v);
	}
	json_add_string(m, "status", ok ? "ok" : "unavailable");
	if (!ok)
		json_add_string(m, "why", why.buf);
	json_add_string(m, "source", "cupti-range-profiler");
	json_add_string(m, "device", t->device);
	if (ok) {
		json_add_number(m, "passes", (double)prof.passes);
		json_add_string(m, "replay", mode);
	}
	json_add_number(m, "cost_ms", monotonic_ms() - t0);
	json_add(m, "values", values);
	json_add(m, "unavailable", unavailable);
	strbuf_release(&why);
	return m;
}
