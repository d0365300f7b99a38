/* kargs.h: a kernel's arguments as a T1 spec declares them (KernelSpecification.Arguments):
 * their types and sizes, the data that fills them, and how an output is compared with its
 * reference. No GPU here: kg-bench fills and compares on the device by the same element
 * rules (karg_elem.h); the host's fills serve files, Generators it cannot translate, tests
 * and independent checks. */
#ifndef KG_KARGS_H
#define KG_KARGS_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#include "karg_elem.h"
#include "t1.h"
#include "xalloc.h"

enum karg_memory { KARG_SCALAR, KARG_VECTOR, KARG_LOCAL, KARG_SYMBOL };
enum karg_access { KARG_READ, KARG_WRITE, KARG_READ_WRITE };
enum karg_fill { KARG_FILL_CONSTANT, KARG_FILL_RANDOM, KARG_FILL_GENERATOR, KARG_FILL_BINARY };

struct karg {
	char *name;		  /* Name, or "argument K" */
	char *field;		  /* "KernelSpecification.Arguments[K]", for messages */
	enum karg_base base;	  /* the element type, or of each lane of a vector type */
	size_t lanes;		  /* 1; or 2, 4, 8, 16 for float4 and the like */
	size_t elem_bytes;	  /* bytes of one element: base size x lanes, or TypeSize */
	size_t count;		  /* elements: Size (1 for a scalar) */
	enum karg_memory memory;  /* Scalar: passed by value; Vector: a device buffer; Local: dynamic
				     shared memory of count elements; Symbol: a __constant__ or
				     __device__ variable of that name, written before each launch */
	enum karg_access access;  /* ReadOnly, WriteOnly or ReadWrite; ReadWrite when absent */
	enum karg_fill fill;
	double fill_value;	  /* Constant: the value; Random: the largest magnitude */
	int has_fill_value;
	uint64_t seed;		  /* RandomSeed, or the argument's position */
	struct pyexpr *generator; /* Generator: DataSource, an expression in i (and ProblemSize) */
	char *data_path;	  /* BinaryRaw: DataSource, resolved against the spec's folder */
	const char *data_source;  /* BinaryRaw: DataSource as the spec gives it (in its folder) */
	const struct pyval *problem_size; /* the spec's, for Generator expressions */
	double abs_tol, rel_tol;  /* tolerances of the comparison (KernelGraph.Tolerance, or by type) */
};

struct kargs {
	struct karg *args;
	size_t n;
	size_t dynamic_smem; /* bytes of the Local arguments, plus KernelSpecification.SharedMemory */
	/* ReferenceArguments: expected outputs on the spec's own inputs. refs[j] has the type and
	 * size of args[ref_target[j]] and the reference's fill (a BinaryRaw file, say). */
	struct karg *refs;
	size_t *ref_target;
	size_t nrefs;
};

/* Reads the Arguments and ReferenceArguments of spec, which must outlive the result. A
 * reference's ValidationThreshold becomes its target's tolerance: absolute for
 * SideBySideComparison and AbsoluteDifference (checked element by element), relative for
 * SideBySideRelativeComparison. Sizes are evaluated as Kernel Tuner does, with each tuning
 * parameter bound to its whole list of values (so "max(tile)" works and every configuration
 * gets the same buffers). Returns 0, or -1 with why set ("spec.json: ...Arguments[2].Size: ..."). */
int kargs_load(const struct t1_spec *spec, struct kargs *out, struct strbuf *why);
void kargs_release(struct kargs *kargs);

/* Whether the argument is compared after a launch: a Vector or Symbol written by the kernel. */
int karg_is_output(const struct karg *a);
/* The base type's name as T1 writes it ("float", "half", "int32"). */
const char *karg_base_name(enum karg_base base);
size_t karg_bytes(const struct karg *a);
/* The magnitude a Random fill draws within: FillValue, else 1 for floats and 100 for
 * integers (karg_elem_store_random says how). */
double karg_random_range(const struct karg *a);

/* Fills host (karg_bytes(a) bytes) with the argument's data, as kg-bench's GPU harness fills
 * device buffers (the rules are lib/karg_elem.h's). Random data depends on the argument's
 * seed and on input_set, so that each input set is fresh and reproducible.
 * Returns 0, or -1 with why set (a BinaryRaw file of the wrong size, a Generator error). */
int karg_fill(const struct karg *a, uint64_t input_set, void *host, struct strbuf *why);

/* How an output differs from its reference. */
struct karg_diff {
	int passed;
	double max_abs_err, max_rel_err; /* over all elements (relative to |reference|, where nonzero) */
	size_t first_bad;		 /* the first element that failed; valid when !passed */
	size_t bad;			 /* how many elements failed */
	double ref_max;			 /* the largest |reference|: a tiny one makes a weak test */
};

/* Compares out with ref element by element (karg_elem_check: floating-point elements pass
 * when |out - ref| <= abs_tol + rel_tol * |ref|, and a NaN or infinity where the reference
 * is finite fails; other types must match exactly). */
void karg_compare(const struct karg *a, const void *out, const void *ref, struct karg_diff *diff);

/* IEEE half-precision conversions, rounding to nearest even. */
uint16_t half_from_float(float f);
float half_to_float(uint16_t h);

#endif
