/* NCCL kernel names (see host-data-facts §1.6): ncclDevKernel_<Coll>_... since NCCL 2.19,
 * ncclKernel_<Coll>_... before. */
#ifndef FS_IMP_NCCL_NAMES_H
#define FS_IMP_NCCL_NAMES_H

#include <stddef.h>

/**
 * Writes the collective of an NCCL kernel name (mangled, demangled or plain) into out:
 * "AllReduce", "AllGather", "SendRecv", "Generic", ... Returns 0, or -1 when the name is
 * not an NCCL kernel's.
 */
int fs_nccl_kernel_collective(const char *kernel, char *out, size_t len);

#endif
