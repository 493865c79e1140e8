/* policy/event.c - names of op kinds (see event.h). */
#include "policy/event.h"

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
