/* policy/event.c - names of op kinds, element types and accesses (see event.h). */
#include "policy/event.h"

#include <string.h>

static const char *const op_names[VMEM_OP_COUNT] = {
#define VMEM_OP_NAME(e, name, compute) [VMEM_##e] = name,
	VMEM_OP_KINDS(VMEM_OP_NAME)
#undef VMEM_OP_NAME
};

static const unsigned char op_compute[VMEM_OP_COUNT] = {
#define VMEM_OP_COMPUTE(e, name, compute) [VMEM_##e] = compute,
	VMEM_OP_KINDS(VMEM_OP_COMPUTE)
#undef VMEM_OP_COMPUTE
};

const char *vmem_op_name(vmem_op_kind_t kind)
{
	if ((unsigned)kind >= VMEM_OP_COUNT)
		return "unknown";
	return op_names[kind];
}

int vmem_op_is_compute(vmem_op_kind_t kind)
{
	if ((unsigned)kind >= VMEM_OP_COUNT)
		return 0;
	return op_compute[kind];
}

int vmem_op_is_backward(vmem_op_kind_t kind)
{
	switch (kind) {
	case VMEM_OP_CONV_BWD_DATA:
	case VMEM_OP_CONV_BWD_FILTER:
	case VMEM_OP_CONV_BWD_BIAS:
	case VMEM_OP_ACT_BWD:
	case VMEM_OP_POOL_BWD:
	case VMEM_OP_SOFTMAX_BWD:
	case VMEM_OP_BN_BWD:
		return 1;
	default:
		return 0;
	}
}

vmem_op_kind_t vmem_op_from_name(const char *name)
{
	if (!name)
		return VMEM_OP_COUNT;
	for (int k = 0; k < VMEM_OP_COUNT; k++)
		if (strcmp(op_names[k], name) == 0)
			return (vmem_op_kind_t)k;
	return VMEM_OP_COUNT;
}

static const char *const dtype_names[VMEM_DTYPE_COUNT] = {
	[VMEM_DTYPE_UNKNOWN] = "?", [VMEM_DTYPE_F32] = "f32", [VMEM_DTYPE_F64] = "f64",
	[VMEM_DTYPE_F16] = "f16", [VMEM_DTYPE_BF16] = "bf16", [VMEM_DTYPE_TF32] = "tf32",
	[VMEM_DTYPE_FP8_E4M3] = "fp8e4m3", [VMEM_DTYPE_FP8_E5M2] = "fp8e5m2",
	[VMEM_DTYPE_I8] = "i8", [VMEM_DTYPE_U8] = "u8", [VMEM_DTYPE_I32] = "i32",
	[VMEM_DTYPE_I64] = "i64", [VMEM_DTYPE_OTHER] = "other",
};

const char *vmem_dtype_name(vmem_dtype_t t)
{
	if ((unsigned)t >= VMEM_DTYPE_COUNT)
		return "?";
	return dtype_names[t];
}

const char *vmem_access_name(uint8_t a)
{
	switch (a & (VMEM_ACCESS_RW | VMEM_ACCESS_WHOLE)) {
	case VMEM_ACCESS_R: return "r";
	case VMEM_ACCESS_W: return "w";
	case VMEM_ACCESS_W | VMEM_ACCESS_WHOLE: return "w!";
	case VMEM_ACCESS_RW:
	case VMEM_ACCESS_RW | VMEM_ACCESS_WHOLE: return "rw";
	default: return "";
	}
}
