/* t1.h: loads a kernel spec in the community T1 format (see README.md, "Kernel specs") and
 * enumerates the valid configurations of its tuning space.
 *
 * Loading validates the whole document against the T1 schema and compiles every expression
 * (Values, Conditions, GlobalSize, LocalSize, Arguments[].Size, ProblemSize), so that a bad
 * spec fails at once with one line naming the file and the field:
 *   spec.json: ConfigurationSpace.TuningParameters[2].Values: column 7: invalid syntax ...
 * Expressions see the tuning parameters and ProblemSize as names. */
#ifndef KG_T1_H
#define KG_T1_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "pyexpr.h"

enum t1_param_type { T1_INT, T1_UINT, T1_FLOAT, T1_BOOL, T1_STRING };

struct t1_param {
	const char *name;	  /* the Name; a C identifier, since it becomes -DNAME=VALUE */
	enum t1_param_type type;  /* the Type */
	const struct pyval *values; /* the evaluated Values, in order; never empty */
	size_t nvalues;
	char **values_json;	  /* values[i] as JSON text, rendered once for fast output */
	const cJSON *default_value; /* the Default, if given (a common extension); inside t1_spec.json */
};

struct t1_condition {
	char *field;		/* "ConfigurationSpace.Conditions[1].Expression", for messages */
	struct pyexpr *expr;	/* compiled against t1_spec.names */
};

/* How GlobalSize is read: as blocks per dimension (CUDA, Vulkan) or threads (OpenCL). */
enum t1_global_size_type { T1_GLOBAL_CUDA, T1_GLOBAL_OPENCL };

/* KernelGraph.TensorMaps[k]: a CUDA tensor map (CUtensorMap, 128 bytes) over a ReadOnly Vector
 * argument, which kg-bench encodes (cuTensorMapEncodeTiled) for each configuration and passes
 * by value after the Arguments, in the order of the list, for kernels that copy tiles with the
 * tensor memory accelerator (cp.async.bulk.tensor); a kernel that declares fewer parameters
 * ignores them. The tensor is the argument's whole buffer, dense: Dims[0] is the innermost
 * dimension, the stride of dimension d the product of the dims before it times the element's
 * bytes, and their product at most the buffer's elements. Box is the tile one copy moves (each
 * entry at most 256, the innermost a multiple of 16 bytes), Swizzle the shared-memory swizzle in
 * bytes (0, 32, 64 or 128, and at least the innermost box's bytes). Elements outside the tensor
 * arrive as zeros. Only inputs: an input's buffer stays put, so its map is encoded once. */
#define T1_TENSOR_MAP_MAX_RANK 5
struct t1_tensor_map {
	char *field;		 /* "KernelGraph.TensorMaps[0]", for messages */
	const char *argument;	 /* Argument: the Name of a ReadOnly Vector argument (inside t1_spec.json) */
	size_t rank;		 /* 1 .. T1_TENSOR_MAP_MAX_RANK: Dims and Box have as many */
	struct pyexpr *dims[T1_TENSOR_MAP_MAX_RANK], *box[T1_TENSOR_MAP_MAX_RANK];
	int swizzle;		 /* bytes: 0 (none), 32, 64 or 128 */
};

/* Conditions that hold for one kernel of the spec rather than for its whole space: the spec's
 * own kernel's (KernelGraph.Conditions, name NULL) or those of the kernel a KernelGraph.Patches
 * entry makes (its Conditions, name its Name). Each is an object {"Expression", "Parameters"}
 * as in ConfigurationSpace.Conditions (Parameters optional), so that a patch whose kernel takes
 * other configurations than the spec's (another warp layout, say) says which. */
struct t1_kernel_conditions {
	const char *name;		 /* the patch's Name (inside t1_spec.json), or NULL */
	struct t1_condition *conditions; /* field "KernelGraph.Patches[1].Conditions[0].Expression" */
	size_t n;
};

/* About 1.5 s of expression work: no real spec's conditions come near it, since only what an
 * evaluation spends beyond its first PYEXPR_FREE_STEPS counts. */
#define T1_LISTING_STEPS 200000000

/* Why a spec's file is refused, after the reason file_confined gives. */
#define T1_FILES_RULE "a spec may name only files in its folder, as a kernel may include only files in its"

struct t1_spec {
	char *path;		  /* the spec file, as given */
	cJSON *json;		  /* the whole document, for the fields later tools read */
	const char *name;	  /* General.BenchmarkName, or else KernelSpecification.KernelName */
	const char *language;	  /* KernelSpecification.Language */
	const char *kernel_name;  /* KernelSpecification.KernelName */
	const char *kernel_file;  /* KernelSpecification.KernelFile, as given: relative, no ".." */
	char *kernel_dir;	  /* the spec's directory, which must hold every file the spec names */
	char *kernel_path;	  /* KernelFile, resolved against the spec's directory */
	enum t1_global_size_type global_size_type;
	struct pyexpr *global_size[3]; /* X, Y, Z; NULL where absent (meaning 1) */
	struct pyexpr *local_size[3];
	struct pyexpr *shared_memory; /* KernelGraph.SharedMemory: dynamic shared bytes of a
					 configuration (NULL: none beyond the fixed ones) */
	struct t1_tensor_map *tensor_maps; /* KernelGraph.TensorMaps, in order */
	size_t ntensor_maps;
	struct t1_kernel_conditions *kernel_conditions; /* KernelGraph.Conditions, then each Patches
							   entry's that has some */
	size_t nkernel_conditions;
	struct t1_param *params;  /* ConfigurationSpace.TuningParameters, in order */
	size_t nparams;
	struct t1_condition *conditions; /* ConfigurationSpace.Conditions, in order */
	size_t nconditions;
	const char **names;	  /* the names expressions see: the parameters, then "ProblemSize" */
	size_t nnames;		  /* nparams + 1 */
	struct pyval problem_size; /* KernelSpecification.ProblemSize, or None */
	struct pyarena *arena;	  /* holds values and problem_size */
	/* The conditions' shared budget of expression work (pyexpr_budget): T1_LISTING_STEPS
	 * beyond the first PYEXPR_FREE_STEPS of each evaluation, for the load and the checks
	 * that follow it, and afresh for each walk of the space (a listing or a count). */
	struct pyexpr_budget *budget;
};

/* Reads and validates the T1 file at path. On any error, reports it in one line
 * ("<path>: <field>: <why>") and returns NULL, with *unreadable set when the file itself
 * could not be read (as opposed to being read and found wrong). The caller frees the
 * result with t1_free. */
struct t1_spec *t1_load(const char *path, int *unreadable);
void t1_free(struct t1_spec *spec);

/* The number of points in the Cartesian product of all Values; sets *saturated and
 * returns UINT64_MAX when it does not fit in 64 bits. */
uint64_t t1_cartesian_size(const struct t1_spec *spec, int *saturated);

/* Called once per valid configuration: values[i] is the value of params[i] (and
 * values[nparams] is ProblemSize), and indices[i] its position in params[i].values.
 * Return 0 to go on, anything else to stop the walk. */
typedef int (*t1_config_fn)(void *ctx, const struct pyval *values, const size_t *indices);

/* Calls fn for every configuration that satisfies all conditions, in the order of the
 * Cartesian product with the first parameter varying slowest. Each condition is checked as
 * soon as every parameter it reads is bound, so excluded subspaces are never walked.
 * Returns 0 when the walk completed, fn's non-zero value when fn stopped it, or -1 after
 * reporting a condition that failed to evaluate (division by zero, type error). */
int t1_enumerate(const struct t1_spec *spec, t1_config_fn fn, void *ctx);
/* The same, binding at most max_tries values on the way (every level's, not only whole
 * configurations): *cut is set, and 0 returned, when it stopped there short of the end. */
int t1_enumerate_bounded(const struct t1_spec *spec, uint64_t max_tries, t1_config_fn fn, void *ctx, int *cut);

/* Counts the valid configurations without visiting subspaces that no condition constrains,
 * stopping as soon as the count exceeds limit, so that a caller asking only whether there
 * are more than limit does not walk a space of billions (UINT64_MAX: count them all). The
 * walk binds at most T1_COUNT_TRIES x limit values: a space whose valid configurations are
 * rarer than that (a condition rejecting nearly all of billions) counts as more than limit,
 * since listing it would cost more than drawing from it.
 * Returns 0 with *count set: the count when it is at most limit, else a number above limit
 * (UINT64_MAX and *saturated when it does not fit); or -1 after reporting a condition that
 * failed to evaluate. */
#define T1_COUNT_TRIES 16
int t1_count(const struct t1_spec *spec, uint64_t limit, uint64_t *count, int *saturated);

/* The configuration given by value indices (as passed to t1_config_fn) as a JSON object
 * {name: value}, in parameter order. The caller frees it with cJSON_Delete. */
cJSON *t1_config_to_json(const struct t1_spec *spec, const size_t *indices);

/* Finds a JSON value among params[k].Values, comparing as Python's == does (256 == 256.0,
 * True == 1). Returns 0 with *index set, or -1 when it is not one of the Values. */
int t1_value_index(const struct t1_spec *spec, size_t k, const cJSON *value, size_t *index);

/* Fills values[0..nnames-1] for the configuration given by indices, as t1_config_fn gets it. */
void t1_bind(const struct t1_spec *spec, const size_t *indices, struct pyval *values);

/* Finds the configuration config (a JSON object {name: value}, as builds and events carry it)
 * among the Values: indices[k] gets the position of config's value of params[k], compared as
 * t1_value_index compares. Returns 0, or -1 at the first parameter that config lacks or gives
 * a value not among its Values, with *missing (unless NULL) set to that parameter's index;
 * indices[0..*missing) are set then, the rest not. Members that are not parameters are
 * ignored. */
int t1_config_indices(const struct t1_spec *spec, const cJSON *config, size_t *indices, size_t *missing);

/* t1_config_indices, then t1_bind: fills values[0..nnames-1] for config. Returns 0, or -1 as
 * t1_config_indices does (values then unspecified). */
int t1_bind_config(const struct t1_spec *spec, const cJSON *config, struct pyval *values, size_t *missing);

/* Checks every condition against values (from t1_bind). Returns 0 when all hold; otherwise
 * 1 with why set to the first condition that does not hold or cannot be evaluated:
 *   ConfigurationSpace.Conditions[0] does not hold: "a * b <= 64" (with a=32, b=4)
 * why may be NULL: a caller that only asks whether (kg-propose's refused draws) is spared
 * writing the reason. */
int t1_check_conditions(const struct t1_spec *spec, const struct pyval *values, struct strbuf *why);

/* Checks the kernel conditions that apply to a variant made by applying the KernelGraph.Patches
 * entries named applied[0..napplied), in that order, to the spec's kernel: the Conditions of
 * the latest of them that states some (the kernel it made; a later entry without Conditions
 * keeps them); when none does, KernelGraph.Conditions (the spec's own kernel's). Returns 0
 * when all hold; otherwise 1 with why set as t1_check_conditions sets it. */
int t1_check_kernel_conditions(const struct t1_spec *spec, const char *const *applied, size_t napplied,
			       const struct pyval *values, struct strbuf *why);

/* Completes the configuration wanted (may be NULL) from parent's (may be NULL), then the
 * Defaults, then the first valid configuration, and checks it: indices get the complete
 * configuration and merged the values taken from wanted, parent and Defaults. Returns 0, or
 * 1 with why set: a name that is not a parameter, every value not among its Values (joined
 * by "; "), or a condition that does not hold or cannot be evaluated. */
int t1_resolve_config(const struct t1_spec *spec, const cJSON *wanted, const cJSON *parent, size_t *indices,
		      cJSON *merged, struct strbuf *why);

#define T1_FREE SIZE_MAX /* in t1_first_config's fixed[]: any value will do */

/* The first valid configuration, in t1_enumerate's order, whose parameter k has the value
 * fixed[k] (an index into its Values) wherever fixed[k] is not T1_FREE. Returns 1 with
 * indices set, 0 when there is none, or -1 after reporting a condition that failed to
 * evaluate. */
int t1_first_config(const struct t1_spec *spec, const size_t *fixed, size_t *indices);

/* The launch of a configuration: grid[d] blocks of block[d] threads in each dimension,
 * from GlobalSize and LocalSize read through GlobalSizeType (OpenCL: GlobalSize counts
 * threads and is rounded up to whole blocks), and shared_bytes of dynamic shared memory
 * from KernelGraph.SharedMemory (0 when absent), on top of what every configuration gets
 * (SharedMemory, Local arguments). Returns 0, or -1 with why set when an expression fails
 * or does not give a positive integer (shared_bytes: a non-negative one). */
struct t1_launch {
	int64_t grid[3], block[3];
	int64_t shared_bytes;
};
int t1_launch_geometry(const struct t1_spec *spec, const struct pyval *values, struct t1_launch *launch,
		       struct strbuf *why);

/* A tensor map's Dims and Box for a configuration (values bound as t1_bind does): each Dims
 * entry a positive integer, each Box entry from 1 to 256 and at most its dimension's size, the
 * innermost box elem_bytes * Box[0] a multiple of 16 bytes and no more than a nonzero Swizzle.
 * Returns 0, or -1 with why set ("KernelGraph.TensorMaps[0].Box[1]: ... gives 512, ..."). */
int t1_tensor_map_eval(const struct t1_spec *spec, const struct t1_tensor_map *map, const struct pyval *values,
		       size_t elem_bytes, uint64_t *dims, uint32_t *box, struct strbuf *why);

#endif
