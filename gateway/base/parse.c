#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/parse.h"

int gw_parse_port(const char *s, uint16_t *out)
{
	size_t n = strlen(s);

	if (n < 1 || n > 5 || strspn(s, "0123456789") != n)
		return -EINVAL;
	unsigned long v = strtoul(s, NULL, 10);
	if (v < 1 || v > UINT16_MAX)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

int gw_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "kmgt";
	unsigned shift = 0;
	char *end;

	/* strtoull alone would take spaces, signs and "-1" wrapping. */
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end) {
		const char *u = strchr(units, tolower((unsigned char)*end));
		if (!u || end[1])
			return -EINVAL;
		shift = 10 * (unsigned)(u - units + 1);
	}
	if (v > UINT64_MAX >> shift)
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}
