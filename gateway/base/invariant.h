/* Assertions of the invariants the code claims (a request is on exactly
 * one list, a vol_io completes once), compiled in by the ASan and fuzz
 * builds (-DNVMF_DEBUG_INVARIANTS, see the Makefile) and free otherwise:
 * they sit on the data path. */
#ifndef GW_INVARIANT_H
#define GW_INVARIANT_H

#ifdef NVMF_DEBUG_INVARIANTS
#include <stdio.h>
#include <stdlib.h>

#define NVMF_INVARIANTS 1
#define INVARIANT(cond, what)                                                             \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "%s:%d: invariant broken: %s (%s)\n", __FILE__,   \
				__LINE__, what, #cond);                                   \
			abort();                                                          \
		}                                                                         \
	} while (0)
#else
#define NVMF_INVARIANTS 0
#define INVARIANT(cond, what) ((void)sizeof(cond))
#endif

#endif
