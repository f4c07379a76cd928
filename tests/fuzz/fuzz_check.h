/* check(cond): the fuzzers' assertion of what the code claims; unlike
 * assert() it stays on whatever NDEBUG says, and names the line. */
#ifndef TESTS_FUZZ_CHECK_H
#define TESTS_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define check(c)                                                                         \
	do {                                                                             \
		if (!(c)) {                                                              \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                         \
		}                                                                        \
	} while (0)

#endif
